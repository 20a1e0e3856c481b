"""How ``odradek`` commands stop on SIGINT (Ctrl-C) and SIGTERM (what ``kill``, systemd and
container runtimes send): the same way for both, and never by dying mid-request.

Python turns SIGINT into ``KeyboardInterrupt`` but lets SIGTERM kill the process on the spot:
no final commit, no LeaveGroup (the group keeps a dead member until its session expires), no
summary, child processes left running. So:

- ``signals_interrupt()`` (around every command, tooling/cli/main.py ``main``): either signal raises
  ``Interrupted``, a ``KeyboardInterrupt`` -- so ``with`` blocks close what they opened, as for
  Ctrl-C, and the exit status is 128 + the signal's number (130, 143);
- ``StopRequest`` (around the loops of ``consume`` and ``produce``): the first signal only
  records a request, which the loop checks between polls -- an exception raised inside ``poll``
  or ``commit`` could strand a half-read response and leave the consumer unable to commit or
  leave. Only a blocking read of stdin, which no flag can wake, is cut short
  (``interruptible()``). A second signal raises ``Interrupted``: for whoever cannot wait.

A signal the process inherited as ignored (``nohup``, background jobs of a script) stays ignored.
Outside the main thread handlers cannot be set, and these do nothing.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_Handler = Callable[[int, FrameType | None], Any] | int | None


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM cut a command short; ``signum`` says which (exit 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _install(handler: Callable[[int, FrameType | None], None]) -> dict[int, _Handler]:
    """Set ``handler`` for the stop signals not inherited as ignored; the handlers replaced."""
    replaced: dict[int, _Handler] = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) == signal.SIG_IGN:
            continue
        try:
            replaced[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: Python allows handlers only there
            break
    return replaced


def _restore(replaced: dict[int, _Handler]) -> None:
    for signum, previous in replaced.items():
        # None: set from outside Python, which it cannot reinstate; the default is closest
        signal.signal(signum, signal.SIG_DFL if previous is None else previous)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Inside, SIGINT and SIGTERM both raise ``Interrupted``: SIGTERM gets Ctrl-C's cleanup."""
    replaced = _install(_raise_interrupted)
    try:
        yield
    finally:
        _restore(replaced)


class StopRequest:
    """Inside ``with StopRequest() as stop``, the first SIGINT or SIGTERM sets
    ``stop.signum`` (so ``stop.requested``) for the loop to see; a second one raises
    ``Interrupted``."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._interruptible = False
        self._replaced: dict[int, _Handler] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if self._interruptible or not first:
            raise Interrupted(signum)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Around a blocking call a stop request cannot otherwise end (reading stdin): a stop
        signal raises ``Interrupted`` in it -- or on entry, if one came before."""
        self._interruptible = True
        try:
            if self.signum is not None:  # after the flag is up: no signal slips between
                raise Interrupted(self.signum)
            yield
        finally:
            self._interruptible = False

    def __enter__(self) -> StopRequest:
        self._replaced = _install(self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _restore(self._replaced)
        self._replaced = {}
