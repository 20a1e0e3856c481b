"""Damage in closed segments and their indexes is found when a log opens, after a clean
shutdown as after a crash: the log is cut at the first bad entry (later segments deleted, the
leader-epoch cache cut with it) and what went is reported; damaged indexes are rebuilt."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import LogManager, PartitionLog, layout
from broker.log.layout import CLEAN_SHUTDOWN
from tests.log.support import plain, read_all, small_config, triples

pytestmark = pytest.mark.timeout(60)

OpenLog = Callable[..., PartitionLog]
MESSAGES = 200


def _segment(log_dir: Path, base: int, suffix: str = ".log") -> Path:
    return log_dir / f"{base:020d}{suffix}"


def _entries(path: Path) -> list[tuple[int, int, int]]:
    """(position, offset, size) of every entry of a sound ``.log`` file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        out.append((pos, offset, 12 + size))
        pos += 12 + size
    return out


def _build(open_log: OpenLog) -> PartitionLog:
    """A log of several closed segments, with leader epochs starting through it."""
    log = open_log(segment_bytes=2048, index_interval_bytes=128)
    for i in range(MESSAGES):
        log.append(plain(b"k%d" % i, b"v%03d" % i * 8, 1000 + i), leader_epoch=i // 40)
    assert len(log.segment_base_offsets) >= 5
    return log


def _stop(log: PartitionLog, clean: bool) -> None:
    log.close()
    if not clean:
        (log.directory / CLEAN_SHUTDOWN).unlink()


def _damage(path: Path, entry: tuple[int, int, int], kind: str) -> None:
    position, _offset, size = entry
    data = bytearray(path.read_bytes())
    if kind == "value":  # a flipped byte in the value, which the CRC covers
        data[position + size - 3] ^= 0x20
    elif kind == "crc":
        data[position + 12] ^= 0xFF
    elif kind == "size-large":  # the entry claims more bytes than it has
        struct.pack_into(">i", data, position + 8, size + 40)
    elif kind == "size-small":
        struct.pack_into(">i", data, position + 8, 7)
    elif kind == "garbage":  # a run of random bytes over the entry and the next
        data[position : position + 2 * size] = random.Random(7).randbytes(2 * size)
    else:
        raise AssertionError(kind)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("kind", ["value", "crc", "size-large", "size-small", "garbage"])
def test_a_damaged_closed_segment_cuts_the_log_at_the_bad_entry(
    open_log: OpenLog, kind: str, clean: bool
) -> None:
    log = _build(open_log)
    before = triples(read_all(log))
    bases = log.segment_base_offsets
    epochs_before = log.leader_epochs.entries
    directory = log.directory
    _stop(log, clean)
    damaged = _segment(directory, bases[2])
    entries = _entries(damaged)
    bad = entries[len(entries) // 2]
    _damage(damaged, bad, kind)

    reopened = PartitionLog.open(directory, log.config)
    first_lost = bad[1]
    assert reopened.log_end_offset == first_lost
    assert reopened.segment_base_offsets == bases[:3]
    for later in bases[3:]:
        for suffix in layout.SEGMENT_SUFFIXES:
            assert not _segment(directory, later, suffix).exists()
    assert damaged.stat().st_size == bad[0]
    assert triples(read_all(reopened)) == before[:first_lost]
    loss = reopened.recovery_loss
    assert loss is not None
    assert (loss.first_offset, loss.old_end, loss.segments_deleted) == (
        first_lost, MESSAGES, len(bases) - 3)
    # the leader-epoch cache keeps only epochs that start below the new end
    assert list(reopened.leader_epochs.entries) == [
        e for e in epochs_before if e.start_offset < first_lost]
    # a follower fetches the dropped part again: entries as the leader stored them
    fetched = open_log(directory.parent / "leader", segment_bytes=2048, index_interval_bytes=128)
    for i in range(MESSAGES):
        fetched.append(plain(b"k%d" % i, b"v%03d" % i * 8, 1000 + i))
    rest = fetched.read(first_lost, 1 << 20).bytes()
    while rest:
        reopened.append_as_follower(rest, leader_epoch=MESSAGES // 40 - 1)
        rest = fetched.read(reopened.log_end_offset, 1 << 20).bytes()
    assert triples(read_all(reopened)) == before
    reopened.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_the_last_entry_of_a_closed_segment_damaged_drops_the_segments_after_it(
    open_log: OpenLog, clean: bool
) -> None:
    log = _build(open_log)
    bases = log.segment_base_offsets
    directory = log.directory
    _stop(log, clean)
    damaged = _segment(directory, bases[1])
    _damage(damaged, _entries(damaged)[-1], "value")
    reopened = PartitionLog.open(directory, log.config)
    assert reopened.log_end_offset == bases[2] - 1
    assert reopened.segment_base_offsets == bases[:2]
    reopened.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize(
    "damage", ["cut-mid-entry", "cut-to-half", "emptied", "garbage", "zeroed", "missing"]
)
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_damaged_index_of_a_closed_segment_is_rebuilt(
    open_log: OpenLog, damage: str, suffix: str, clean: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _build(open_log)
    before = triples(read_all(log))
    bases = log.segment_base_offsets
    directory = log.directory
    _stop(log, clean)
    path = _segment(directory, bases[1], suffix)
    original = path.read_bytes()
    entry = 8 if suffix == ".index" else 12
    assert len(original) >= 4 * entry
    if damage == "cut-mid-entry":
        path.write_bytes(original[: 2 * entry + 3])
    elif damage == "cut-to-half":
        path.write_bytes(original[: len(original) // entry // 2 * entry])
    elif damage == "emptied":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(original)))
    elif damage == "zeroed":  # sized right, sorted wrong
        path.write_bytes(original[:entry] + bytes(len(original) - 2 * entry) + original[-entry:])
    else:
        path.unlink()

    capsys.readouterr()
    reopened = PartitionLog.open(directory, log.config)
    reported = [line for line in capsys.readouterr().out.splitlines()
                if "log.segment.index_rebuilt" in line]
    assert len(reported) == 1 and path.name in reported[0], reported
    assert reopened.recovery_loss is None
    assert reopened.log_end_offset == MESSAGES
    assert path.read_bytes() == original
    assert triples(read_all(reopened)) == before
    for offset in range(bases[1], bases[2]):
        assert reopened.read(offset, 100).bytes()[:8] == offset.to_bytes(8, "big")
    assert reopened.offset_for_timestamp(1000 + bases[1] + 3) == (
        bases[1] + 3, 1000 + bases[1] + 3)
    reopened.close()


def test_the_manager_reports_a_replica_that_lost_entries_below_its_high_watermark(
    tmp_path: Path,
) -> None:
    config = small_config(segment_bytes=2048, index_interval_bytes=128)
    manager = LogManager(tmp_path / "data", config, replicated=True)
    plog = manager.get_or_create("t", 0)
    for i in range(MESSAGES):
        plog.append(plain(b"k%d" % i, b"v%03d" % i * 8, 1000 + i))
    plog.high_watermark = 150
    bases = plog.segment_base_offsets
    manager.get_or_create("t", 1).append(plain(b"k", b"sound"))
    manager.close()
    damaged = _segment(tmp_path / "data" / "t-0", bases[1])
    bad = _entries(damaged)[3]
    _damage(damaged, bad, "crc")

    again = LogManager(tmp_path / "data", config, replicated=True)
    assert set(again.damaged) == {("t", 0)}
    loss, high_watermark = again.damaged[("t", 0)]
    assert (loss.first_offset, loss.old_end, high_watermark) == (bad[1], MESSAGES, 150)
    reopened = again.get("t", 0)
    assert reopened is not None
    assert reopened.log_end_offset == reopened.high_watermark == bad[1]
    again.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_sound_indexes_are_rebuilt_the_same_and_not_reported(
    open_log: OpenLog, clean: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _build(open_log)
    directory = log.directory
    _stop(log, clean)
    indexes = sorted(directory.glob("*index"))
    before = {path: path.read_bytes() for path in indexes}
    capsys.readouterr()
    reopened = PartitionLog.open(directory, log.config)
    out = capsys.readouterr().out
    assert "index_rebuilt" not in out and "recovery" not in out, out
    assert reopened.recovery_loss is None
    active = reopened.active_segment_base_offset
    for path, data in before.items():
        if f"{active:020d}.timeindex" == path.name:
            data = data[:-12]  # less the entry close() added for the largest timestamp
        assert path.read_bytes() == data, path.name
    reopened.close()
