"""Processes this machine's local cluster starts, and how it recognises them later.

A process is recorded with its PID and its exact command line; before signalling a recorded PID,
``RecordedProcess`` checks that ``/proc/PID/cmdline`` is still that command (PIDs get reused),
which makes this Linux-only. Shared by tooling.local.zookeeper and tooling.local.cluster.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from client.errors import ClientError

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
_POLL_INTERVAL = 0.05
_PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread


class LocalClusterError(ClientError):
    """A local ZooKeeper or broker would not start or stop; the message says which and why."""


def process_cmdline(pid: int) -> tuple[str, ...] | None:
    """The command line of a running process; None when it is gone or a zombie, so a reused
    or dead PID never looks like ours."""
    proc = Path(f"/proc/{pid}")
    deadline = time.monotonic() + 1.0
    while True:
        try:
            stat = (proc / "stat").read_text()
            data = (proc / "cmdline").read_bytes()
        except OSError:
            return None
        fields = stat.rpartition(")")[2].split()  # state, ppid, ..., flags (7th)
        if fields[0] in ("Z", "X"):
            return None
        # Empty also for a moment inside exec (the new image's arguments are not yet in
        # place, though Popen has returned); a kernel thread's stays empty.
        kernel_thread = int(fields[6]) & _PF_KTHREAD
        if data or kernel_thread or time.monotonic() >= deadline:
            return tuple(data.rstrip(b"\0").decode("utf-8", "surrogateescape").split("\0"))
        time.sleep(0.005)


@dataclass(frozen=True)
class RecordedProcess:
    """A process this module started: its PID and the exact command line it was started with."""

    pid: int
    cmdline: tuple[str, ...]

    def is_running(self) -> bool:
        reap_if_child(self.pid)
        return process_cmdline(self.pid) == self.cmdline

    def stop(self, timeout: float = STOP_TIMEOUT) -> str:
        """SIGTERM, then SIGKILL after ``timeout``; only while the PID still runs our command.
        Returns "stopped", "killed", "not running" or "not ours" (the PID now belongs to
        another program, which is left alone)."""
        reap_if_child(self.pid)
        current = process_cmdline(self.pid)
        if current is None:
            return "not running"
        if current != self.cmdline:
            return "not ours"
        if not self._signal(signal.SIGTERM):
            return "not running"
        if self._wait_gone(timeout):
            return "stopped"
        if self.is_running() and self._signal(signal.SIGKILL) and not self._wait_gone(timeout):
            raise LocalClusterError(f"pid {self.pid} is still running after SIGKILL")
        return "killed"

    def _signal(self, signum: signal.Signals) -> bool:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.is_running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL)
        return True


def reap_if_child(pid: int) -> None:
    """Collect the exit status of our own finished child, so it stops being a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "".join(text.splitlines(keepends=True)[-lines:])
