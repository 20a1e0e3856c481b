"""Group coordinator heartbeats and rebalance latency: ``python -m benchmarks.coordinator``.

Starts one broker (default settings) and prints JSON lines (``--quick``: a short smoke run):

- ``heartbeats``: heartbeats per second one broker answers -- the members of one Steady group
  heartbeating over a few connections, each keeping ``pipeline`` requests in flight. The frames
  are encoded once up front and the answers only checked for their error code, so the client's
  own work stays small next to the broker's.
- ``rebalance``: for 10, 100 and 1,000 members, milliseconds from the trigger -- one member's
  LeaveGroup -- until every remaining member holds its new assignment. Each member has its own
  connection (a JoinGroup holds it until the round ends) and acts at once: it heartbeats right
  after the trigger, rejoins on REBALANCE_IN_PROGRESS, and is done when its JoinGroup answer
  brings the next generation. A real consumer heartbeats every few seconds, which adds up to
  one heartbeat interval; this measures the coordinator's part. Each size runs ``rounds``
  times (one member fewer each time); the line gives the best and the median.

Goals (issue #5): >= 50,000 heartbeats/s; 100 members <= 200 ms. Kafka's classic protocol
needs seconds for the same (a JoinGroup round waits for every member's next poll, then a
SyncGroup round).
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.servers import start_odradek
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder
from protocol.wire import decode_response_envelope, encode_request

TOPIC = "bench"
PARTITIONS = 100
SESSION_MS = 60_000
CLIENT_ID = "bench"
#: what one recv() asks for: a larger size costs an allocation above malloc's mmap threshold
#: for every read, about 12 us here, even when 20 bytes arrive (benchmarks/scale.py reads one
#: heartbeat answer per recv, 33,000 a second)
_RECV_BYTES = 64 * 1024


class Wire:
    """One non-blocking connection: frames queued out, response bodies read in order."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self._decoder = FrameDecoder()
        self._out = bytearray()

    def queue(self, frame: bytes) -> None:
        self._out += frame

    @property
    def unsent(self) -> int:
        return len(self._out)

    def flush(self) -> None:
        while self._out:
            try:
                sent = self.sock.send(self._out)
            except BlockingIOError:
                return
            del self._out[:sent]

    def receive(self) -> list[Any]:
        """The bodies of every response that has arrived (none if nothing has)."""
        return [decode_response_envelope(payload)[1] for payload in self.receive_payloads()]

    def receive_payloads(self) -> list[bytes]:
        """The payloads of every response frame that has arrived, not decoded."""
        while True:
            try:
                data = self.sock.recv(_RECV_BYTES)
            except BlockingIOError:
                break
            if not data:
                raise ConnectionError("the broker closed a connection")
            self._decoder.receive_data(data)
            if len(data) < _RECV_BYTES:
                break
        payloads = []
        while (payload := self._decoder.next_frame()) is not None:
            payloads.append(payload)
        return payloads

    def close(self) -> None:
        self.sock.close()


def request(api: ApiKey, body: dict[str, Any], correlation_id: int = 0) -> bytes:
    return encode_request(api, 0, correlation_id, CLIENT_ID, body)


def pump(wires: Sequence[Wire], on_body: Callable[[int, Any], None], done: Callable[[], bool],
         timeout: float = 120.0) -> None:
    """Move bytes until ``done()``: ``on_body(index of the wire, body)`` for each response."""
    selector = selectors.DefaultSelector()
    for i, wire in enumerate(wires):
        selector.register(wire.sock, selectors.EVENT_READ, i)
    deadline = time.monotonic() + timeout
    try:
        for wire in wires:
            wire.flush()
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the broker did not answer in time")
            for key, _ in selector.select(1.0):
                for body in wires[key.data].receive():
                    on_body(key.data, body)
            for wire in wires:
                wire.flush()
    finally:
        selector.close()


# ------------------------------------------------------------------------------------ group


class Group:
    """``size`` members of group ``group_id``, one connection each, joined in one round."""

    def __init__(self, address: tuple[str, int], group_id: str, size: int) -> None:
        self.group_id = group_id
        self.wires = [Wire(address) for _ in range(size)]
        self.member_ids = [""] * size
        self.generation = -1
        answers: dict[int, Any] = {}
        for wire in self.wires:
            wire.queue(self.join_frame(""))
        pump(self.wires, answers.__setitem__, lambda: len(answers) == size)
        for i, answer in answers.items():
            if answer["error_code"]:
                raise RuntimeError(f"JoinGroup failed: {answer}")
            self.member_ids[i] = answer["member_id"]
            self.generation = answer["generation_id"]

    def join_frame(self, member_id: str) -> bytes:
        return request(ApiKey.JOIN_GROUP, {
            "group_id": self.group_id, "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": SESSION_MS, "topics": [TOPIC], "member_id": member_id,
            "assignment_strategy": "range",
        })

    def heartbeat_frame(self, i: int, correlation_id: int = 0) -> bytes:
        return request(ApiKey.HEARTBEAT, {
            "group_id": self.group_id, "member_id": self.member_ids[i],
            "generation_id": self.generation,
        }, correlation_id)

    def rebalance_after_leave(self) -> float:
        """The last member leaves; seconds until every other member has the next generation."""
        leaver = len(self.wires) - 1
        stayers = range(leaver)
        joining: set[int] = set()
        done: set[int] = set()
        started = time.perf_counter()
        self.wires[leaver].queue(request(
            ApiKey.LEAVE_GROUP, {"group_id": self.group_id, "member_id": self.member_ids[leaver]}
        ))
        for i in stayers:
            self.wires[i].queue(self.heartbeat_frame(i))

        def on_body(i: int, body: Any) -> None:
            code = body["error_code"]
            if i == leaver:
                assert code == ErrorCode.NONE, body
            elif i not in joining:  # a heartbeat's answer
                if code == ErrorCode.REBALANCE_IN_PROGRESS:
                    joining.add(i)
                    self.wires[i].queue(self.join_frame(self.member_ids[i]))
                else:  # not told yet: the leave is still on its way
                    assert code == ErrorCode.NONE, body
                    self.wires[i].queue(self.heartbeat_frame(i))
            else:
                assert code == ErrorCode.NONE and body["generation_id"] > self.generation, body
                done.add(i)

        pump(self.wires, on_body, lambda: len(done) == leaver)
        elapsed = time.perf_counter() - started
        self.wires.pop().close()
        self.member_ids.pop()
        self.generation += 1
        return elapsed

    def close(self) -> None:
        for wire in self.wires:
            wire.close()


# ------------------------------------------------------------------------------- benchmarks


def heartbeats(address: tuple[str, int], members: int, connections: int, pipeline: int,
               seconds: float) -> dict[str, Any]:
    group = Group(address, "bench-heartbeats", members)
    frames = [group.heartbeat_frame(i, i) for i in range(members)]
    wires = [Wire(address) for _ in range(connections)]
    sent = [0] * connections
    answered = [0]
    errors: list[Any] = []

    def send(w: int, count: int) -> None:
        start = sent[w]
        wires[w].queue(b"".join(frames[(start + k) % members] for k in range(count)))
        sent[w] = start + count

    def on_body(w: int, body: Any) -> None:
        answered[0] += 1
        if body["error_code"] != ErrorCode.NONE:
            errors.append(body)
        send(w, 1)  # keep ``pipeline`` in flight

    try:
        for w in range(connections):
            send(w, pipeline)
        warm_until = time.monotonic() + min(0.5, seconds / 2)
        pump(wires, on_body, lambda: time.monotonic() >= warm_until)
        answered[0] = 0
        started = time.perf_counter()
        stop_at = time.monotonic() + seconds
        pump(wires, on_body, lambda: time.monotonic() >= stop_at)
        elapsed = time.perf_counter() - started
    finally:
        for wire in wires:
            wire.close()
        group.close()
    if errors:
        raise RuntimeError(f"{len(errors)} heartbeats failed, first: {errors[0]}")
    return {
        "bench": "coordinator", "case": "heartbeats", "members": members,
        "connections": connections, "pipeline": pipeline, "seconds": round(elapsed, 2),
        "heartbeats_per_s": round(answered[0] / elapsed),
    }


def rebalance(address: tuple[str, int], size: int, rounds: int) -> dict[str, Any]:
    group = Group(address, f"bench-rebalance-{size}", size)
    try:
        times = [group.rebalance_after_leave() * 1000 for _ in range(rounds)]
    finally:
        group.close()
    return {
        "bench": "coordinator", "case": "rebalance", "members": size, "trigger": "LeaveGroup",
        "partitions": PARTITIONS, "rounds": rounds, "best_ms": round(min(times), 1),
        "median_ms": round(statistics.median(times), 1),
    }


def create_topic(address: tuple[str, int]) -> None:
    wire = Wire(address)
    answers: list[Any] = []
    wire.queue(request(ApiKey.CREATE_TOPICS, {
        "topics": [{"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1,
                    "configs": {}}],
        "timeout_ms": 30_000, "validate_only": False,
    }))
    try:
        pump([wire], lambda _, body: answers.append(body), lambda: bool(answers))
    finally:
        wire.close()
    if answers[0]["topics"][0]["error_code"]:
        raise RuntimeError(f"CreateTopics failed: {answers[0]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (a smoke test)")
    args = parser.parse_args(argv)
    sizes, rounds, seconds = ((10,), 2, 0.5) if args.quick else ((10, 100, 1_000), 5, 5.0)
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as workdir, \
            start_odradek(Path(workdir)) as broker:
        host, port = broker.address.rsplit(":", 1)
        address = (host, int(port))
        create_topic(address)
        results: list[Callable[[], dict[str, Any]]] = [
            lambda: heartbeats(address, members=100, connections=8, pipeline=128,
                               seconds=seconds)]
        results += [partial(rebalance, address, size, rounds) for size in sizes]
        for result in results:
            print(json.dumps(result()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
