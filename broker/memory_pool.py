"""The broker-wide bound on bytes of requests being read and queued: Kafka's
``queued.max.request.bytes`` (KIP-72).

A connection reserves bytes here before it reads them from its socket and releases them once the
request they belong to has been handled (broker/connection.py). Reservations never go over
``capacity``: a connection that cannot reserve waits, without reading, until bytes are released.
Ten connections each sending most of a 100 MiB frame once took the broker past 1 GB; now what
they can make it hold is this bound.

Deadlock: a frame's whole size is reserved at once as soon as its length prefix is known (all or
nothing), so a connection that holds its reservation can always read its frame to the end. Bytes
are only ever held by connections that can finish, by waiters holding what they read before they
knew their frame's size, or by stalled peers -- and every frame has a read deadline
(``request_read_timeout_ms``) that closes its connection and releases what it held. Nobody waits
on a holder for ever.

Small requests keep flowing while big frames wait:

- reservations of at most ``small_bytes`` ("small": fetches, metadata, heartbeats, commits,
  most produces) may use the whole capacity; bigger ones leave ``small_share`` free for them;
- read-ahead taken before a frame's size is known (``try_reserve_spare``) is only taken from
  room nobody waits for and outside that share, so connections stuck behind big frames hold a
  4-byte length prefix each, not a read-ahead;
- released bytes go first to waiting small reservations, then to big ones in arrival order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import trio

#: The read-ahead taken before a frame's size is known, and the largest "small" reservation.
SMALL_REQUEST_BYTES = 64 * 1024


@dataclass(eq=False, slots=True)
class _Waiter:
    size: int
    granted: bool = False
    event: trio.Event = field(default_factory=trio.Event)


class RequestMemoryPool:
    """Bytes reserved for requests being read and queued, never over ``capacity``."""

    def __init__(
        self, capacity: int, *, small_share: int = 0, small_bytes: int = SMALL_REQUEST_BYTES
    ) -> None:
        if not (capacity >= 1 and 0 <= small_share < capacity and small_bytes >= 0):
            raise ValueError(f"bad pool: capacity {capacity}, small_share {small_share}, "
                             f"small_bytes {small_bytes}")
        self.capacity = capacity
        self.small_bytes = small_bytes
        self.big_capacity = capacity - small_share  # what big reservations may fill
        self.used = 0
        self._small_waiters: deque[_Waiter] = deque()
        self._big_waiters: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        """Reservations waiting for room."""
        return len(self._small_waiters) + len(self._big_waiters)

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if they fit now without passing a waiter they may not pass
        (a big one passes none). The fast path: no await, a few integer operations."""
        if size <= self.small_bytes:
            if self.used + size > self.capacity:
                return False
        elif self._big_waiters or self.used + size > self.big_capacity:
            return False
        self.used += size
        return True

    def try_reserve_spare(self, size: int) -> bool:
        """Reserve ``size`` bytes a reader may not need (read-ahead) only out of room nobody
        waits for and outside the small requests' share."""
        if self._big_waiters or self._small_waiters or self.used + size > self.big_capacity:
            return False
        self.used += size
        return True

    async def reserve(self, size: int) -> None:
        """Reserve ``size`` bytes, waiting until they fit (small ones first, then big ones in
        arrival order). If cancelled, nothing stays reserved."""
        small = size <= self.small_bytes
        if not 0 <= size <= (self.capacity if small else self.big_capacity):
            raise ValueError(f"{size} bytes can never be reserved (capacity {self.capacity}, "
                             f"{self.big_capacity} for reservations over {self.small_bytes})")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.try_reserve(size):
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        waiter = _Waiter(size)
        queue = self._small_waiters if small else self._big_waiters
        queue.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:  # granted, then cancelled before it could resume
                self.release(size)
            else:
                queue.remove(waiter)
                self._grant()  # a big waiter leaving may let the one behind it through
            raise

    def release(self, size: int) -> None:
        """Give back ``size`` reserved bytes and wake the waiters that now fit."""
        if not 0 <= size <= self.used:
            raise ValueError(f"cannot release {size} bytes: {self.used} are reserved")
        self.used -= size
        if self._small_waiters or self._big_waiters:
            self._grant()

    def _grant(self) -> None:
        if self._small_waiters:
            waiting: deque[_Waiter] = deque()
            for waiter in self._small_waiters:
                if self.used + waiter.size <= self.capacity:
                    self._wake(waiter)
                else:
                    waiting.append(waiter)
            self._small_waiters = waiting
        big = self._big_waiters
        while big and self.used + big[0].size <= self.big_capacity:
            self._wake(big.popleft())

    def _wake(self, waiter: _Waiter) -> None:
        self.used += waiter.size
        waiter.granted = True
        waiter.event.set()
