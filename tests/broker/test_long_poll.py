"""Long-poll fetches park in the purgatory and are woken by appends, never by polling.

Each test waits for the broker's own ``fetch.parked`` event (debug log) before producing, so
the wake-up really comes from the append; ``max_wait_ms`` is far beyond the test's deadline, so
an answer can only come from that wake-up.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messageset import decode_messages
from protocol.wire import decode_response_body
from tests.broker.raw import RawClient, fetch_body
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

NEVER_MS = 3_600_000  # an hour: far beyond any test deadline


@pytest.fixture
def debug_broker(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return make_broker(env={"ODRADEK_LOG_LEVEL": "debug"})


def _answer(client: RawClient, sent: int) -> dict:
    correlation_id, body = client.receive()
    assert correlation_id == sent
    (topic,) = decode_response_body(ApiKey.FETCH, 0, body)["topics"]
    (partition,) = topic["partitions"]
    return dict(partition)


def test_a_produce_wakes_a_parked_fetch(debug_broker: BrokerProcess) -> None:
    with RawClient(debug_broker.address) as waiter, RawClient(debug_broker.address) as producer:
        producer.create_topic("t")
        sent = waiter.send(ApiKey.FETCH, fetch_body("t", 0, 0, 1 << 20, NEVER_MS, 1))
        debug_broker.wait_for_log("fetch.parked")
        producer.produce("t", [b"hello"])
        result = _answer(waiter, sent)
    assert result["error_code"] == 0 and result["high_watermark"] == 1
    messages, _ = decode_messages(result["records"])
    assert [m.value for m in messages] == [b"hello"]


def test_a_fetch_waits_for_min_bytes(debug_broker: BrokerProcess) -> None:
    with RawClient(debug_broker.address) as waiter, RawClient(debug_broker.address) as producer:
        producer.create_topic("t", 2)
        producer.produce("t", [b"x" * 10])
        size = len(producer.fetch_partition("t", 0, 0)["records"])
        body = fetch_body("t", 0, 1, 1 << 20, NEVER_MS, 3 * size)
        body["topics"][0]["partitions"].append({"partition": 1, "fetch_offset": 0,
                                                "max_bytes": 1 << 20})
        sent = waiter.send(ApiKey.FETCH, body)
        debug_broker.wait_for_log("fetch.parked")
        producer.produce("t", [b"y" * 10], partition=1)  # one entry: not enough yet
        debug_broker.wait_for_log("fetch.parked", count=2)
        producer.produce("t", [b"z" * 10, b"w" * 10])  # now three entries in all
        correlation_id, answer = waiter.receive()
    assert correlation_id == sent
    (topic,) = decode_response_body(ApiKey.FETCH, 0, answer)["topics"]
    values = [m.value for p in topic["partitions"] for m in decode_messages(p["records"])[0]]
    assert sorted(values) == [b"w" * 10, b"y" * 10, b"z" * 10]


def test_max_wait_ends_the_poll(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("t")
        result = client.fetch_partition("t", 0, 0, max_wait_ms=50, min_bytes=1)
    assert result["error_code"] == 0 and result["records"] == b""


def test_deleting_the_topic_answers_a_parked_fetch(debug_broker: BrokerProcess) -> None:
    with RawClient(debug_broker.address) as waiter, RawClient(debug_broker.address) as admin:
        admin.create_topic("t")
        sent = waiter.send(ApiKey.FETCH, fetch_body("t", 0, 0, 1 << 20, NEVER_MS, 1))
        debug_broker.wait_for_log("fetch.parked")
        admin.request(ApiKey.DELETE_TOPICS, {"topic_names": ["t"], "timeout_ms": 1000})
        result = _answer(waiter, sent)
    assert result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_other_connections_are_served_while_a_fetch_is_parked(
    debug_broker: BrokerProcess,
) -> None:
    with RawClient(debug_broker.address) as waiter, RawClient(debug_broker.address) as other:
        other.create_topic("t")
        other.create_topic("u")
        sent = waiter.send(ApiKey.FETCH, fetch_body("t", 0, 0, 1 << 20, NEVER_MS, 1))
        debug_broker.wait_for_log("fetch.parked")
        assert other.produce("u", [b"elsewhere"]) == 0  # wakes nothing on t
        assert [m.value for m in other.fetch("u")] == [b"elsewhere"]
        other.produce("t", [b"now"])
        assert _answer(waiter, sent)["high_watermark"] == 1


def test_a_client_closing_releases_its_parked_fetch(debug_broker: BrokerProcess) -> None:
    """Not at max_wait_ms: the broker watches the socket of a parked fetch for the peer's EOF."""
    with RawClient(debug_broker.address) as waiter:
        waiter.create_topic("t")
        waiter.send(ApiKey.FETCH, fetch_body("t", 0, 0, 1 << 20, NEVER_MS, 1))
        debug_broker.wait_for_log("fetch.parked")
    debug_broker.wait_for_log("fetch.released", timeout=10)
    debug_broker.wait_for_log("connection.closed", timeout=10)


def test_a_pipelined_request_does_not_release_a_parked_fetch(
    debug_broker: BrokerProcess,
) -> None:
    """The next request is readability on the socket too, but not the peer closing."""
    with RawClient(debug_broker.address) as waiter, RawClient(debug_broker.address) as producer:
        producer.create_topic("t")
        sent = waiter.send(ApiKey.FETCH, fetch_body("t", 0, 0, 1 << 20, NEVER_MS, 1))
        debug_broker.wait_for_log("fetch.parked")
        waiter.send(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})
        producer.produce("t", [b"hello"])
        result = _answer(waiter, sent)
        assert waiter.receive()[0] == sent + 1
    assert result["high_watermark"] == 1
    assert "fetch.released" not in debug_broker.log_text()


def test_delete_records_answers_a_follower_fetch_parked_below_the_new_log_start(
    debug_broker: BrokerProcess,
) -> None:
    """A follower's fetch (v3) reports its own log start. Level with the leader's it parks like
    any other; once DeleteRecords moves the leader's above it, it is answered at once, with no
    data and the new log start, so the follower moves its own without waiting out max_wait_ms
    (in a cluster the leader's DeleteRecords waits for that)."""
    with RawClient(debug_broker.address) as follower, RawClient(debug_broker.address) as admin:
        admin.create_topic("t")
        admin.produce("t", [b"m%d" % i for i in range(20)])
        body = fetch_body("t", 0, 20, 1 << 20, NEVER_MS, 1)
        body["replica_id"] = 7
        body["topics"][0]["partitions"][0]["log_start_offset"] = 0
        sent = follower.send(ApiKey.FETCH, body, version=3)
        debug_broker.wait_for_log("fetch.parked")
        deleted = admin.request(ApiKey.DELETE_RECORDS, {
            "topics": [{"name": "t", "partitions": [{"partition": 0, "offset": 11}]}],
            "timeout_ms": 1000})
        correlation_id, answer = follower.receive()
    assert deleted["topics"][0]["partitions"][0]["low_watermark"] == 11
    assert correlation_id == sent
    (topic,) = decode_response_body(ApiKey.FETCH, 3, answer)["topics"]
    (partition,) = topic["partitions"]
    assert partition["error_code"] == ErrorCode.NONE
    assert partition["log_start_offset"] == 11
    assert partition["records"] == b""
