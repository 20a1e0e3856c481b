"""A raw protocol client over a blocking socket, so broker tests depend on protocol/ only.

Every response is checked against its API schema (``decode_response_body``), so a test that
gets an answer also proves the broker's answer is well formed.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from protocol.apis import ApiKey
from protocol.framing import FrameDecoder
from protocol.messageset import Message, Record, decode_messages, encode_message_set
from protocol.wire import decode_response_body, decode_response_envelope, encode_request

TIMEOUT = 20.0


class RawClient:
    def __init__(self, address: tuple[str, int], *, timeout: float = TIMEOUT) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.timeout = timeout
        self._decoder = FrameDecoder()
        self._next_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- frames

    def send(self, api_key: ApiKey, body: dict[str, Any], *, version: int = 0) -> int:
        correlation_id = self._next_id
        self._next_id += 1
        self.sock.sendall(encode_request(api_key, version, correlation_id, "raw-test", body))
        return correlation_id

    def receive(self) -> tuple[int, Any]:
        """The next response frame as ``(correlation_id, body)``, body not yet validated."""
        deadline = time.monotonic() + self.timeout
        while True:
            payload = self._decoder.next_frame()
            if payload is not None:
                return decode_response_envelope(payload)
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self._decoder.receive_data(data)

    def request(self, api_key: ApiKey, body: dict[str, Any], *, version: int = 0) -> dict[str, Any]:
        """Send, wait for the answer, validate it; a request-level error raises BrokerError."""
        sent = self.send(api_key, body, version=version)
        correlation_id, answer = self.receive()
        assert correlation_id == sent, (correlation_id, sent)
        return decode_response_body(api_key, version, answer)

    def closed_by_broker(self) -> bool:
        """Whether the broker closes this connection (EOF or reset) within the timeout."""
        self.sock.settimeout(self.timeout)
        try:
            return self.sock.recv(1 << 16) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    # -------------------------------------------------------------------------- shortcuts

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        result = self.request(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "configs": configs,
                    }
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        (topic,) = result["topics"]
        assert topic["error_code"] == 0, topic

    def produce_set(
        self, topic: str, partition: int, message_set: bytes, *, acks: int = 1
    ) -> dict[str, Any]:
        """The partition's result for one message set (acks 1 or -1)."""
        response = self.request(
            ApiKey.PRODUCE,
            {
                "acks": acks,
                "timeout_ms": 10_000,
                "topics": [_one_partition(topic, {"partition": partition, "records": message_set})],
            },
        )
        return _only_partition(response)

    def produce(
        self, topic: str, values: list[bytes], partition: int = 0, *, key: bytes | None = None
    ) -> int:
        """Produce ``values`` as one set; the base offset (asserts success)."""
        records = [Record(key, value, int(time.time() * 1000)) for value in values]
        result = self.produce_set(topic, partition, encode_message_set(records))
        assert result["error_code"] == 0, result
        return int(result["base_offset"])

    def fetch_partition(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 0,
    ) -> dict[str, Any]:
        response = self.request(
            ApiKey.FETCH,
            fetch_body(topic, partition, offset, max_bytes, max_wait_ms, min_bytes),
        )
        return _only_partition(response)

    def fetch(self, topic: str, partition: int = 0, offset: int = 0) -> list[Message]:
        """Every whole message from ``offset`` in one fetch (asserts success)."""
        result = self.fetch_partition(topic, partition, offset)
        assert result["error_code"] == 0, result
        messages, _ = decode_messages(result["records"])
        return [m for m in messages if m.offset >= offset]

    def list_offset(self, topic: str, partition: int, timestamp: int) -> dict[str, Any]:
        response = self.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "topics": [_one_partition(topic, {"partition": partition, "timestamp": timestamp})],
            },
        )
        return _only_partition(response)

    def metadata(self, topics: list[str] | None, *, auto_create: bool = True) -> dict[str, Any]:
        return self.request(
            ApiKey.METADATA, {"topics": topics, "allow_auto_topic_creation": auto_create}
        )


def fetch_body(
    topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int, min_bytes: int
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "max_bytes": max_bytes}
                ],
            }
        ],
    }


def _one_partition(topic: str, partition: dict[str, Any]) -> dict[str, Any]:
    return {"name": topic, "partitions": [partition]}


def _only_partition(response: dict[str, Any]) -> dict[str, Any]:
    (topic,) = response["topics"]
    (partition,) = topic["partitions"]
    return dict(partition)

