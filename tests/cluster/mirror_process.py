"""``odradek mirror`` as a real process for the mirroring tests: started with its arguments,
its stderr collected, stopped by PID (SIGTERM for a clean stop, SIGKILL for a crash)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class MirrorProcess:
    def __init__(self, source: str, target: str, args: Sequence[str], *,
                 group: str = "odradek-mirror") -> None:
        self.argv = [sys.executable, "-m", "tooling.cli", "mirror", "--source", source,
                     "--target", target, "--group", group, *args]
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self.returncode: int | None = None

    def start(self) -> MirrorProcess:
        """Start it and wait until it has synced the topics (its first line)."""
        self._proc = subprocess.Popen(
            self.argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(target=self._read, args=(self._proc,), daemon=True).start()
        self.wait_for(r"^mirror: \d+ topics? from ")
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def text(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """The first stderr line matching ``pattern``; TimeoutError (with the output) when none
        comes in time, RuntimeError when the process ended first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self._lines:
                    if regex.search(line):
                        return line
                if self._proc is not None and self._proc.poll() is not None:
                    raise RuntimeError(f"mirror exited {self._proc.returncode}:\n{self.text()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no line matching {pattern!r}:\n{self.text()}")
                self._changed.wait(min(left, 0.5))

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait for its exit (it commits and leaves its group first)."""
        assert self._proc is not None
        if self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGTERM)
        try:
            self.returncode = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self._proc.pid, signal.SIGKILL)
            self.returncode = self._proc.wait(10)
        return self.returncode

    def kill(self) -> int:
        """SIGKILL: no commit, no LeaveGroup."""
        assert self._proc is not None
        if self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
        self.returncode = self._proc.wait(10)
        return self.returncode
