"""InitProducerId through a real broker, on the native listener (``client.producer_ids``) and
on the Kafka listener (kafka-python's own encoding of the request): a new id with epoch 0 for
each call, never one handed out before -- not after the broker is killed and started again --
and a transactional id refused."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest
from kafka.protocol.producer.transaction import (  # type: ignore[import-untyped]
    InitProducerIdRequest,
    InitProducerIdResponse,
)

from broker.cluster.producer_ids import BLOCK_FILE, BLOCK_SIZE
from client.network import NetworkClient
from client.producer_ids import init_producer_id
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

KAFKA = {"kafka_listeners": "PLAINTEXT://127.0.0.1:0"}
TIMEOUT_S = 20.0


@pytest.fixture
def broker_with_kafka(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return make_broker(settings=KAFKA)


@pytest.fixture
def network(broker_with_kafka: BrokerProcess) -> Iterator[NetworkClient]:
    client = NetworkClient(broker_with_kafka.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def kafka_init_producer_id(port: int, transactional_id: str | None = None
                           ) -> InitProducerIdResponse:
    """One InitProducerId v0, encoded and decoded by kafka-python, on a socket of its own."""
    request = InitProducerIdRequest[0](transactional_id=transactional_id,
                                       transaction_timeout_ms=60_000)
    request.with_header(correlation_id=11, client_id="kafka-python")
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    assert struct.unpack(">i", frame[:4])[0] == 11
    return InitProducerIdResponse.decode(frame, version=0, header=True)


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection instead of answering"
        data += chunk
    return data


def test_each_call_gets_a_new_id_with_epoch_0(network: NetworkClient) -> None:
    got = [init_producer_id(network, TIMEOUT_S) for _ in range(5)]
    assert [g.epoch for g in got] == [0] * 5
    ids = [g.producer_id for g in got]
    assert ids == sorted(set(ids)) and ids[0] >= 0


def test_ids_handed_out_before_a_kill_are_never_handed_out_again(
        broker_with_kafka: BrokerProcess) -> None:
    broker = broker_with_kafka
    network = NetworkClient(broker.bootstrap, request_timeout_ms=10_000)
    try:
        before = [init_producer_id(network, TIMEOUT_S).producer_id for _ in range(3)]
    finally:
        network.close()
    assert (broker.data_dir / BLOCK_FILE).exists()
    broker.kill()
    broker.start(port=broker.port)
    network = NetworkClient(broker.bootstrap, request_timeout_ms=10_000)
    try:
        after = init_producer_id(network, TIMEOUT_S).producer_id
    finally:
        network.close()
    # the next block: the rest of the first one is given up, as Kafka gives it up
    assert after == BLOCK_SIZE > max(before)


def test_the_kafka_listener_hands_out_ids_from_the_same_counter(
        broker_with_kafka: BrokerProcess, network: NetworkClient) -> None:
    native = init_producer_id(network, TIMEOUT_S).producer_id
    port = broker_with_kafka.kafka_ports["PLAINTEXT"]
    answers = [kafka_init_producer_id(port) for _ in range(2)]
    assert [(a.error_code, a.producer_epoch) for a in answers] == [(0, 0), (0, 0)]
    assert [a.producer_id for a in answers] == [native + 1, native + 2]


def test_a_transactional_id_is_refused_on_both_listeners(
        broker_with_kafka: BrokerProcess) -> None:
    with RawClient(broker_with_kafka.address) as raw:
        answer = raw.request(ApiKey.INIT_PRODUCER_ID,
                             {"transactional_id": "orders-tx", "transaction_timeout_ms": 60_000})
    assert answer["error_code"] == ErrorCode.INVALID_REQUEST
    assert "'orders-tx'" in answer["error_message"]
    assert "transactions are not supported" in answer["error_message"]
    assert (answer["producer_id"], answer["producer_epoch"]) == (-1, -1)
    kafka = kafka_init_producer_id(broker_with_kafka.kafka_ports["PLAINTEXT"], "orders-tx")
    assert (kafka.error_code, kafka.producer_id, kafka.producer_epoch) == (
        ErrorCode.INVALID_REQUEST, -1, -1)
