"""A single-threaded future: completed by whoever drives the client's I/O.

No threads exist to complete it behind the caller's back, so ``result()`` does the waiting
itself: it calls the ``drive`` function it was given (a client's ``poll``) until the future is
done or the timeout passes. Callbacks run inside that call, in the order they were added.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from client.durations import seconds_text
from client.errors import ClientTimeoutError, IllegalStateError

T = TypeVar("T")
_PENDING = object()


class Future(Generic[T]):
    __slots__ = ("_callbacks", "_drive", "_error", "_value")

    def __init__(self, drive: Callable[[float], object] | None = None) -> None:
        self._value: object = _PENDING
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] = []
        self._drive = drive

    def done(self) -> bool:
        return self._value is not _PENDING or self._error is not None

    def succeeded(self) -> bool:
        return self._value is not _PENDING

    def failed(self) -> bool:
        return self._error is not None

    def exception(self) -> BaseException | None:
        return self._error

    @property
    def value(self) -> T:
        """The result of a future that succeeded; anything else is a programming error."""
        if self._value is _PENDING:
            raise IllegalStateError("future has no value (pending or failed)")
        return self._value  # type: ignore[return-value]

    def succeed(self, value: T) -> None:
        self._settle()
        self._value = value
        self._run_callbacks()

    def fail(self, error: BaseException) -> None:
        self._settle()
        self._error = error
        self._run_callbacks()

    def add_done_callback(self, fn: Callable[[Future[T]], None]) -> None:
        """Call ``fn(future)`` once the future is done (at once if it already is)."""
        if self.done():
            fn(self)
        else:
            self._callbacks.append(fn)

    def result(self, timeout: float | None = None) -> T:
        """The value, or raise the error; drives I/O while waiting. ``timeout`` in seconds."""
        if not self.done():
            self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    # An alias in kafka-python's spelling.
    get = result

    def _wait(self, timeout: float | None) -> None:
        if self._drive is None:
            raise IllegalStateError("future is pending and nothing drives its I/O")
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done():
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                assert timeout is not None  # only a deadline runs out
                raise ClientTimeoutError(f"no result within {seconds_text(timeout)}")
            self._drive(remaining)

    def _settle(self) -> None:
        if self.done():
            raise IllegalStateError("future is already done")

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)
