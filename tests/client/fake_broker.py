"""An in-memory broker speaking the real wire protocol, for client tests that need faults a
real broker will not produce on demand (a NOT_LEADER answer, a dropped connection, a chunk cut
mid-message). It runs a selectors loop in a thread of the test process on 127.0.0.1.

Logs are bytearrays of stored entries (v0/v1 message sets and v2 record batches); Produce assigns
offsets the way a broker does (rewriting each entry's offset field, or a batch's base offset);
ApiVersions answers the protocol's table with the ranges in ``api_versions`` in its place: by
default a broker of message format v1 (``V1_BROKER``: Produce v0..v1, Fetch v0..v3), for tests
that read what a producer stored as message sets; ``{}`` for one of today's. Fetch returns
stored bytes from the entry holding the offset, cut at the partition's max_bytes. ``faults`` is
a list of callables consulted before each request; one may return a response body (sent instead
of the real answer), ``DROP`` (close the connection), ``SILENT`` (never answer), or None (no
opinion).
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.apis import REGISTRY, ApiKey
from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import FrameDecoder
from protocol.messageset import count_messages, read_entries, set_offset
from protocol.record_batch import MAGIC, decode_batches, peek_magic, set_base_offset
from protocol.wire import Request, decode_request, encode_response

#: the API ranges of a broker from before record batches (message format v2)
V1_BROKER: dict[ApiKey, tuple[int, int]] = {ApiKey.PRODUCE: (0, 1), ApiKey.FETCH: (0, 3)}
DROP = object()
SILENT = object()
Fault = Callable[[Request], Any]


@dataclass
class PartitionLog:
    data: bytearray = field(default_factory=bytearray)
    # (first offset, last offset, byte position) of each stored entry
    entries: list[tuple[int, int, int]] = field(default_factory=list)
    next_offset: int = 0

    def append(self, records: bytes) -> int:
        if peek_magic(records) == MAGIC:
            return self._append_batch(records)
        entries, whole = read_entries(records)
        if whole != len(records) or not entries:
            raise ProtocolError("partial or empty message set")
        base = self.next_offset
        buf = bytearray(records)
        for e in entries:
            n = count_messages(e)
            set_offset(buf, e.position, self.next_offset + n - 1)  # a wrapper: its last offset
            self.entries.append((self.next_offset, self.next_offset + n - 1,
                                 len(self.data) + e.position))
            self.next_offset += n
        self.data += buf
        return base

    def _append_batch(self, records: bytes) -> int:
        """Record batches (Produce v2), checked as a broker checks them, base offsets set."""
        batches = list(decode_batches(records))
        if not batches or batches[-1].header.end != len(records):
            raise ProtocolError("partial or empty set of record batches")
        base = self.next_offset
        buf = bytearray(records)
        for batch in batches:
            header = batch.header
            set_base_offset(buf, self.next_offset, header.position)
            last = self.next_offset + header.last_offset_delta
            self.entries.append((self.next_offset, last, len(self.data) + header.position))
            self.next_offset = last + 1
        self.data += buf
        return base

    def damage(self, offset: int) -> None:
        """Flip the last byte of the entry holding ``offset``: its CRC no longer matches."""
        ends = [position for _, _, position in self.entries[1:]] + [len(self.data)]
        for (first, last, _), end in zip(self.entries, ends, strict=True):
            if first <= offset <= last:
                self.data[end - 1] ^= 0x01
                return
        raise ValueError(f"no entry holds offset {offset}")

    def read(self, offset: int, max_bytes: int) -> bytes:
        for _first, last, position in self.entries:
            if last >= offset:
                return bytes(self.data[position : position + max_bytes])
        return b""


class FakeBroker:
    def __init__(self, topics: dict[str, int], *, node_id: int = 0) -> None:
        self.node_id = node_id
        self.logs = {
            (topic, p): PartitionLog() for topic, count in topics.items() for p in range(count)
        }
        self.partition_counts = dict(topics)
        self.faults: list[Fault] = []
        # ranges unlike the protocol's, answered to ApiVersions
        self.api_versions: dict[ApiKey, tuple[int, int]] = dict(V1_BROKER)
        self.producer_ids = 0  # InitProducerId hands out 0, 1, ...
        self.requests: list[Request] = []
        #: the requests whose answers are written, in order (a test may wait for one to be on
        #: the client's socket)
        self.answered: list[Request] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()

    def messages(self, topic: str, partition: int) -> bytes:
        with self._lock:
            return bytes(self.logs[(topic, partition)].data)

    # ------------------------------------------------------------------------------- loop

    def _run(self) -> None:
        while not self._stop:
            for key, _ in self._selector.select(0.05):
                if key.data is None:
                    conn, _ = self._listener.accept()
                    conn.setblocking(True)
                    self._selector.register(conn, selectors.EVENT_READ, FrameDecoder())
                else:
                    self._serve(key.fileobj, key.data)  # type: ignore[arg-type]

    def _serve(self, conn: socket.socket, decoder: FrameDecoder) -> None:
        try:
            data = conn.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        decoder.receive_data(data)
        while (payload := decoder.next_frame()) is not None:
            request = decode_request(payload)
            with self._lock:
                self.requests.append(request)
                answer = None
                for fault in list(self.faults):
                    answer = fault(request)
                    if answer is not None:
                        break
                if answer is DROP:
                    self._drop(conn)
                    return
                if answer is None:
                    answer = self._handle(request)
            if answer is not None and answer is not SILENT:
                conn.sendall(encode_response(request.header.correlation_id,
                                             _with_throttle_time(request, answer)))
                with self._lock:
                    self.answered.append(request)

    def _drop(self, conn: socket.socket) -> None:
        self._selector.unregister(conn)
        conn.close()

    # ---------------------------------------------------------------------------- handlers

    def _handle(self, request: Request) -> dict[str, Any] | None:
        body = request.body
        key = ApiKey(request.header.api_key)
        if key is ApiKey.API_VERSIONS:
            ranges = {api.key: (api.min_version, api.max_version) for api in REGISTRY.values()}
            ranges.update(self.api_versions)
            return {"error_code": 0, "apis": [
                {"api_key": int(k), "name": REGISTRY[k].name, "min_version": low,
                 "max_version": high} for k, (low, high) in ranges.items()]}
        if key is ApiKey.METADATA:
            return self.metadata(body["topics"])
        if key is ApiKey.PRODUCE:
            out = []
            for t in body["topics"]:
                parts = []
                for p in t["partitions"]:
                    log = self.logs.get((t["name"], p["partition"]))
                    if log is None:
                        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        parts.append(_produce_result(p["partition"], unknown))
                    else:
                        parts.append(_produce_result(p["partition"], ErrorCode.NONE,
                                                     log.append(p["records"])))
                out.append({"name": t["name"], "partitions": parts})
            return None if body["acks"] == 0 else {"topics": out}
        if key is ApiKey.FETCH:
            out = []
            for t in body["topics"]:
                parts = []
                for p in t["partitions"]:
                    log = self.logs[(t["name"], p["partition"])]
                    offset = p["fetch_offset"]
                    code = ErrorCode.NONE
                    records = b""
                    if not 0 <= offset <= log.next_offset:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                    else:
                        records = log.read(offset, p["max_bytes"])
                    parts.append({"partition": p["partition"], "error_code": int(code),
                                  "high_watermark": log.next_offset, "log_start_offset": 0,
                                  "records": records})
                out.append({"name": t["name"], "partitions": parts})
            return {"topics": out}
        if key is ApiKey.INIT_PRODUCER_ID:
            self.producer_ids += 1
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "producer_id": self.producer_ids - 1, "producer_epoch": 0}
        if key is ApiKey.LIST_OFFSETS:
            out = []
            for t in body["topics"]:
                parts = []
                for p in t["partitions"]:
                    log = self.logs[(t["name"], p["partition"])]
                    offset = 0 if p["timestamp"] == -2 else log.next_offset
                    parts.append({"partition": p["partition"], "error_code": 0,
                                  "timestamp": -1, "offset": offset})
                out.append({"name": t["name"], "partitions": parts})
            return {"topics": out}
        raise AssertionError(f"fake broker does not answer {key.name}")

    def metadata(self, topics: list[str] | None) -> dict[str, Any]:
        names = list(self.partition_counts) if topics is None else topics
        described = []
        for name in names:
            count = self.partition_counts.get(name)
            if count is None:
                described.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                  "name": name, "is_internal": False, "partitions": []})
                continue
            described.append({
                "error_code": 0, "name": name, "is_internal": False,
                "partitions": [
                    {"error_code": 0, "partition": p, "leader": self.node_id,
                     "replicas": [self.node_id], "isr": [self.node_id],
                     "leader_epoch": 0}
                    for p in range(count)
                ],
            })
        return {
            "brokers": [{"node_id": self.node_id, "host": "127.0.0.1", "port": self.port}],
            "cluster_id": "A" * 22,
            "controller_id": self.node_id,
            "topics": described,
        }


def _produce_result(partition: int, code: ErrorCode, base: int = -1) -> dict[str, Any]:
    return {"partition": partition, "error_code": int(code), "error_message": None,
            "base_offset": base, "log_append_time": -1}


def once(api: ApiKey, answer: Callable[[Request], Any]) -> Fault:
    """A fault that answers the first ``api`` request with ``answer(request)``, then retires."""
    fired = False

    def fault(request: Request) -> Any:
        nonlocal fired
        if fired or request.header.api_key != api:
            return None
        fired = True
        return answer(request)

    return fault


def always(api: ApiKey, answer: Callable[[Request], Any]) -> Fault:
    def fault(request: Request) -> Any:
        return answer(request) if request.header.api_key == api else None

    return fault


def produce_error(code: ErrorCode) -> Callable[[Request], dict[str, Any]]:
    """A Produce response giving every partition of the request ``code``."""

    def answer(request: Request) -> dict[str, Any]:
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        _produce_result(p["partition"], code) for p in t["partitions"]
                    ],
                }
                for t in request.body["topics"]
            ]
        }

    return answer


def _with_throttle_time(request: Request, answer: dict[str, Any]) -> dict[str, Any]:
    """Produce v1 and Fetch v2 answers say how long they were throttled (never, here); Fetch
    v1+ answers carry leader epochs (none to a consumer)."""
    version = request.header.api_version
    key = request.header.api_key
    if "topics" not in answer:
        return answer
    if key == ApiKey.FETCH:
        for topic in answer["topics"]:
            for partition in topic["partitions"]:
                partition.setdefault("leader_epochs", [])
    if (key == ApiKey.PRODUCE and version >= 1) or (key == ApiKey.FETCH and version >= 2):
        return {"throttle_time_ms": 0, **answer}
    return answer
