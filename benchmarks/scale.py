"""What one broker holds: ``python -m benchmarks.scale [--quick]``.

Prints JSON lines (``--quick``: a tenth of the groups and partitions, under a minute):

- ``scale_groups``: 10,000 groups of 10 members (100,000 members) held by one broker. Members
  are simulated by a raw client, many per connection: connection *(s, k)* carries member *k* of
  every group in set *s*, so the members of a group are on different connections and join in
  lockstep (a JoinGroup holds its connection until its round ends, as in Kafka). The broker runs
  with ``group_initial_rebalance_delay_ms`` of 0.2 ms per connection (20 ms for 100, 200 ms
  for 1,000) -- enough to gather members that arrive together, where the default 300 ms would
  pace the sets' joins: the broker reads the first JoinGroups of all connections in one pass of
  its scheduler, and a first round that ended before its last member was read would wait for
  the members already answered (busy on their next group's JoinGroup) until the rebalance
  timeout. Reported: the seconds to join every member; the broker's RSS growth per member
  (``coordinator_bytes_per_member``, the connections already open before the first join); the
  heartbeats/s the broker answers with 64 in flight on every connection; the heartbeat round
  trip p50/p99 with every member heartbeating once per 3 s (Kafka's ``heartbeat.interval.ms``:
  33,000 heartbeats/s for 100,000 members; ``client_busy`` says how much of a core the
  simulating client needed for it, as it shares the machine with the broker, and
  ``broker_busy`` how much the broker did over the same seconds); and the
  round trip again on the other groups' connections while ``rebalancing`` groups rebalance at
  once (one member of each leaves; the others are told by their next heartbeat and rejoin, all
  in the same moment): p50, p99 and max over every heartbeat answered on those connections
  from the first LeaveGroup until the last member has rejoined.

  A heartbeat's round trip runs from the moment the simulator queues its request (written to
  the socket at once, before the simulator reads what has arrived) to the moment it has read
  the answer off the socket. The simulator reads the connections that select() reports one
  after the other, so an answer that waits in its socket while the simulator handles other
  connections' answers in the same pass is counted -- the simulator's own delay, bounded by
  one pass (``client_busy`` says how busy it is). Its garbage collector is not: once the
  members have joined, the simulator freezes its state (``gc.freeze``), as its full
  collections over 100,000 members took up to 0.3 s.
- ``scale_partitions``: 10 topics of 1,000 partitions (10,000) on one broker: the seconds to
  create them, the broker's start-up time and RSS over them (stopped and started again on the
  same data), and producer msgs/s with messages spread round robin over every partition.

The load time of an offsets partition holding 1,000,000 offset records is the
``offsets_catch_up`` line of benchmarks/group_failover.py. Aims (issue #15): heartbeat p99
<= 10 ms while 1,000 groups rebalance; <= 2 KB of coordinator memory per member.
"""

from __future__ import annotations

import argparse
import gc
import json
import selectors
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.coordinator import PARTITIONS, TOPIC, Wire, create_topic, request
from benchmarks.processes import cpu_seconds, rss_mb
from benchmarks.servers import ServerProcess, start_odradek
from client import Admin, Producer
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.wire import decode_response_envelope

MEMBERS = 10  # per group
SESSION_MS = 120_000  # no member expires while the client is busy elsewhere
INITIAL_DELAY_MS_PER_CONNECTION = 0.2
WINDOW = 64  # heartbeats in flight per connection, measuring how many the broker answers
HEARTBEAT_INTERVAL_S = 3.0  # Kafka's heartbeat.interval.ms: the pace for the latency figures


class Member:
    """One simulated member: its group and, once joined, its id and generation."""

    __slots__ = ("beat", "generation", "group", "member_id")

    def __init__(self, group: str) -> None:
        self.group = group
        self.member_id = ""
        self.generation = -1
        self.beat = b""  # the heartbeat frame of this member id and generation

    def join_frame(self) -> bytes:
        return request(ApiKey.JOIN_GROUP, {
            "group_id": self.group, "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": SESSION_MS, "topics": [TOPIC], "member_id": self.member_id,
            "assignment_strategy": "range",
        })

    def heartbeat_frame(self) -> bytes:
        if not self.beat:
            self.beat = request(ApiKey.HEARTBEAT, {
                "group_id": self.group, "member_id": self.member_id,
                "generation_id": self.generation,
            })
        return self.beat

    def joined(self, body: dict[str, Any]) -> None:
        if body["error_code"] != ErrorCode.NONE:
            raise RuntimeError(f"JoinGroup of {self.group} failed: {body}")
        self.member_id = body["member_id"]
        self.generation = body["generation_id"]
        self.beat = b""


class Line:
    """A connection carrying many members: requests go out in order, and since the broker
    answers them in order, each answer is matched to the oldest request outstanding."""

    #: lines with frames queued but not yet sent
    unsent: set[Line] = set()

    def __init__(self, address: tuple[str, int], members: list[Member]) -> None:
        self.wire = Wire(address)
        self.members = members
        self.pending: deque[tuple[str, Member, float]] = deque()  # kind, member, sent at
        self.next = 0  # the next member to heartbeat
        self.heartbeating = False

    def send(self, kind: str, member: Member) -> None:
        if kind == "heartbeat":
            frame = member.heartbeat_frame()
        elif kind == "join":
            frame = member.join_frame()
        else:
            frame = request(ApiKey.LEAVE_GROUP, {"group_id": member.group,
                                                 "member_id": member.member_id})
        self.wire.queue(frame)
        self.pending.append((kind, member, time.perf_counter()))
        Line.unsent.add(self)

    def heartbeat_next(self) -> None:
        self.send("heartbeat", self.members[self.next])
        self.next = (self.next + 1) % len(self.members)


def run_lines(lines: Sequence[Line], on_answer: Callable[[Line, str, Member, float, Any], None],
              done: Callable[[], bool], tick: Callable[[], None] | None = None,
              timeout: float = 600.0) -> None:
    """Move bytes until ``done()``; ``on_answer(line, kind, member, seconds, body)`` per answer;
    ``tick()`` (to send what is due) at least every millisecond."""
    selector = selectors.DefaultSelector()
    for line in lines:
        selector.register(line.wire.sock, selectors.EVENT_READ, line)
    deadline = time.monotonic() + timeout
    # answers repeat byte for byte (every request has correlation id 0): each distinct small
    # payload is decoded once, so the simulator's own cost stays small beside the broker's
    bodies: dict[bytes, Any] = {}
    try:
        _flush()
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the broker did not answer in time")
            if tick is not None:
                tick()
                _flush()  # what fell due goes out now, not after this pass's reads
            for key, _ in selector.select(0.001 if tick is not None else 1.0):
                line = key.data
                payloads = line.wire.receive_payloads()
                now = time.perf_counter()
                for payload in payloads:
                    body = bodies.get(payload)
                    if body is None:
                        body = decode_response_envelope(payload)[1]
                        if len(payload) <= 64 and len(bodies) < 1024:
                            bodies[payload] = body
                    kind, member, sent = line.pending.popleft()
                    on_answer(line, kind, member, now - sent, body)
            _flush()
    finally:
        selector.close()


def _flush() -> None:
    """Send what the lines have queued, as far as their sockets take it."""
    for line in list(Line.unsent):
        line.wire.flush()
        if not line.wire.unsent:
            Line.unsent.discard(line)


def _percentile_ms(seconds: list[float], q: float) -> float:
    ordered = sorted(seconds)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def groups_case(broker: ServerProcess, address: tuple[str, int], groups: int,
                rebalancing: int, seconds: float) -> dict[str, Any]:
    per_line = 100  # groups per set: one connection per member of them
    sets = [[f"scale-{s}-{g}" for g in range(per_line)] for s in range(groups // per_line)]
    members = [[[Member(g) for g in names] for _ in range(MEMBERS)] for names in sets]
    rss_before = rss_mb(broker.pid) or 0.0
    lines = [[Line(address, ms) for ms in by_index] for by_index in members]
    flat = [line for row in lines for line in row]
    rss_connected = rss_mb(broker.pid) or 0.0
    joined = [0]
    total = groups * MEMBERS

    def on_join(line: Line, kind: str, member: Member, took: float, body: Any) -> None:
        member.joined(body)
        joined[0] += 1

    started = time.perf_counter()
    for line in flat:  # every JoinGroup queued at once; the broker takes them in order
        for member in line.members:
            line.send("join", member)
    run_lines(flat, on_join, lambda: joined[0] == total)
    join_s = time.perf_counter() - started
    # The simulator's own state (members, lines) is long-lived: kept out of its collector's
    # full collections, which took up to 0.3 s at 100,000 members and were counted as latency
    gc.freeze()
    time.sleep(0.2)  # let the broker settle before reading its RSS
    rss_joined = rss_mb(broker.pid) or 0.0

    # capacity: every member heartbeating, WINDOW in flight per connection
    errors: list[Any] = []
    capacity: list[float] = []

    def on_beat(line: Line, kind: str, member: Member, took: float, body: Any) -> None:
        if kind == "heartbeat":
            if body["error_code"] != ErrorCode.NONE:
                errors.append(body)
            sink.append(took)
            if line.heartbeating:
                line.heartbeat_next()

    sink = capacity
    for line in flat:
        line.heartbeating = True
        for _ in range(WINDOW):
            line.heartbeat_next()
    stop_at = time.monotonic() + seconds
    run_lines(flat, on_beat, lambda: time.monotonic() >= stop_at)
    beats_per_s = len(capacity) / seconds
    for line in flat:
        line.heartbeating = False
    run_lines(flat, on_beat, lambda: all(not line.pending for line in flat))

    # latency: every member heartbeating once per HEARTBEAT_INTERVAL_S, paced
    def pacer(paced: Sequence[Line]) -> Callable[[], None]:
        """Heartbeats at the members' pace, spread evenly: the lines take turns."""
        rate = len(paced) * per_line / HEARTBEAT_INTERVAL_S
        began = time.perf_counter()
        turn = [0, 0]  # heartbeats sent, the next line

        def tick() -> None:
            due = 1 + int((time.perf_counter() - began) * rate)
            sent, index = turn
            while sent < due:
                paced[index].heartbeat_next()
                sent += 1
                index = (index + 1) % len(paced)
            turn[:] = sent, index
        return tick

    steady: list[float] = []
    sink = steady
    stop_at = time.monotonic() + seconds
    cpu, broker_cpu = time.process_time(), cpu_seconds(broker.pid) or 0.0
    run_lines(flat, on_beat, lambda: time.monotonic() >= stop_at, pacer(flat))
    client_busy = (time.process_time() - cpu) / seconds
    broker_busy = ((cpu_seconds(broker.pid) or 0.0) - broker_cpu) / seconds
    run_lines(flat, on_beat, lambda: all(not line.pending for line in flat))

    # ``rebalancing`` groups rebalance at once while the others keep heartbeating, paced
    moving = lines[: max(1, rebalancing // per_line)]
    quiet = [line for row in lines[len(moving):] for line in row]
    rejoined = [0]
    expected = len(moving) * per_line * (MEMBERS - 1)
    during: list[float] = []
    sink = during

    def on_rebalance(line: Line, kind: str, member: Member, took: float, body: Any) -> None:
        if kind == "leave":
            return
        if kind == "join":
            member.joined(body)
            rejoined[0] += 1
        elif line in moving_lines:
            if body["error_code"] != ErrorCode.REBALANCE_IN_PROGRESS:
                raise RuntimeError(f"{member.group} is not rebalancing after a leave: {body}")
            line.send("join", member)
        else:
            on_beat(line, kind, member, took, body)

    # The leaves are answered before the others heartbeat: every heartbeat then learns of the
    # rebalance, and every line sends its JoinGroups in the same group order. (A JoinGroup holds
    # its connection until its round ends; lines rejoining in different orders would each hold
    # a round the other needs, until the rebalance timeout.)
    moving_lines = {line for row in moving for line in row}
    leavers = [row[-1] for row in moving]
    paced = pacer(quiet)
    rebalance_started = time.perf_counter()
    for leaver in leavers:
        for member in leaver.members:
            leaver.send("leave", member)
    run_lines(flat, on_rebalance, lambda: all(not line.pending for line in leavers), paced)
    for row in moving:
        for line in row[:-1]:
            for member in line.members:
                line.send("heartbeat", member)
    run_lines(flat, on_rebalance, lambda: rejoined[0] == expected, paced)
    rebalance_s = time.perf_counter() - rebalance_started
    run_lines(quiet, on_beat, lambda: all(not line.pending for line in quiet))
    for line in flat:
        line.wire.close()
    if errors:
        raise RuntimeError(f"{len(errors)} heartbeats failed, first: {errors[0]}")
    return {
        "bench": "scale_groups", "groups": groups, "members": total,
        "connections": len(flat), "join_time_s": round(join_s, 2),
        "connections_rss_mb": round(rss_connected - rss_before, 1),
        "coordinator_bytes_per_member": round((rss_joined - rss_connected) * 1e6 / total),
        "heartbeats_per_s": round(beats_per_s),
        "heartbeat_interval_s": HEARTBEAT_INTERVAL_S,
        "rate_per_s": round(total / HEARTBEAT_INTERVAL_S),
        "heartbeat_p50_ms": _percentile_ms(steady, 0.5),
        "heartbeat_p99_ms": _percentile_ms(steady, 0.99),
        "client_busy": round(client_busy, 2),  # the simulating client's share of a core
        "broker_busy": round(broker_busy, 2),  # the broker's, over the same seconds
        "rebalancing": len(moving) * per_line,
        "rebalance_time_s": round(rebalance_s, 2),
        "rebalancing_heartbeats": len(during),
        "rebalancing_heartbeat_p50_ms": _percentile_ms(during, 0.5) if during else None,
        "rebalancing_heartbeat_p99_ms": _percentile_ms(during, 0.99) if during else None,
        "rebalancing_heartbeat_max_ms": _percentile_ms(during, 1.0) if during else None,
    }


def partitions_case(workdir: Path, topics: int, per_topic: int, messages: int) -> dict[str, Any]:
    names = [f"scale-{t}" for t in range(topics)]
    settings = {"ODRADEK_MAX_PARTITIONS_PER_TOPIC": str(per_topic)}
    with start_odradek(workdir, settings=settings) as broker:
        started = time.perf_counter()
        with Admin(broker.address) as admin:
            for name in names:
                admin.create_topic(name, partitions=per_topic)
        create_s = time.perf_counter() - started
    started = time.perf_counter()
    with start_odradek(workdir, settings=settings) as broker:
        start_s = time.perf_counter() - started
        rss = rss_mb(broker.pid)
        value = b"x" * 100
        with Producer(broker.address, linger_ms=5, batch_bytes=64 * 1024) as producer:
            for name in names:  # metadata first
                producer.partitions_for(name)
            started = time.perf_counter()
            for i in range(messages):
                producer.send(names[i % topics], value, partition=(i // topics) % per_topic)
            producer.flush()
            produce_s = time.perf_counter() - started
    return {
        "bench": "scale_partitions", "partitions": topics * per_topic, "topics": topics,
        "create_time_s": round(create_s, 2), "startup_time_s": round(start_s, 2),
        "startup_rss_mb": rss, "messages": messages,
        "msgs_per_s": round(messages / produce_s),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the size, under a minute")
    parser.add_argument("--groups", type=int, help="groups of 10 members, a multiple of 100")
    parser.add_argument("--rebalancing", type=int, help="groups that rebalance at once")
    parser.add_argument("--topics", type=int, help="topics of --partitions partitions")
    parser.add_argument("--partitions", type=int, default=1_000, help="partitions per topic")
    parser.add_argument("--messages", type=int, help="messages spread over the partitions")
    args = parser.parse_args(argv)
    groups, rebalancing, seconds = (1_000, 100, 2.0) if args.quick else (10_000, 1_000, 5.0)
    topics, messages = (1, 20_000) if args.quick else (10, 200_000)
    groups = args.groups or groups
    rebalancing = args.rebalancing or rebalancing
    topics = args.topics or topics
    messages = args.messages or messages
    with tempfile.TemporaryDirectory(prefix="odradek-scale-") as workdir:
        delay_ms = round(groups // 100 * MEMBERS * INITIAL_DELAY_MS_PER_CONNECTION)
        settings = {"ODRADEK_GROUP_INITIAL_REBALANCE_DELAY_MS": str(delay_ms)}
        with start_odradek(Path(workdir) / "groups", settings=settings) as broker:
            host, port = broker.address.rsplit(":", 1)
            address = (host, int(port))
            create_topic(address)
            line = groups_case(broker, address, groups, rebalancing, seconds)
            line["topic_partitions"] = PARTITIONS
            print(json.dumps(line), flush=True)
        partitions = partitions_case(Path(workdir) / "partitions", topics, args.partitions,
                                     messages)
        print(json.dumps(partitions), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
