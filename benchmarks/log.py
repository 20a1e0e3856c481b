"""Log storage throughput next to raw file I/O: ``python -m benchmarks.log [--quick]``.

Prints one JSON line per case, each with the raw figure of the same bytes measured in the same
run and the ratio between them:

- ``log.append``: ``PartitionLog.append`` of 1 MiB message sets (validation, offset assignment,
  index upkeep, rolling) against sequential ``os.write`` of the same bytes to one file; with
  flushing off, and with ``flush_messages=10000`` against ``os.write`` plus ``fsync`` at the same
  message counts. Only the writes are timed on both sides: not opening the log or the file, nor
  the flush that closing the log makes and the raw file does not.
- ``log.append_as_follower``: a replica's appends of the same sets as the leader stored them
  (offsets kept: checked, not assigned), flushing off, against the same ``os.write``.
- ``log.read``: ``PartitionLog.read(...).bytes()`` in 1 MiB chunks over the whole log against
  ``os.read`` of the raw file in 1 MiB chunks; ``log.sendfile``: ``os.sendfile`` of each
  ``ReadResult`` to /dev/null against ``os.sendfile`` of the raw file. A read of the whole log
  takes milliseconds, so the log and the raw file take turns for ``READ_ROUNDS`` rounds. Each
  read starts at a set's first offset, where an append began: what a reader asks for next
  when its last fetch ended in that set's first entry, or when it had caught up with the log
  end; the segment remembers those positions. ``log.read_mid_set`` and
  ``log.sendfile_mid_set`` start each read one offset later, at the second entry, which the
  offset index and a scan of the entry headers must find; their ``ratio`` is of throughputs
  (their reads span one entry less in all).

An append must check every message's CRC, so beside ``ratio`` (raw write seconds / append
seconds) the append lines carry ``ratio_with_crc``: (raw write seconds + the seconds of one
``zlib.crc32`` pass over each whole set, the best of the passes measured beside each case) /
append seconds -- the honest limit of a validating append, which also costs one CRC call per
message where the pass costs one per set.

``--startup MIB`` measures instead how long ``PartitionLog.open`` takes over a log of MIB MiB
(128 MiB segments, 100-byte and 1 KiB values), which checks every entry of every segment and
rebuilds the indexes (docs/storage.md, "Recovery and damage"): ``log.open`` after a clean
shutdown and after a crash (no clean-shutdown marker), against ``os.read`` of the same files in
1 MiB chunks (``raw_read_mb_per_s``).

Rates are in units of 10**6 bytes per second (message-set bytes) and messages per second; each
case reports the best of several rounds. Files live in a temporary directory (``--dir``) on the
same file system for the log and the raw file; reads are served from the page cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from benchmarks.codec import sample_records
from broker.log import LogConfig, PartitionLog, layout
from broker.log.validation import prepare_append
from protocol.messageset import encode_message_set

SET_BYTES = 1 << 20
FLUSH_MESSAGES = 10_000
READ_ROUNDS = 20  # a read of the whole log takes milliseconds: many rounds, taken in turn


def message_sets(value_bytes: int, count: int) -> tuple[list[bytes], int]:
    """``count`` message sets of about 1 MiB, and how many messages each holds."""
    per_set = max(1, SET_BYTES // (value_bytes + 34))
    records = sample_records(per_set, value_bytes)
    data = encode_message_set(records)
    return [data] * count, per_set


def best_seconds(run: Callable[[Path], float], root: Path, rounds: int) -> float:
    """The fewest seconds ``run`` reports in ``rounds`` runs, each in a fresh directory."""
    best = float("inf")
    for i in range(rounds):
        directory = root / f"round{i}"
        directory.mkdir()
        best = min(best, run(directory))
        shutil.rmtree(directory)
    return best


def raw_write(
    sets: list[bytes], per_set: int, flush_messages: int | None
) -> Callable[[Path], float]:
    def run(directory: Path) -> float:
        fd = os.open(directory / "raw", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            start = time.perf_counter()
            pending = 0
            for data in sets:
                view = memoryview(data)
                written = 0
                while written < len(data):
                    written += os.write(fd, view[written:])
                pending += per_set
                if flush_messages is not None and pending >= flush_messages:
                    os.fsync(fd)
                    pending = 0
            return time.perf_counter() - start
        finally:
            os.close(fd)

    return run


def crc_pass(sets: list[bytes], rounds: int) -> float:
    """The fewest seconds of one ``zlib.crc32`` call over each whole set."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for data in sets:
            zlib.crc32(data)
        best = min(best, time.perf_counter() - start)
    return best


def log_append(sets: list[bytes], config: LogConfig) -> Callable[[Path], float]:
    def run(directory: Path) -> float:
        log = PartitionLog.open(directory / "t-0", config)
        try:
            start = time.perf_counter()
            for data in sets:
                log.append(data)
            return time.perf_counter() - start
        finally:
            log.close()

    return run


def follower_append(sets: list[bytes], config: LogConfig) -> Callable[[Path], float]:
    def run(directory: Path) -> float:
        log = PartitionLog.open(directory / "t-0", config)
        try:
            start = time.perf_counter()
            for data in sets:
                log.append_as_follower(data)
            return time.perf_counter() - start
        finally:
            log.close()

    return run


def as_stored(sets: list[bytes]) -> list[bytes]:
    """The sets with the offsets a leader gave them, as a replica fetches them."""
    stored, next_offset = [], 0
    for data in sets:
        prepared = prepare_append(data, next_offset=next_offset)
        stored.append(bytes(prepared.data))
        next_offset = prepared.last_offset + 1
    return stored


def append_cases(value_bytes: int, total_mib: int, rounds: int, root: Path) -> list[dict[str, Any]]:
    sets, per_set = message_sets(value_bytes, total_mib)
    total = sum(map(len, sets))
    messages = per_set * len(sets)
    cases: list[tuple[str, int | None, float, float]] = []
    crc_samples = []  # the CRC pass measured beside every case: the machine's speed drifts
    for flush in (None, FLUSH_MESSAGES):
        config = LogConfig(flush_messages=flush, retention_ms=None)
        log_s = best_seconds(log_append(sets, config), root, rounds)
        raw_s = best_seconds(raw_write(sets, per_set, flush), root, rounds)
        crc_samples.append(crc_pass(sets, rounds))
        cases.append(("log.append", flush, log_s, raw_s))
    config = LogConfig(retention_ms=None)
    log_s = best_seconds(follower_append(as_stored(sets), config), root, rounds)
    raw_s = best_seconds(raw_write(sets, per_set, None), root, rounds)
    crc_samples.append(crc_pass(sets, rounds))
    cases.append(("log.append_as_follower", None, log_s, raw_s))
    crc_s = min(crc_samples)
    return [
        {
            "bench": bench,
            "value_bytes": value_bytes,
            "set_bytes": len(sets[0]),
            "flush_messages": flush,
            "total_mb": round(total / 1e6, 1),
            "mb_per_s": round(total / log_s / 1e6, 1),
            "messages_per_s": round(messages / log_s),
            "raw_write_mb_per_s": round(total / raw_s / 1e6, 1),
            "crc_mb_per_s": round(total / crc_s / 1e6, 1),
            "ratio": round(raw_s / log_s, 3),
            "ratio_with_crc": round((raw_s + crc_s) / log_s, 3),
        }
        for bench, flush, log_s, raw_s in cases
    ]


def read_cases(value_bytes: int, total_mib: int, rounds: int, root: Path) -> list[dict[str, Any]]:
    sets, per_set = message_sets(value_bytes, total_mib)
    directory = root / "read"
    config = LogConfig(retention_ms=None, segment_bytes=256 << 20)
    log = PartitionLog.open(directory / "t-0", config)
    for data in sets:
        log.append(data)
    # Written set by set as the log was: one write of the whole file lays out its page cache
    # differently (larger folios), and reading it back is then about 10% faster.
    raw = directory / "raw"
    raw_write(sets, per_set, None)(directory)
    total = raw.stat().st_size
    messages = per_set * len(sets)
    devnull = os.open(os.devnull, os.O_WRONLY)
    end_offset = log.log_end_offset

    def read_log(send: bool, shift: int) -> None:
        offset = 0
        while offset < end_offset:
            result = log.read(offset + shift, SET_BYTES)
            if send:
                os.sendfile(devnull, result.fileno(), result.position, result.length)
            else:
                result.bytes()
            offset += per_set  # the next set starts there (whole sets of SET_BYTES or less)

    def log_bytes(shift: int) -> int:
        return sum(log.read(o + shift, SET_BYTES).length for o in range(0, end_offset, per_set))

    def read_raw(send: bool) -> None:
        fd = os.open(raw, os.O_RDONLY)
        try:
            position = 0
            while position < total:
                if send:
                    position += os.sendfile(devnull, fd, position, SET_BYTES)
                else:
                    position += len(os.read(fd, SET_BYTES))
        finally:
            os.close(fd)

    lines = []
    try:
        for shift, suffix in ((0, ""), (1, "_mid_set")):
            read_bytes = log_bytes(shift)
            for send, name in ((False, "log.read"), (True, "log.sendfile")):
                log_s, raw_s = _best_in_turn(
                    partial(read_log, send, shift), partial(read_raw, send), READ_ROUNDS
                )
                lines.append(
                    {
                        "bench": name + suffix,
                        "value_bytes": value_bytes,
                        "chunk_bytes": SET_BYTES,
                        "total_mb": round(read_bytes / 1e6, 1),
                        "mb_per_s": round(read_bytes / log_s / 1e6, 1),
                        "messages_per_s": round(messages / log_s),
                        "raw_mb_per_s": round(total / raw_s / 1e6, 1),
                        "ratio": round((read_bytes / log_s) / (total / raw_s), 3),
                    }
                )
    finally:
        os.close(devnull)
        log.close()
        shutil.rmtree(directory)
    return lines


def open_cases(value_bytes: int, total_mib: int, rounds: int, root: Path) -> list[dict[str, Any]]:
    sets, per_set = message_sets(value_bytes, total_mib)
    directory = root / "open" / "t-0"
    config = LogConfig(segment_bytes=128 << 20, retention_ms=None)
    log = PartitionLog.open(directory, config)
    for data in sets:
        log.append(data)
    log.close()
    files = sorted(directory.glob("*.log"))
    total = sum(f.stat().st_size for f in files)

    def read_raw() -> float:
        started = time.perf_counter()
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                while os.read(fd, SET_BYTES):
                    pass
            finally:
                os.close(fd)
        return time.perf_counter() - started

    def open_log(clean: bool) -> float:
        if not clean:
            (directory / layout.CLEAN_SHUTDOWN).unlink(missing_ok=True)
        started = time.perf_counter()
        opened = PartitionLog.open(directory, config)
        seconds = time.perf_counter() - started
        opened.close()
        return seconds

    raw_s = min(read_raw() for _ in range(rounds))
    lines = []
    for clean in (True, False):
        open_s = min(open_log(clean) for _ in range(rounds))
        lines.append({
            "bench": "log.open",
            "value_bytes": value_bytes,
            "shutdown": "clean" if clean else "crash",
            "total_mb": round(total / 1e6, 1),
            "messages": per_set * len(sets),
            "seconds": round(open_s, 3),
            "mb_per_s": round(total / open_s / 1e6, 1),
            "raw_read_mb_per_s": round(total / raw_s / 1e6, 1),
            "ratio": round(raw_s / open_s, 3),
        })
    shutil.rmtree(directory.parent)
    return lines


def _best_in_turn(a: Callable[[], None], b: Callable[[], None], rounds: int) -> tuple[float, float]:
    """The fewest seconds of ``a`` and of ``b``, run in turn (a b a b ...) so that a drift in
    the machine's speed touches both."""
    a()  # warm the page cache
    b()
    best_a = best_b = float("inf")
    for _ in range(rounds):
        for op, is_a in ((a, True), (b, False)):
            start = time.perf_counter()
            op()
            elapsed = time.perf_counter() - start
            if is_a:
                best_a = min(best_a, elapsed)
            else:
                best_b = min(best_b, elapsed)
    return best_a, best_b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.log", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small volumes, one size")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files")
    parser.add_argument("--startup", type=int, metavar="MIB", default=None,
                        help="measure opening a log of MIB MiB instead")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings only
    total_mib, rounds = (16, 2) if args.quick else (128, 3)
    sizes = [1024] if args.quick else [100, 1024, 10_240]
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-log-", dir=args.dir))
    try:
        if args.startup is not None:
            for size in (100, 1024):
                for line in open_cases(size, args.startup, 1 if args.quick else 3, root):
                    print(json.dumps(line), flush=True)
            return 0
        for size in sizes:
            for line in append_cases(size, total_mib, rounds, root) + read_cases(
                size, total_mib, rounds, root
            ):
                print(json.dumps(line), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
