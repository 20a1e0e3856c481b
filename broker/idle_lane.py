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
``Connection.on_lane_readable``) and write the answers straight to the socket. Anything
else -- another request, a partial frame, the peer's end of stream, a write that did not go
whole, no request memory to spare -- hands the connection back to its task, which carries on
as before, with every deadline and bound in place. The parked task's idle deadline is checked
against the last read the lane made for it, so an active connection parks once, not once per
request.
"""

from __future__ import annotations

import contextlib
import select
import time
from typing import Protocol

import structlog
import trio

log = structlog.get_logger(__name__)


#: how long one pass of the lane answers before it lets other tasks run: about 70 heartbeats.
#: The sockets it did not get to stay readable (the set is level-triggered), and a connection
#: with more requests read than its share hands them to its own task, which takes its turns
LANE_TURN_S = 0.001


class LaneConnection(Protocol):
    def on_lane_readable(self, until: float) -> bool:
        """Read and answer what can be answered now, stopping at ``until`` (perf_counter);
        whether to stay in the lane."""

    def hand_back(self, error: Exception | None = None) -> None:
        """Wake the connection's task (with why, if the lane failed it)."""


class IdleLane:
    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._waiting: dict[int, LaneConnection] = {}
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
            await trio.lowlevel.wait_readable(self._epoll.fileno())
            self.serve_ready()
            await trio.lowlevel.checkpoint()  # a pass cut short: the other tasks' turn first

    def serve_ready(self) -> None:
        """Read and answer the connections whose bytes are there now, without waiting. The
        lane's task does it when the set is readable; a connection's task between two requests
        on its own path does it too, so a heartbeat never waits for a whole round of trio's
        scheduler while other connections' requests (a rebalance's JoinGroups) keep it busy."""
        if self._serving or self._epoll.closed:
            return
        self._serving = True
        until = time.perf_counter() + LANE_TURN_S
        try:
            for fd, _ in self._epoll.poll(0, max(1, len(self._waiting))):
                if time.perf_counter() >= until:
                    break  # still readable: the next pass takes it
                connection = self._waiting.get(fd)
                if connection is None:
                    continue
                try:
                    stay = connection.on_lane_readable(until)
                except Exception as exc:  # a bug: lose this connection, never the lane
                    log.error("connection.lane_failed", exc_info=exc)
                    self.discard(fd)
                    connection.hand_back(exc)
                    continue
                if not stay:
                    self.discard(fd)
                    connection.hand_back()
        finally:
            self._serving = False
