"""A command run under a pseudo-terminal, its screen output collected as plain text."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class TerminalCommand:
    """``python -m tooling.cli ARGS`` with a pty of ``columns`` x ``rows`` as its terminal."""

    def __init__(self, args: Sequence[str], *, columns: int = 200, rows: int = 60) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TERM": "xterm-256color",
               "COLUMNS": str(columns), "LINES": str(rows)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tooling.cli", *args],
            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self._master = master
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:  # the child's side closed
                return
            if not data:
                return
            with self._lock:
                self._chunks.append(data)

    @property
    def text(self) -> str:
        """Everything shown so far, escape sequences removed."""
        with self._lock:
            raw = b"".join(self._chunks)
        return _ESCAPES.sub("", raw.decode("utf-8", "replace"))

    def wait_for(self, found: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text
            if found(text):
                return text
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{text[-3000:]}")
            time.sleep(0.05)  # a pause between looks at the screen, not a synchronisation

    def interrupt(self, timeout: float = 10.0) -> int:
        """Ctrl-C (SIGINT to the process); its exit status."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        os.close(self._master)
