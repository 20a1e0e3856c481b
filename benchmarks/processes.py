"""What /proc tells about processes the benchmarks started: their tree and their peak memory;
and ``ChildLines``, the JSON lines several of them print, read through one selector.

Peak memory is ``VmHWM`` from ``/proc/PID/status``; writing 5 to ``/proc/PID/clear_refs`` starts
it again from the current RSS, so each measurement can report the peak it caused itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set size (VmHWM) in units of 10**6 bytes; None if gone."""
    return _status_mb(pid, "VmHWM:")


def rss_mb(pid: int) -> float | None:
    """The process's resident set size now (VmRSS) in units of 10**6 bytes; None if gone."""
    return _status_mb(pid, "VmRSS:")


def _status_mb(pid: int, field: str) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(field):
            return round(int(line.split()[1]) * 1024 / 1e6, 1)
    return None


def reset_peak_rss(pid: int) -> None:
    """Start the process's VmHWM again from its current RSS (Linux: clear_refs value 5)."""
    # If the process ended, or the kernel does not allow it, the next peak spans more.
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from the state field on (the command name before it may hold spaces)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """CPU time the process has used so far, user and system; None if gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot): with the PID it names one process,
    so a PID reused by another process is not mistaken for it."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]  # field 22, starttime


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def broker_processes(pid: int) -> list[int]:
    """The ``python -m broker`` processes below ``pid``."""
    found = []
    for child in descendants(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-m" in argv and b"broker" in argv:
            found.append(child)
    return found


class ChildLines:
    """The JSON objects child processes print, one per line on stdout, read without blocking
    through one selector. ``read`` yields ``(key, object)`` for each whole line, and
    ``(key, None)`` once when a child's stdout ends."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._partial: dict[Hashable, bytes] = {}

    def add(self, key: Hashable, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        self._selector.register(proc.stdout, selectors.EVENT_READ, key)

    def close(self) -> None:
        self._selector.close()

    def read(self, timeout: float) -> Iterator[tuple[Hashable, dict[str, Any] | None]]:
        for selected, _ in self._selector.select(timeout):
            key = selected.data
            try:
                data = os.read(selected.fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                self._selector.unregister(selected.fileobj)
                yield key, None
                continue
            lines = (self._partial.get(key, b"") + data).split(b"\n")
            self._partial[key] = lines.pop()
            for line in lines:
                yield key, json.loads(line)
