"""The idle lane (broker/idle_lane.py): a connection between requests waits in one epoll set
with the others, and Heartbeats read there are answered in the same pass. What a client sees
must not change: every request answered once, in order, the same answer as the handler's;
the idle limit counted from the last request, not from when the connection parked."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator

import msgpack
import pytest
import trio
import trio.testing

from broker.idle_lane import GATHER_S, IdleLane, Turn
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.wire import decode_response_body, encode_request
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.observability.support import sample, scrape, start_with_metrics

pytestmark = pytest.mark.timeout(60)

QUICK = {"group_initial_rebalance_delay_ms": 0}


class _Busy:
    """A connection whose client writes its next request the moment it has an answer: its
    socket is readable again before the lane's pass is over. Each answer takes a whole turn."""

    def __init__(self, name: int, served: list[int], clock: list[float]) -> None:
        self.lane_side, self.client_side = socket.socketpair()
        self.name, self.served, self.clock = name, served, clock
        self.client_side.sendall(b"r")

    refill = True  # whether the client writes its next request at once
    read_backlog = 0  # requests a read brings beyond the first: answered one a turn
    backlog = 0

    def on_lane_turn(self, until: float) -> Turn:
        self.served.append(self.name)
        self.clock[0] = until  # this answer used the turn up
        if self.backlog:
            self.backlog -= 1
        else:
            self.lane_side.recv(1)
            self.backlog = self.read_backlog
            if self.refill:
                self.client_side.sendall(b"r")
        return Turn.AGAIN if self.backlog else Turn.WAIT

    def hand_back(self, error: Exception | None = None) -> None:
        raise AssertionError("nothing here is handed back")


@pytest.fixture
def busy_lane() -> Iterator[tuple[IdleLane, list[_Busy], list[int]]]:
    clock = [0.0]
    lane = IdleLane(turn_s=1.0, clock=lambda: clock[0])
    served: list[int] = []
    connections = [_Busy(name, served, clock) for name in range(4)]
    for connection in connections:
        lane.add(connection.lane_side.fileno(), connection)
    yield lane, connections, served
    for connection in connections:
        lane.discard(connection.lane_side.fileno())
        connection.lane_side.close()
        connection.client_side.close()


def test_passes_cut_short_by_their_turn_reach_every_readable_socket_in_turn(
        busy_lane: tuple[IdleLane, list[_Busy], list[int]]) -> None:
    """epoll reports a socket that stays readable in the place it had: without the lane's own
    order the first socket would be served in every pass and the other three never."""
    lane, _, served = busy_lane
    for _ in range(12):
        lane.serve_ready()  # each pass answers one connection, then its turn is over
    assert len(served) == 12
    for start in range(0, 12, 4):
        assert sorted(served[start:start + 4]) == [0, 1, 2, 3], served


def test_requests_left_after_a_turn_wait_for_the_readable_sockets_epoll_reported(
        busy_lane: tuple[IdleLane, list[_Busy], list[int]]) -> None:
    """A connection whose requests are all read (its socket no longer readable) but not all
    answered stays in the lane, in the backlog, out of the epoll set: the sockets epoll reports
    readable go first, then the backlog for ``BACKLOG_S`` (here one turn uses it up), then epoll
    is asked again. A quiet connection's one request waits behind that much backlog at most,
    and the backlog is served however many new requests keep coming."""
    lane, connections, served = busy_lane
    for connection in connections[2:]:
        connection.lane_side.recv(1)  # only connections 0 and 1 are readable
    connections[0].refill = False
    connections[0].read_backlog = 3
    for _ in range(8):
        lane.serve_ready()
    # each pass answers one: 0 reads its four, 1 (readable again at once) goes first after
    # each time epoll is asked, 0's backlog after it
    assert served == [0, 1, 0, 1, 0, 1, 0, 1], served
    assert connections[0].backlog == 0


def test_a_connection_with_a_backlog_is_not_reported_by_epoll_until_it_is_served(
        busy_lane: tuple[IdleLane, list[_Busy], list[int]]) -> None:
    """A connection in the backlog whose client has written again is served from the backlog,
    once a turn, not also as a readable socket each time epoll is asked."""
    lane, connections, served = busy_lane
    for connection in connections[2:]:
        connection.lane_side.recv(1)  # only connections 0 and 1 are readable
    connections[0].read_backlog = 2  # and both write again at once
    for _ in range(5):
        lane.serve_ready()
    # 0 reads, then answers its backlog of two in two turns, each after one of 1's; listed as
    # readable too, it would have been served again as such, before 1, in the fourth pass
    assert served == [0, 1, 0, 1, 0], served
    assert connections[0].backlog == 0


async def test_a_pass_that_served_everything_ready_gathers_before_the_next(
        autojump_clock: trio.testing.MockClock) -> None:
    """Woken for each readable socket, the lane paid a pass of trio's scheduler for every
    heartbeat or two: after a pass that served all that was ready, it waits ``GATHER_S`` and
    serves what became readable meanwhile in one pass."""
    turns = [0.0]
    lane = IdleLane(turn_s=1.0, clock=lambda: turns[0])
    served: list[int] = []
    busy = _Busy(0, served, turns)  # readable again the moment it is answered
    lane.add(busy.lane_side.fileno(), busy)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lane.run)
            await trio.sleep(10.5 * GATHER_S)
            lane.discard(busy.lane_side.fileno())
            lane.close()
    finally:
        busy.lane_side.close()
        busy.client_side.close()
    assert len(served) == 11  # at once, then one pass every GATHER_S


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
    that does not exist (both left to the handlers), then more Heartbeats behind them, the last
    in a msgpack form the C parser leaves to Python."""
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
            # as another msgpack packer may write one: its body a map16, not a fixmap
            encode_frame(_heartbeat("lane", member, generation, 108)[4:].replace(
                b"\x83", b"\xde\x00\x03", 1)),
        ]
        client.sock.sendall(b"".join(frames))
        answers = [client.receive() for _ in frames]
        assert [correlation_id for correlation_id, _ in answers] == list(range(100, 109))
        codes = [body.get("error_code") for _, body in answers]
        assert codes == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.ILLEGAL_GENERATION,
                         ErrorCode.UNKNOWN_MEMBER_ID, None,
                         ErrorCode.UNSUPPORTED_VERSION, ErrorCode.NONE, ErrorCode.NONE,
                         ErrorCode.NONE]
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


def test_heartbeats_read_with_part_of_the_next_or_an_oversized_frame_are_answered(
        make_broker: Callable[..., BrokerProcess]) -> None:
    """The lane answers a read of whole Heartbeats from the bytes read; one that ends in part
    of a frame goes to the decoder, which keeps the part for the next read, and one that ends
    in an oversized length prefix has its Heartbeats answered before the connection is
    closed, as the handler's path answers the requests before such a frame."""
    broker = make_broker(settings=QUICK)
    with RawClient(broker.address) as client:
        member, generation = _join(client, "parts")
        for correlation_id in range(3):  # one at a time: the connection waits in the lane
            client.sock.sendall(_heartbeat("parts", member, generation, correlation_id))
            assert client.receive() == (correlation_id, {"error_code": 0, "error_message": None})
        split = _heartbeat("parts", member, generation, 5)
        client.sock.sendall(_heartbeat("parts", member, generation, 3)
                            + _heartbeat("parts", member, generation, 4) + split[:9])
        assert [client.receive()[0] for _ in range(2)] == [3, 4]
        client.sock.sendall(split[9:])
        assert client.receive() == (5, {"error_code": 0, "error_message": None})
        client.sock.sendall(_heartbeat("parts", member, generation, 6)
                            + struct.pack(">I", 0xFFFFFFFF))
        assert client.receive() == (6, {"error_code": 0, "error_message": None})
        assert client.closed_by_broker()
    broker.wait_for_log("exceeds max_frame_bytes")
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


def test_a_heartbeat_read_in_part_waits_in_the_lane_under_its_read_deadline(
        make_broker: Callable[..., BrokerProcess]) -> None:
    """Half a Heartbeat, then the rest: answered. Half a Heartbeat and nothing more: the
    connection is dropped at request_read_timeout_ms (not at the idle limit, a minute), and the
    reason does not blame request memory, which was never short."""
    broker = make_broker(settings={**QUICK, "request_read_timeout_ms": 500,
                                   "connections_max_idle_ms": 60_000})
    with RawClient(broker.address) as client:
        member, generation = _join(client, "halves")
        frame = _heartbeat("halves", member, generation, 1)
        client.sock.sendall(frame[:7])
        client.sock.sendall(frame[7:])
        assert client.receive() == (1, {"error_code": 0, "error_message": None})
        port = client.sock.getsockname()[1]
        client.sock.sendall(_heartbeat("halves", member, generation, 2)[:7])
        assert client.closed_by_broker()
    line = broker.wait_for_log(rf"connection.dropped.*127\.0\.0\.1:{port}\b")
    assert "request_read_timeout_ms=500" in line
    assert "request memory" not in line
