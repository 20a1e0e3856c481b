"""Helpers shared by the log tests: a settable clock, message sets and whole-log reads."""

from __future__ import annotations

import shutil
from pathlib import Path

from broker.log import LogConfig, PartitionLog
from broker.log.layout import CLEAN_SHUTDOWN
from protocol import record_batch
from protocol.compression import Codec
from protocol.messageset import Message, decode_messages, encode_message_set
from protocol.record_batch import BatchHeader, decode_batches


class FakeClock:
    """Wall-clock seconds that only move when a test moves them."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @property
    def ms(self) -> int:
        return int(self.now * 1000)


def message_set(
    records: list[tuple[bytes | None, bytes | None, int]], codec: Codec = Codec.NONE
) -> bytes:
    return encode_message_set(records, codec=codec)


def plain(key: bytes | None, value: bytes | None, timestamp: int = 0) -> bytes:
    return encode_message_set([(key, value, timestamp)])


def read_all(log: PartitionLog, start: int | None = None, chunk: int = 1 << 16) -> list[Message]:
    """Every message from ``start`` (default: log start) to the log end, the way a consumer
    reads: fetch, decode the whole messages, continue after the last one."""
    offset = log.log_start_offset if start is None else start
    out: list[Message] = []
    while offset < log.log_end_offset:
        data = log.read(offset, chunk).bytes()
        if not data:
            break  # compacted away up to the end
        messages, whole = decode_messages(data)
        assert whole > 0, f"chunk of {chunk} bytes holds no whole entry at offset {offset}"
        fresh = [m for m in messages if m.offset >= offset]
        out.extend(fresh)
        offset = messages[-1].offset + 1
    return out


def triples(messages: list[Message]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(m.offset, m.key, m.value) for m in messages]


def crash_copy(log_dir: Path, target: Path) -> Path:
    """A copy of a log directory as a crash would leave it: no clean-shutdown marker."""
    shutil.copytree(log_dir, target)
    (target / CLEAN_SHUTDOWN).unlink(missing_ok=True)
    return target


def small_config(**changes: object) -> LogConfig:
    base = {"segment_bytes": 4096, "index_interval_bytes": 256, "retention_ms": None}
    base.update(changes)
    return LogConfig(**base)  # type: ignore[arg-type]


# --- every magic: v0/v1 entries and record batches (magic 2) -------------------------------

Headers = tuple[tuple[str, bytes | None], ...]
Row = tuple[int, bytes | None, bytes | None, Headers]  # offset, key, value, headers


def stored(data: bytes) -> list[tuple[bytes, list[Row]]]:
    """The whole entries of ``data``, each with its rows; an empty batch has none."""
    out: list[tuple[bytes, list[Row]]] = []
    pos = 0
    while pos + 17 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + size > len(data):
            break
        entry = data[pos : pos + size]
        if entry[16] == record_batch.MAGIC:
            (b,) = decode_batches(entry)
            rows = [(r.offset, r.key, r.value, r.headers) for r in b.records]
        else:
            messages, _ = decode_messages(entry)
            rows = [(m.offset, m.key, m.value, ()) for m in messages]
        out.append((entry, rows))
        pos += size
    return out


def last_offset(entry: bytes, rows: list[Row]) -> int:
    if entry[16] == record_batch.MAGIC:
        return header(entry).last_offset
    return rows[-1][0]


def header(entry: bytes) -> BatchHeader:
    h = record_batch.read_batch_header(entry)
    assert h is not None
    return h


def read_rows(log: PartitionLog, start: int | None = None, chunk: int = 1 << 16) -> list[Row]:
    """Every record from ``start`` to the log end, as a consumer reads: fetch, take the whole
    entries, continue after the last one's last offset (an empty batch's included)."""
    offset = log.log_start_offset if start is None else start
    rows: list[Row] = []
    while offset < log.log_end_offset:
        data = log.read(offset, chunk).bytes()
        if not data:
            break  # compacted away up to the end
        entries = stored(data)
        assert entries, f"no whole entry in {chunk} bytes at {offset}"
        rows += [row for _, found in entries for row in found if row[0] >= offset]
        offset = last_offset(*entries[-1]) + 1
    return rows
