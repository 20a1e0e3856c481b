"""The files of a partition directory: their names and the small state files beside segments.

    <topic>-<partition>/
        00000000000000000000.log        entries, exactly as produced and fetched
        00000000000000000000.index      sparse offset index
        00000000000000000000.timeindex  sparse time index
        recovery-point                  offset below which everything is known to be on disk
        cleaner-checkpoint              offset below which the log is compacted
        clean-shutdown                  present only while the log is closed cleanly
        compaction-swap                 present only while compacted segments replace old ones
        leader-epoch-checkpoint         the leader epochs and the offsets each one started at
        v0-absolute-offsets             the segments hold magic 0 wrappers with absolute inner
                                        offsets only (see broker/log/v0_wrappers.py)

    <data_dir>/replication-offset-checkpoint   every replicated partition's high watermark

Segment files are named by their base offset, 20 digits, so that names sort as offsets do.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from broker.log.errors import CorruptCheckpointError

LOG = ".log"
INDEX = ".index"
TIME_INDEX = ".timeindex"
SEGMENT_SUFFIXES = (LOG, INDEX, TIME_INDEX)
CLEANED = ".cleaned"  # a compacted segment being written
TMP = ".tmp"

RECOVERY_POINT = "recovery-point"
CLEANER_CHECKPOINT = "cleaner-checkpoint"
CLEAN_SHUTDOWN = "clean-shutdown"
SWAP_MANIFEST = "compaction-swap"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Kafka's log-start-offset-checkpoint, per partition: a log start moved by DeleteRecords above
# the first segment's base offset.
LOG_START_OFFSET = "log-start-offset"
# Present once the partition's compressed magic 0 wrappers carry absolute inner offsets.
V0_ABSOLUTE_OFFSETS = "v0-absolute-offsets"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # in the data directory
CHECKPOINT_VERSION = 0

_SEGMENT_NAME = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex)$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def segment_path(directory: Path, base_offset: int, suffix: str, extra: str = "") -> Path:
    return directory / f"{base_offset:020d}{suffix}{extra}"


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """``(base_offset, suffix)`` for a segment file name, else None."""
    m = _SEGMENT_NAME.match(name)
    return (int(m.group(1)), m.group(2)) if m else None


def partition_dir_name(topic: str, partition: int) -> str:
    if not topic or "/" in topic or "\0" in topic or topic in (".", ".."):
        raise ValueError(f"topic name {topic!r} cannot name a directory")
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for a partition directory name, else None."""
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def fsync_dir(directory: Path) -> None:
    """Make created, renamed and deleted names in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, durable: bool, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new content, not a mix;
    ``durable``: on disk, name included, before returning. Every small state file of the broker
    is written here (checkpoints, topic and ACL documents, the credentials with ``mode`` 0o600,
    readable by their owner only)."""
    tmp = path.with_name(path.name + TMP)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:  # a write may take less than it was given
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def read_offset_file(path: Path) -> int | None:
    """The offset stored in a state file; None when missing or unreadable (callers then fall
    back to the safe choice, e.g. recovering from the start)."""
    try:
        text = path.read_text("ascii").strip()
        value = int(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return value if value >= 0 else None


def write_offset_file(path: Path, offset: int, *, durable: bool = False) -> None:
    write_atomically(path, f"{offset}\n".encode("ascii"), durable=durable)


def read_swap_manifest(path: Path) -> tuple[list[int], list[int]] | None:
    """``(old_bases, new_bases)`` of an interrupted segment swap; None when there is none or
    it was never completely written (then the swap never started)."""
    try:
        doc = json.loads(path.read_text("utf-8"))
        old = [int(b) for b in doc["old"]]
        new = [int(b) for b in doc["new"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return old, new


def write_swap_manifest(path: Path, old_bases: list[int], new_bases: list[int]) -> None:
    write_atomically(path, json.dumps({"old": old_bases, "new": new_bases}).encode(), durable=True)


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of a checkpoint file in Kafka's format, each split into its ``fields``
    space-separated fields; None when the file does not exist. The format: a version line
    (0), a line with the number of entries, then one entry a line. Anything else raises
    ``CorruptCheckpointError`` naming the file and the line."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"{path}: cannot be read: {exc}") from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != str(CHECKPOINT_VERSION):
        found = repr(lines[0]) if lines else "an empty file"
        raise CorruptCheckpointError(
            f"{path}: line 1 must be the version {CHECKPOINT_VERSION}, found {found}"
        )
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError(f"{path}: line 2 must be the number of entries") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if count != len(entries) or any(len(entry) != fields for entry in entries):
        raise CorruptCheckpointError(
            f"{path}: expected {count} entries of {fields} fields after line 2, found "
            f"{[' '.join(entry) for entry in entries]}"
        )
    return entries


def write_checkpoint(path: Path, entries: list[tuple[object, ...]]) -> None:
    """Replace ``path`` durably with ``entries`` in Kafka's checkpoint format (see
    ``read_checkpoint``). A field must not be empty or hold whitespace."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    for entry in entries:
        fields = [str(field) for field in entry]
        if any(not field or len(field.split()) != 1 for field in fields):
            raise ValueError(f"checkpoint fields must be non-empty words: {fields}")
        lines.append(" ".join(fields))
    write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"), durable=True)
