"""Connections between requests wait here together, watched by one task.

A connection's task waiting for its next request costs a task switch, a cancel scope with a
deadline and a re-armed one-shot registration in trio's epoll for every request it gets: at
100,000 members heartbeating every 3 s over 1,000 connections (benchmarks/scale.py) those
per-request costs were most of the broker's core -- about 80 us of it per heartbeat, against
20 us when 64 pipelined heartbeats share one read -- and the heartbeats queued behind each
other for hundreds of milliseconds.

So a connection that has answered everything it read and has nothing left to send parks its
task and puts its socket in this lane's epoll set (level-triggered, registered once). One task
waits on that set; when sockets are readable it lets each connection read and answer, in that
same pass, the requests that are answered at once with no await (a Heartbeat; see
``Connection.on_lane_turn``) and write the answers straight to the socket. A connection stays
in the lane while that is all it gets: a request read in part waits there for the rest (under
its read deadline), and whole requests its turn had no time for are answered in the next round.
Anything else -- another request, the peer's end of stream, a write that did not go whole, no
request memory to spare -- hands the connection back to its task, which carries on as before,
with every deadline and bound in place. The parked task's idle deadline is checked against the
last read the lane made for it, so an active connection parks once, not once per request.

The lane waits ``GATHER_S`` (1 ms) after a pass that served everything ready before it looks
again, so the heartbeats of many connections share one pass: woken for each readable socket,
it paid a pass of trio's scheduler for every heartbeat or two.

The lane's passes are fair: a pass that its turn cut short (``LANE_TURN_S``) leaves the
connections it did not reach to go first in the next one. epoll alone is not fair: it reports a
socket that stays readable in the place it had, so the sockets at the front of its list --
answered, then written to again by their clients -- were served in every pass, and at full load
(1,000 groups rebalancing beside 100,000 heartbeating members) the ones behind them waited for
seconds. Nor may a connection leave the lane for a partial request or for want of a turn: its
task, woken, waits for a turn of trio's scheduler for each request it reads, and a busy
connection that had left could not come back while requests kept arriving.

A round serves the readable connections first and the ones the last round left requests to
after them: at the start of a rebalance of 1,000 groups, 9,000 Heartbeats arrive at once, 100
on each of 90 connections, and a quiet connection's one Heartbeat then waited for those
connections' turns in every round (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import enum
import select
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import structlog
import trio

log = structlog.get_logger(__name__)


#: how long one pass of the lane answers before it lets other tasks run: about 40 heartbeats.
#: The connections it did not get to are served first in the next pass
LANE_TURN_S = 0.001
#: the most requests one connection has answered in one turn of a round: one with a backlog
#: (a hundred members told at once to rejoin) is served over rounds, between the others
VISIT_REQUESTS = 4
#: how long the lane waits after a pass that served everything ready before it looks again: the
#: sockets that become readable meanwhile are served in one pass. Woken for each socket, the
#: lane cost a pass of trio's scheduler, an epoll re-arm and a poll of its own set for every
#: heartbeat or two: at 22,000 heartbeats a second that was a third of the broker's core
GATHER_S = 0.001
#: how long a connection's task serves the lane between two requests on its own path: the
#: Heartbeats waiting go first, before more of the other requests (a rebalance's JoinGroups)
BETWEEN_REQUESTS_TURN_S = 0.02


class Turn(enum.Enum):
    """What a connection asks of the lane after its turn."""

    WAIT = "wait"  # answered what it had: served again when its socket is readable
    AGAIN = "again"  # whole requests left: served again in the lane's next round
    LEAVE = "leave"  # something for its task: handed back


class LaneConnection(Protocol):
    def on_lane_turn(self, until: float) -> Turn:
        """Read and answer what can be answered now, stopping at ``until`` (the lane's clock)."""

    def hand_back(self, error: Exception | None = None) -> None:
        """Wake the connection's task (with why, if the lane failed it)."""


class IdleLane:
    def __init__(self, *, turn_s: float = LANE_TURN_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._epoll = select.epoll()
        self._waiting: dict[int, LaneConnection] = {}
        self._turn_s = turn_s
        self._clock = clock  # the turn's clock; the connections are told when it ends on it
        # a round serves every connection with something to answer once, over as many passes
        # as it takes: the ones this round has not reached yet, and the ones it left requests
        # to, which end the next round
        self._behind: list[int] = []
        self._again: list[int] = []
        self._scope = trio.CancelScope()
        self._serving = False  # in serve_ready: a connection it calls must not call it again

    def add(self, fd: int, connection: LaneConnection) -> None:
        if self._epoll.closed:
            connection.hand_back()
            return
        self._epoll.register(fd, select.EPOLLIN)
        self._waiting[fd] = connection

    def discard(self, fd: int) -> None:
        if self._waiting.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):  # closed already: epoll dropped it
                self._epoll.unregister(fd)

    def __len__(self) -> int:
        return len(self._waiting)

    def close(self) -> None:
        """Shutdown: hand every connection back and stop (at once if ``run`` has not begun)."""
        self._scope.cancel()

    async def run(self) -> None:
        """Until ``close`` or cancelled; then every connection still here is handed back."""
        try:
            with self._scope:
                await self._serve()
        finally:
            for fd, connection in list(self._waiting.items()):
                self.discard(fd)
                connection.hand_back()
            self._epoll.close()

    async def _serve(self) -> None:
        while True:
            served = self.serve_ready()
            if self._behind or self._again:
                await trio.lowlevel.checkpoint()  # a pass cut short: the other tasks' turn first
            elif served:
                await trio.sleep(GATHER_S)  # then serve what became readable meanwhile
            else:
                await trio.lowlevel.wait_readable(self._epoll.fileno())

    def serve_ready(self, turn_s: float | None = None) -> bool:
        """Read and answer the connections whose bytes are there now, without waiting, for
        ``turn_s`` (the lane's turn by default). The lane's task does it when the set is
        readable; a connection's task between two requests on its own path does it too
        (``BETWEEN_REQUESTS_TURN_S``), so a heartbeat never waits for a whole batch of trio's
        scheduler while other connections' requests (a rebalance's JoinGroups) keep it busy."""
        if self._serving or self._epoll.closed:
            return False
        self._serving = True
        until = self._clock() + (self._turn_s if turn_s is None else turn_s)
        try:
            served = self._serve_part(until)
            # a round through with time to spare: the next one, while anything is ready
            while served and not self._behind and self._clock() < until:
                if not self._serve_part(until):
                    break
        finally:
            self._serving = False
        return served

    def _serve_part(self, until: float) -> bool:
        """Serve the round (or begin the next) until ``until``; whether anyone was served."""
        served = False
        for fd in self._in_turn(until):
            connection = self._waiting.get(fd)
            if connection is None:
                continue
            served = True
            try:
                turn = connection.on_lane_turn(until)
            except Exception as exc:  # a bug: lose this connection, never the lane
                log.error("connection.lane_failed", exc_info=exc)
                self.discard(fd)
                connection.hand_back(exc)
                continue
            if turn is Turn.AGAIN:
                self._again.append(fd)  # in the next round
            elif turn is Turn.LEAVE:
                self.discard(fd)
                connection.hand_back()
        return served

    def _in_turn(self, until: float) -> Iterator[int]:
        """The connections to serve until the turn ends (after one at least): the rest of the
        round, or a new round -- the readable sockets, then the connections the last one left
        requests to. epoll is asked once a round, so a pass costs what it serves, and a
        connection with many requests waiting takes one turn a round, as the others do."""
        ready = self._behind
        if not ready:
            ready = [fd for fd, _ in self._epoll.poll(0, max(1, len(self._waiting)))]
            if self._again:
                first, self._again = self._again, []
                served = set(first)
                ready = [fd for fd in ready if fd not in served] + first
        self._behind = []
        for index, fd in enumerate(ready):
            if index and self._clock() >= until:
                self._behind = ready[index:]
                return
            yield fd
