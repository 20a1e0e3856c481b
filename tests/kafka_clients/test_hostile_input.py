"""Hostile bytes on a Kafka-protocol listener: whatever a peer sends, the broker answers it as
Kafka would or closes that one connection -- never leaves it hanging -- and serves everyone
else as before.

Each case talks to a PLAINTEXT Kafka listener over a raw socket with a timeout, so a broker
that neither answers nor closes fails the test instead of stalling it. After each, a fresh
connection must still get the exact ApiVersions v0 table, and confluent-kafka must still
produce (``still_serving``).
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from broker.memory_pool import SMALL_REQUEST_BYTES
from protocol.framing import encode_frame
from protocol.kafka.apis import (
    API_VERSIONS,
    FETCH,
    JOIN_GROUP,
    KAFKA_APIS,
    METADATA,
    PRODUCE,
    KafkaApi,
)
from protocol.kafka.errors import KafkaCodecError
from protocol.kafka.header import decode_request, decode_response, encode_request
from tests.broker_process import BrokerProcess
from tests.kafka_clients import raw_kafka
from tests.kafka_clients.clients import produce
from tests.kafka_clients.conftest import native_read, unique_topic
from tests.kafka_clients.raw_kafka import (
    UNSUPPORTED_VERSION,
    api_versions_v0,
    assert_api_versions_answer,
    closed_with_nothing_written,
    raw_request,
    read_frame,
    send,
)
from tests.protocol.kafka.strategies import value_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MiB = 1 << 20
MAX_REQUEST = 1 * MiB  # max_request_bytes
POOL = 4 * MAX_REQUEST  # queued_max_request_bytes
SETTINGS = {
    "kafka_listeners": "PLAINTEXT://127.0.0.1:0",
    "max_request_bytes": MAX_REQUEST,
    "queued_max_request_bytes": POOL,
    "group_initial_rebalance_delay_ms": 0,
    # a CreateTopics of random values may ask for any count; keep what it can make small (the
    # offsets topic too, or its partitions would be over the bound)
    "max_partitions_per_topic": 4,
    "offsets_topic_partitions": 4,
}
#: every (API, version) of the table the listener advertises
EVERY_VERSION = [(api, version) for api in KAFKA_APIS.values()
                 for version in range(api.min_version, api.max_version + 1)]
_ids = iter(range(1, 1 << 31))


@pytest.fixture(scope="module")
def hostile_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("kafka-hostile") / "data"
    with BrokerProcess(data, settings=SETTINGS) as broker:
        yield broker
    print(f"===== broker log =====\n{broker.log_text()}")


# ------------------------------------------------------------------------------- raw sockets

def connect(broker: BrokerProcess) -> socket.socket:
    return raw_kafka.connect(broker.kafka_ports["PLAINTEXT"])


def still_serving(broker: BrokerProcess) -> None:
    """The broker runs, a new connection gets the exact ApiVersions v0 table, and one of
    Kafka's clients produces a message that is then read back."""
    assert broker.running, broker.log_text()[-5000:]
    with connect(broker) as sock:
        correlation_id = next(_ids)
        sock.sendall(api_versions_v0(correlation_id))
        assert_api_versions_answer(sock, correlation_id)
    topic = unique_topic("after-hostile")
    produce("confluent-kafka", broker.kafka_bootstrap, topic, [(None, b"still served")])
    assert native_read(broker.bootstrap, topic, 1) == [(None, b"still served")]


def peer_port(sock: socket.socket) -> int:
    """The port the broker sees this connection come from (its log names it)."""
    port: int = sock.getsockname()[1]
    return port


def dropped_line(broker: BrokerProcess, port: int, reason: str) -> str:
    return broker.wait_for_log(rf"connection\.dropped.*127\.0\.0\.1:{port}\b.*{reason}")


# ------------------------------------------------------------------------------ named cases

GARBAGE = {
    "http": b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "tls-client-hello": bytes.fromhex("160301020001000200") + bytes(64),
    "frame-shorter-than-a-header": encode_frame(b"\x00\x12\x00"),
    "empty-frame": encode_frame(b""),
    "random": random.Random(20261127).randbytes(4096),
    "random-in-a-frame": encode_frame(b"\x7f\x7f" + random.Random(7).randbytes(200)),
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_is_closed_with_nothing_written(hostile_broker: BrokerProcess,
                                                garbage: bytes) -> None:
    with connect(hostile_broker) as sock:
        send(sock, garbage)
        assert closed_with_nothing_written(sock)
    still_serving(hostile_broker)


def test_a_frame_cut_short_then_closed_is_let_go(hostile_broker: BrokerProcess) -> None:
    """The peer declares a Metadata request, sends part of it and closes its side: the broker
    closes too, nothing answered."""
    metadata = {"topics": [{"name": "a"}, {"name": "b"}]}
    whole = encode_frame(encode_request(METADATA, 0, 1, "cut", metadata))
    with connect(hostile_broker) as sock:
        sock.sendall(whole[: len(whole) - 5])
        sock.shutdown(socket.SHUT_WR)
        assert closed_with_nothing_written(sock)
    still_serving(hostile_broker)


@pytest.mark.parametrize("declared", [MAX_REQUEST + 1, 0x7FFFFFFF, 0xFFFFFFFF],
                         ids=["max-plus-one", "int32-max", "minus-one"])
def test_a_length_prefix_over_max_request_bytes_is_closed(hostile_broker: BrokerProcess,
                                                          declared: int) -> None:
    with connect(hostile_broker) as sock:
        port = peer_port(sock)
        send(sock, struct.pack(">I", declared) + bytes(1024))
        assert closed_with_nothing_written(sock)
    line = dropped_line(hostile_broker, port, f"frame of {declared} bytes exceeds")
    assert f"max_frame_bytes={MAX_REQUEST}" in line
    still_serving(hostile_broker)


@pytest.mark.parametrize("api_key", [-1, 4, 21, 36, 0x7FFF])
def test_an_unknown_api_key_is_closed_with_nothing_written(hostile_broker: BrokerProcess,
                                                           api_key: int) -> None:
    """Keys outside the 0.10.2 table -- the native LeaderAndIsr (4), DeleteRecords (21) and
    SaslAuthenticate (36) among them -- are unknown here."""
    with connect(hostile_broker) as sock:
        port = peer_port(sock)
        send(sock, raw_request(api_key, 0, 5, bytes(16)))
        assert closed_with_nothing_written(sock)
    dropped_line(hostile_broker, port, f"unknown Kafka API key {api_key} ")
    still_serving(hostile_broker)


@pytest.mark.parametrize("version", [4, 7, -1])
def test_an_unsupported_produce_version_is_closed_with_nothing_written(
        hostile_broker: BrokerProcess, version: int) -> None:
    """Produce v4 is what a client sends a 1.0 broker; the listener's table is 0.11's."""
    body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 0)  # null txn id, acks, timeout
    with connect(hostile_broker) as sock:
        port = peer_port(sock)
        send(sock, raw_request(PRODUCE.key, version, 9, body))
        assert closed_with_nothing_written(sock)
    dropped_line(hostile_broker, port, f"Produce \\(key 0\\) version {version} is not supported")
    still_serving(hostile_broker)


def test_requests_before_a_bad_one_are_answered_first(hostile_broker: BrokerProcess) -> None:
    """Pipelined: two good requests, then an unknown key, in one write. The two are answered,
    in order, then the connection is closed."""
    with connect(hostile_broker) as sock:
        send(sock, api_versions_v0(11) + api_versions_v0(12) + raw_request(99, 0, 13, b""))
        assert_api_versions_answer(sock, 11)
        assert_api_versions_answer(sock, 12)
        assert closed_with_nothing_written(sock)
    still_serving(hostile_broker)


# ------------------------------------------------------------------------------- ApiVersions

def flexible_api_versions(version: int, correlation_id: int) -> bytes:
    """ApiVersions v3+ as librdkafka and kafka-python open: request header v2 (client id, no
    tagged fields), then the compact strings of KIP-511 and no tagged fields."""
    header = struct.pack(">hhih", API_VERSIONS.key, version, correlation_id, 7) + b"rdkafka\x00"
    body = b"\x0blibrdkafka" + b"\x062.3.0" + b"\x00"
    return encode_frame(header + body)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_api_versions_above_v1_gets_error_35_with_the_table_and_the_connection_stays_open(
        hostile_broker: BrokerProcess, version: int) -> None:
    """v2 has header v1, v3+ the flexible header v2: both get the v0-shaped answer, and the
    client's next request on the same connection is answered."""
    with connect(hostile_broker) as sock:
        if version == 2:  # kafkajs's opening: header v1, an empty body
            sock.sendall(raw_request(API_VERSIONS.key, 2, 21, b"", client_id=b"kafkajs"))
        else:
            sock.sendall(flexible_api_versions(version, 21))
        assert_api_versions_answer(sock, 21, error_code=UNSUPPORTED_VERSION)
        sock.sendall(encode_frame(encode_request(API_VERSIONS, 1, 22, "kafkajs", {})))
        assert_api_versions_answer(sock, 22, version=1)


# ---------------------------------------------------------------------------------- fuzzing

#: JoinGroup's groups already made by an example: a second join to one waits for the first
#: member (gone with its connection) until its session ends, which is Kafka's behaviour, not
#: a hang
_joined_groups: set[str] = set()


def _answer_expected(payload: bytes) -> tuple[KafkaApi, int] | None:
    """What the broker owes a request frame's payload: a response of that API and version, or
    None when the codec refuses it (the broker then closes). Examples the broker may rightly
    hold for long are left out: a Fetch that may wait for data, a join to a group joined
    before."""
    try:
        request = decode_request(payload)
    except KafkaCodecError:
        return None
    body = request.body
    if request.api is FETCH:
        assume(body["max_wait_ms"] <= 1000)
    if request.api is JOIN_GROUP:
        assume(body["group_id"] not in _joined_groups)
        _joined_groups.add(body["group_id"])
    return request.api, request.api_version


def _exchange(broker: BrokerProcess, payload: bytes, correlation_id: int) -> bool:
    """Send ``payload`` as one frame and an ApiVersions v0 behind it on the same connection:
    either the broker closes with nothing written (a request the codec refuses), or it
    answers the request (unless it is Produce with acks 0) and then the ApiVersions. Whether
    the request was one to answer."""
    expected = _answer_expected(payload)
    event("answered" if expected else "closed")
    follow_up = correlation_id ^ 0x40000000
    with connect(broker) as sock:
        send(sock, encode_frame(payload) + api_versions_v0(follow_up))
        if expected is None:
            assert closed_with_nothing_written(sock)
        else:
            api, version = expected
            silent = api is PRODUCE and decode_request(payload).body["acks"] == 0
            if not silent:
                frame = read_frame(sock)
                assert frame is not None, f"{api.name} v{version} closed instead of answered"
                answered, _ = decode_response(api, version, frame)
                assert answered == correlation_id
            assert_api_versions_answer(sock, follow_up)
    with connect(broker) as second:  # and a new connection is served
        second.sendall(api_versions_v0(correlation_id))
        assert_api_versions_answer(second, correlation_id)
    return expected is not None


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(target=st.sampled_from(EVERY_VERSION), correlation_id=st.integers(0, 0x3FFFFFFF),
       body=st.binary(max_size=120))
def test_random_bytes_as_any_requests_body(hostile_broker: BrokerProcess,
                                           target: tuple[KafkaApi, int], correlation_id: int,
                                           body: bytes) -> None:
    api, version = target
    payload = raw_request(api.key, version, correlation_id, body)[4:]
    _exchange(hostile_broker, payload, correlation_id)


def _valid_body(data: st.DataObject, api: KafkaApi, version: int) -> dict[str, Any]:
    """A body of the schema with random values; a Fetch's wait kept short, and each JoinGroup
    to a group of its own (see ``_answer_expected``)."""
    body: dict[str, Any] = data.draw(value_of(api.request, version))
    if api is FETCH:
        body["max_wait_ms"] = data.draw(st.integers(-1, 200))
    if api is JOIN_GROUP:
        body["group_id"] = f"fuzz-{next(_ids)}"
    return body


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(target=st.sampled_from(EVERY_VERSION), correlation_id=st.integers(0, 0x3FFFFFFF),
       client_id=st.none() | st.text(max_size=8), data=st.data())
def test_any_request_of_the_schema_is_answered(hostile_broker: BrokerProcess,
                                               target: tuple[KafkaApi, int],
                                               correlation_id: int, client_id: str | None,
                                               data: st.DataObject) -> None:
    """Every field of every API at every value its type holds: each is answered (an error
    code where the values make no sense), never a closed or hung connection."""
    api, version = target
    body = _valid_body(data, api, version)
    payload = encode_request(api, version, correlation_id, client_id, body)
    assert _exchange(hostile_broker, payload, correlation_id)


def test_after_the_fuzzing_the_broker_serves_on(hostile_broker: BrokerProcess) -> None:
    """Nothing above made the broker log an error: no connection lost to a bug's exception
    (``connection.crashed``), no request answered UNKNOWN_SERVER_ERROR for one
    (``kafka.request_failed``), no internal write refused."""
    still_serving(hostile_broker)
    errors = [line for line in hostile_broker.log_text().splitlines() if "level='error'" in line]
    assert not errors, "\n".join(errors[:20])


# ---------------------------------------------------------------------------------- memory

STALLED = 200  # connections that declare a max_request_bytes frame and stall
FEW = 64  # the bytes of its frame each sends after the length prefix
#: the broker's RSS may grow by at most this while they are open: their declared frames add up
#: to 200 MiB; the pool is 4 MiB, and each connection's own state is a few KiB
RSS_ALLOWANCE = 64 * MiB


def memory_rss(pid: int) -> int:
    """VmRSS of a process, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def unread_bytes(port: int, peers: set[int]) -> dict[int, int]:
    """For each of the broker's connections on ``port`` from one of ``peers``: the bytes the
    kernel holds that the broker has not read yet (/proc/net/tcp's rx_queue)."""
    unread: dict[int, int] = {}
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if int(local.split(":")[1], 16) == port:
                peer = int(remote.split(":")[1], 16)
                if peer in peers:
                    unread[peer] = int(queues.split(":")[1], 16)
    return unread


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def test_stalled_max_size_frames_leave_rss_bounded_and_others_served(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(settings={**SETTINGS, "request_read_timeout_ms": 120_000})
    port = broker.kafka_ports["PLAINTEXT"]
    still_serving(broker)  # warm: the baseline includes a served client
    before = memory_rss(broker.pid)
    stalled: list[socket.socket] = []
    try:
        for _ in range(STALLED):
            sock = connect(broker)
            stalled.append(sock)
            sock.sendall(struct.pack(">I", MAX_REQUEST) + bytes(FEW))
        peers = {peer_port(sock) for sock in stalled}
        # the broker has read every length prefix: those it holds a frame's room for read
        # their bytes, the rest wait for room with their prefix read and FEW bytes unread

        def every_prefix_read() -> bool:
            unread = unread_bytes(port, peers)
            return len(unread) == STALLED and max(unread.values()) <= FEW

        wait_until(every_prefix_read, "the broker read every stalled connection's prefix")
        # each one that read its FEW bytes holds a frame's room or a read-ahead of the pool
        waiting = sum(1 for n in unread_bytes(port, peers).values() if n == FEW)
        assert waiting >= STALLED - POOL // SMALL_REQUEST_BYTES, f"{waiting} wait for memory"
        during = memory_rss(broker.pid)
        still_serving(broker)
        after = memory_rss(broker.pid)
        print(f"RSS before {before / MiB:.1f} MiB, with {STALLED} stalled frames "
              f"{during / MiB:.1f} MiB, after serving {after / MiB:.1f} MiB; "
              f"{waiting} waiting for request memory")
        assert max(during, after) < before + RSS_ALLOWANCE
        for sock in stalled:  # none was answered or closed: each still waits for its frame
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
    finally:
        for sock in stalled:
            sock.close()
    still_serving(broker)
