"""A benchmark area: one small interface for the existing scripts and the side-by-side runs.

An area is ``run(quick, earlier) -> Iterable[dict]``: it yields raw JSON-able lines (see
benchmarks/measurements.py for their shape) and may read the lines of the areas that ran before
it (``earlier``, by area name: the peers take odradek's message sizes and counts from there). A
line ``{"status": "missing" | "failed", "name": ..., "reason": ...}`` reports a part of the area
(a peer) that could not be measured. It raises ``AreaMissing`` when it cannot run on this
checkout or machine; any other exception means it failed. Lines yielded before a failure are
kept.

``script(module)`` makes an area of a script that prints JSON lines (``python -m MODULE
[--quick]``). It runs in its own process, under a time limit; if it stops on a Python package
that is not installed, the area is missing rather than failed. After each line the peak RSS
(VmHWM) of the broker processes the script started, if any, is added to the line
(``peak_rss_mb``) and reset for the next one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from benchmarks.processes import (
    broker_processes,
    descendants,
    peak_rss_mb,
    reset_peak_rss,
    start_time,
)
from benchmarks.servers import REPO_ROOT

RawLine = dict[str, Any]
Earlier = Mapping[str, Sequence[RawLine]]  # the lines of the areas run before, by area name
AreaRun = Callable[[bool, Earlier], Iterable[RawLine]]
STOP_GRACE_S = 20.0
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^'.]+)")


class AreaMissing(Exception):
    """The area cannot run here (its module does not exist yet, a tool is not installed)."""


@dataclass(frozen=True)
class Area:
    name: str
    what: str  # one line for the report
    run: AreaRun


@dataclass(frozen=True)
class AreaResult:
    name: str
    what: str
    status: str  # "ok", "missing" or "failed"
    reason: str
    seconds: float
    lines: Sequence[RawLine]


def run_area(area: Area, quick: bool, earlier: Earlier) -> AreaResult:
    """Run one area to the end, turning what stops it into its status."""
    lines: list[RawLine] = []
    status, reason = "ok", ""
    start = time.monotonic()
    try:
        for line in area.run(quick, earlier):
            lines.append(line)
    except AreaMissing as exc:
        status, reason = "missing", str(exc)
    except Exception as exc:
        status, reason = "failed", f"{type(exc).__name__}: {exc}"
    return AreaResult(area.name, area.what, status, reason, time.monotonic() - start, lines)


@dataclass(frozen=True)
class TimeLimits:
    quick: float = 90.0
    full: float = 600.0


def script(
    module: str,
    limits: TimeLimits = TimeLimits(),
    quick_args: Sequence[str] = ("--quick",),
    args: Sequence[str] = (),
) -> AreaRun:
    """An area running ``python -m MODULE ARGS`` (with ``quick_args`` for a quick run)."""

    def run(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
        if importlib.util.find_spec(module) is None:
            raise AreaMissing(f"{module.replace('.', '/')}.py does not exist in this checkout")
        command = [sys.executable, "-m", module, *args, *(quick_args if quick else ())]
        yield from run_script(command, limits.quick if quick else limits.full)

    return run


def run_script(args: Sequence[str], time_limit: float) -> Generator[RawLine, None, None]:
    """Run a JSON-lines script; yield its lines (with its brokers' peak RSS added); raise
    ``RuntimeError`` with the end of its stderr if it exits non-zero or overruns
    ``time_limit``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            list(args), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=stderr,
        )
        assert proc.stdout is not None
        lines: queue.Queue[bytes | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
        reader.start()
        deadline = time.monotonic() + time_limit
        try:
            while (raw := lines.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
                line = _parse(raw)
                if line is None:
                    continue
                _add_broker_peak_rss(line, proc.pid)
                yield line
        except queue.Empty:
            _stop(proc)
            raise RuntimeError(f"timed out after {time_limit:.0f} s") from None
        finally:
            if proc.poll() is None:  # the consumer of this generator gave up early
                _stop(proc)
        status = proc.wait()
        if status != 0:
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace").strip().splitlines()[-5:]
            if tail and (missing := _MISSING_MODULE.match(tail[-1])):
                raise AreaMissing(f"Python package {missing[1]} is not installed")
            raise RuntimeError(f"exit status {status}: " + " | ".join(tail))


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    for raw in stream:
        lines.put(raw)
    lines.put(None)


def _parse(raw: bytes) -> RawLine | None:
    try:
        line = json.loads(raw)
    except ValueError:
        return None  # a script's progress message, not a measurement
    return line if isinstance(line, dict) else None


def _add_broker_peak_rss(line: RawLine, pid: int) -> None:
    brokers = broker_processes(pid)
    peaks = [p for p in map(peak_rss_mb, brokers) if p is not None]
    if peaks and "peak_rss_mb" not in line:  # a script that stops its brokers measures itself
        line["peak_rss_mb"] = max(peaks)
    for broker in brokers:
        reset_peak_rss(broker)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT first, so the script's own clean-up stops the servers it started; then SIGKILL
    for the script and whatever it left running."""
    below = {pid: start_time(pid) for pid in descendants(proc.pid)}
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for pid, started in below.items():
        if started is not None and start_time(pid) == started:  # the same process, not a reuse
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
