"""What /proc tells about processes the benchmarks started: their tree and their peak memory.

Peak memory is ``VmHWM`` from ``/proc/PID/status``; writing 5 to ``/proc/PID/clear_refs`` starts
it again from the current RSS, so each measurement can report the peak it caused itself.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set size (VmHWM) in units of 10**6 bytes; None if gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
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
