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
its read deadline), and whole requests its turn had no time for wait in its backlog.
Anything else -- another request, the peer's end of stream, a write that did not go whole, no
request memory to spare -- hands the connection back to its task, which carries on as before,
with every deadline and bound in place. The parked task's idle deadline is checked against the
last read the lane made for it, so an active connection parks once, not once per request.

The lane waits ``GATHER_S`` (1 ms) after a pass that served everything ready before it looks
again, so the heartbeats of many connections share one pass: woken for each readable socket,
it paid a pass of trio's scheduler for every heartbeat or two.

The lane is fair. Every socket that epoll reports readable is served once before epoll is asked
again: epoll alone reports a socket that stays readable in the place it had, so the sockets at
the front of its list -- answered, then written to again by their clients -- were served in
every pass, and at full load (1,000 groups rebalancing beside 100,000 heartbeating members) the
ones behind them waited for seconds. A pass that its turn (``LANE_TURN_S``) cut short leaves the
rest to the next one. Nor may a connection leave the lane for a partial request or for want of
a turn: its task, woken, waits for a turn of trio's scheduler for each request it reads, and a
busy connection that had left could not come back while requests kept arriving.

A connection with whole requests left after its turn (``VISIT_REQUESTS`` at most) goes to the
backlog, and out of the epoll set until it has answered them: the backlog is served in turn
once the readable sockets are, and epoll is asked again after ``BACKLOG_S`` of it. So a new
request waits for that much of other connections' old ones at most: at the start of a
rebalance of 1,000 groups, 9,000 Heartbeats arrive at once, 100 on each of 90 connections, and
served in rounds -- the readable sockets, then a turn for each connection with a backlog -- a
quiet connection's one Heartbeat waited for all 90 turns in every round (docs/performance.md).
Out of the set, a connection with a backlog costs epoll nothing: asked that often with 1,000
connections in the set, each with 64 requests in flight, each poll could report all 1,000, and
the lane answered 45,000-62,000 heartbeats/s, against 86,000-118,000.
"""

from __future__ import annotations

import contextlib
import enum
import select
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

import structlog
import trio

log = structlog.get_logger(__name__)


#: how long one pass of the lane answers before it lets other tasks run: about 40 heartbeats.
#: The connections it did not get to are served first in the next pass
LANE_TURN_S = 0.001
#: the most requests one connection answers in one turn: one with a backlog (a hundred members
#: told at once to rejoin) is served over many turns, between the others
VISIT_REQUESTS = 4
#: how long the lane waits after a pass that served everything ready before it looks again: the
#: sockets that become readable meanwhile are served in one pass. Woken for each socket, the
#: lane cost a pass of trio's scheduler, an epoll re-arm and a poll of its own set for every
#: heartbeat or two: at 22,000 heartbeats a second that was a third of the broker's core
GATHER_S = 0.001
#: how much of the backlog the lane serves before it asks epoll for readable sockets again:
#: how long a new request waits for other connections' old ones
BACKLOG_S = 0.0005
#: how long a connection's task serves the lane between two requests on its own path: the
#: Heartbeats waiting go first, before more of the other requests (a rebalance's JoinGroups)
BETWEEN_REQUESTS_TURN_S = 0.02


class Turn(enum.Enum):
    """What a connection asks of the lane after its turn."""

    WAIT = "wait"  # answered what it had: served again when its socket is readable
    AGAIN = "again"  # whole requests left: in the backlog, served again in its turn
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
        self._readable: deque[int] = deque()  # as epoll reported them, not served yet
        self._backlog: deque[int] = deque()  # left whole requests: out of the epoll set
        self._backlog_left = 0.0  # of BACKLOG_S, before epoll is asked again
        self._events: dict[int, int] = {}  # what epoll watches each socket for
        self._scope = trio.CancelScope()
        self._serving = False  # in serve_ready: a connection it calls must not call it again

    def add(self, fd: int, connection: LaneConnection) -> None:
        if self._epoll.closed:
            connection.hand_back()
            return
        self._epoll.register(fd, select.EPOLLIN)
        self._waiting[fd] = connection
        self._events[fd] = select.EPOLLIN

    def discard(self, fd: int) -> None:
        self._events.pop(fd, None)
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
            if self._readable or self._backlog:
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
        served = False
        try:
            while True:
                if not self._readable and (not self._backlog or self._backlog_left <= 0):
                    self._poll()
                if self._readable:
                    self._serve_connection(self._readable.popleft(), until)
                elif self._backlog:
                    started = self._clock()
                    self._serve_connection(self._backlog.popleft(), until)
                    self._backlog_left -= self._clock() - started
                else:
                    return served
                served = True
                if self._clock() >= until:
                    return served
        finally:
            self._serving = False

    def _poll(self) -> None:
        """Ask epoll which sockets are readable: they are served next, in the order it gives,
        and the backlog has ``BACKLOG_S`` after them before it is asked again."""
        self._readable.extend(fd for fd, _ in self._epoll.poll(0, max(1, len(self._waiting))))
        self._backlog_left = BACKLOG_S

    def _serve_connection(self, fd: int, until: float) -> None:
        connection = self._waiting.get(fd)
        if connection is None:
            return  # gone since it was listed
        try:
            turn = connection.on_lane_turn(until)
        except Exception as exc:  # a bug: lose this connection, never the lane
            log.error("connection.lane_failed", exc_info=exc)
            self.discard(fd)
            connection.hand_back(exc)
            return
        if turn is Turn.LEAVE:
            self.discard(fd)
            connection.hand_back()
        elif turn is Turn.AGAIN:
            self._backlog.append(fd)
            self._watch(fd, 0)
        else:
            self._watch(fd, select.EPOLLIN)

    def _watch(self, fd: int, events: int) -> None:
        """Watch the socket for ``events`` (none while it has a backlog), if that changes."""
        if self._events.get(fd) != events:
            try:
                self._epoll.modify(fd, events)
            except OSError:  # closed under it: its task discards it
                return
            self._events[fd] = events
