"""The idle lane (broker/idle_lane.py): a connection between requests waits in one epoll set
with the others, and Heartbeats read there are answered in the same pass. What a client sees
must not change: every request answered once, in order, the same answer as the handler's;
the idle limit counted from the last request, not from when the connection parked."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgpack
import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.wire import decode_response_body, encode_request
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.observability.support import sample, scrape, start_with_metrics

pytestmark = pytest.mark.timeout(60)

QUICK = {"group_initial_rebalance_delay_ms": 0}


def _join(client: RawClient, group: str) -> tuple[str, int]:
    """A one-member group, Steady (the broker assigns in the JoinGroup round): its member id
    and generation."""
    joined = client.request(ApiKey.JOIN_GROUP, {
        "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
        "topics": ["t"], "member_id": "", "assignment_strategy": "range"})
    return joined["member_id"], joined["generation_id"]


def _heartbeat(group: str, member: str, generation: int, correlation_id: int) -> bytes:
    return encode_request(ApiKey.HEARTBEAT, 0, correlation_id, "lane-test", {
        "group_id": group, "member_id": member, "generation_id": generation})


def test_heartbeats_sent_with_other_requests_are_answered_once_each_in_order(
        make_broker: Callable[..., BrokerProcess]) -> None:
    """One write holding Heartbeats (answered by the lane), a stale and an unknown member's
    Heartbeat (errors, also answered there), a DescribeGroups and a Heartbeat of a version
    that does not exist (both left to the handlers), then more Heartbeats behind them."""
    broker = make_broker(settings=QUICK)
    with RawClient(broker.address) as client:
        member, generation = _join(client, "lane")
        frames = [
            _heartbeat("lane", member, generation, 100),
            _heartbeat("lane", member, generation, 101),
            _heartbeat("lane", member, generation + 1, 102),
            _heartbeat("lane", "nobody", generation, 103),
            encode_request(ApiKey.DESCRIBE_GROUPS, 0, 104, "lane-test", {"group_ids": ["lane"]}),
            encode_frame(msgpack.packb([int(ApiKey.HEARTBEAT), 99, 105, "lane-test", {}])),
            _heartbeat("lane", member, generation, 106),
            _heartbeat("lane", member, generation, 107),
        ]
        client.sock.sendall(b"".join(frames))
        answers = [client.receive() for _ in frames]
        assert [correlation_id for correlation_id, _ in answers] == list(range(100, 108))
        codes = [body.get("error_code") for _, body in answers]
        assert codes == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.ILLEGAL_GENERATION,
                         ErrorCode.UNKNOWN_MEMBER_ID, None,
                         ErrorCode.UNSUPPORTED_VERSION, ErrorCode.NONE, ErrorCode.NONE]
        for correlation_id, body in answers:
            if correlation_id not in (104, 105):
                decode_response_body(ApiKey.HEARTBEAT, 0, body)
        (group,) = decode_response_body(ApiKey.DESCRIBE_GROUPS, 0, answers[4][1])["groups"]
        assert group["state"] == "Steady"
        # one at a time, each waiting for its answer: the lane's path with nothing pipelined
        for correlation_id in range(200, 210):
            client.sock.sendall(_heartbeat("lane", member, generation, correlation_id))
            assert client.receive() == (correlation_id, {"error_code": 0, "error_message": None})
    assert "lane_failed" not in broker.log_text()


def test_a_connection_answered_in_the_lane_is_idle_only_after_its_last_request(
        make_broker: Callable[..., BrokerProcess]) -> None:
    """connections_max_idle_ms is 1 s: heartbeats every 0.2 s for 3 s keep the connection
    open (the lane read them, its task never woke), and silence then closes it."""
    broker = make_broker(settings={**QUICK, "connections_max_idle_ms": 1000})
    with RawClient(broker.address) as client:
        member, generation = _join(client, "busy")
        started = time.monotonic()
        correlation_id = 0
        while time.monotonic() - started < 3.0:
            client.sock.sendall(_heartbeat("busy", member, generation, correlation_id))
            assert client.receive() == (correlation_id, {"error_code": 0, "error_message": None})
            correlation_id += 1
            time.sleep(0.2)  # the client's pace, not a wait for the broker
        assert client.closed_by_broker()
    broker.wait_for_log("idle for connections_max_idle_ms=1000")


def test_heartbeats_answered_in_the_lane_are_counted_in_the_metrics(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker, url = start_with_metrics(make_broker)
    with RawClient(broker.address) as client:
        member, generation = _join(client, "counted")
        for correlation_id in range(5):
            client.sock.sendall(_heartbeat("counted", member, generation, correlation_id))
            client.receive()
        client.sock.sendall(_heartbeat("counted", "stranger", generation, 5))
        client.receive()
    samples = scrape(url)

    def value(name: str, **labels: str) -> float | None:
        return sample(samples, name, **labels)

    assert value("odradek_requestmetrics_requests_total", request="Heartbeat") == 6
    assert value("odradek_requestmetrics_errors_total", request="Heartbeat",
                 error="UNKNOWN_MEMBER_ID") == 1
