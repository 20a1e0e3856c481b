"""Recovery after an unclean stop (seed 000 "Guarantees"): a lost tail and a garbage tail."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import PartitionLog
from broker.log.layout import CLEAN_SHUTDOWN, SWAP_MANIFEST, write_swap_manifest
from protocol.compression import Codec
from tests.log.support import crash_copy, message_set, plain, read_all, triples

OpenLog = Callable[..., PartitionLog]


def _segment(log_dir: Path, base: int, suffix: str = ".log") -> Path:
    return log_dir / f"{base:020d}{suffix}"


def _build(open_log: OpenLog) -> tuple[PartitionLog, list[tuple[int, int, int]]]:
    """A log whose active segment ends in a plain entry, a gzip wrapper of three messages and
    a plain entry. Returns (first offset, last offset, end position) of every entry."""
    log = open_log(segment_bytes=1 << 20)
    sets = [plain(b"k%d" % i, b"v" * (i % 7)) for i in range(20)] + [
        plain(b"p", b"plain"),
        message_set([(b"a", b"1", 0), (b"b", b"2", 0), (b"c", b"3", 0)], Codec.GZIP),
        plain(b"q", b"last"),
    ]
    entries = []
    for data in sets:
        result = log.append(data)
        entries.append((result.first_offset, result.last_offset, log.size_bytes()))
    return log, entries


def test_a_lost_tail_is_cut_at_every_byte_position(open_log: OpenLog, tmp_path: Path) -> None:
    log, entries = _build(open_log)
    expected_all = triples(read_all(log))
    for cut in range(entries[-4][2] - 5, entries[-1][2] + 1):
        copy = crash_copy(log.directory, tmp_path / f"cut{cut}" / "t-0")
        with open(_segment(copy, 0), "r+b") as f:
            f.truncate(cut)
        reopened = PartitionLog.open(copy, log.config)
        expected_end = max(last for _first, last, end in entries if end <= cut) + 1
        assert reopened.log_end_offset == expected_end, cut
        assert _segment(copy, 0).stat().st_size == max(e for *_, e in entries if e <= cut)
        assert triples(read_all(reopened)) == expected_all[:expected_end], cut
        assert reopened.append(plain(b"new", b"x")).first_offset == expected_end
        assert triples(read_all(reopened))[-1] == (expected_end, b"new", b"x")
        reopened.close()


@pytest.mark.parametrize("seed", range(8))
def test_a_garbage_tail_is_cut_off(open_log: OpenLog, tmp_path: Path, seed: int) -> None:
    log, ends = _build(open_log)
    expected = triples(read_all(log))
    rng = random.Random(seed)
    garbage = (
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        if seed % 4
        else bytes(rng.randrange(1, 5000))  # an inode grown over unwritten, zeroed blocks
    )
    copy = crash_copy(log.directory, tmp_path / "copy" / "t-0")
    with open(_segment(copy, 0), "ab") as f:
        f.write(garbage)
    reopened = PartitionLog.open(copy, log.config)
    assert reopened.log_end_offset == ends[-1][1] + 1
    assert _segment(copy, 0).stat().st_size == ends[-1][2]
    assert triples(read_all(reopened)) == expected
    assert reopened.append(plain(b"n", b"x")).first_offset == ends[-1][1] + 1
    reopened.close()


def test_a_plausible_entry_with_a_bad_crc_is_cut_off(open_log: OpenLog, tmp_path: Path) -> None:
    log, ends = _build(open_log)
    copy = crash_copy(log.directory, tmp_path / "copy" / "t-0")
    data = bytearray(_segment(copy, 0).read_bytes())
    data[ends[-2][2] - 1] ^= 0x55  # the last byte of the wrapper's compressed payload
    _segment(copy, 0).write_bytes(bytes(data))
    reopened = PartitionLog.open(copy, log.config)
    assert reopened.log_end_offset == ends[-3][1] + 1
    reopened.close()


def test_damage_in_a_middle_segment_drops_what_follows(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=1024)
    for i in range(60):
        log.append(plain(b"k%d" % i, b"v" * 30))
    bases = log.segment_base_offsets
    assert len(bases) >= 3
    copy = crash_copy(log.directory, tmp_path / "copy" / "t-0")
    (copy / "recovery-point").unlink()  # recover everything
    with open(_segment(copy, bases[1]), "r+b") as f:
        f.truncate(100)
    reopened = PartitionLog.open(copy, log.config)
    assert reopened.segment_base_offsets == bases[:2]
    assert reopened.log_end_offset == bases[1] + 1
    assert not _segment(copy, bases[2]).exists()
    reopened.close()


def test_segments_below_the_recovery_point_are_checked_too(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(segment_bytes=1024)
    for i in range(60):
        log.append(plain(b"k%d" % i, b"v" * 30))
    log.flush()
    bases = log.segment_base_offsets
    copy = crash_copy(log.directory, tmp_path / "copy" / "t-0")
    data = bytearray(_segment(copy, bases[0]).read_bytes())
    data[-1] ^= 1  # rot in a flushed segment: its last entry fails its CRC
    _segment(copy, bases[0]).write_bytes(bytes(data))
    reopened = PartitionLog.open(copy, log.config)
    assert reopened.log_end_offset == bases[1] - 1
    assert reopened.segment_base_offsets == (0,)
    assert reopened.recovery_loss is not None
    assert reopened.recovery_loss.first_offset == bases[1] - 1
    assert reopened.recovery_loss.old_end == 60
    reopened.close()


def test_a_clean_shutdown_leaves_a_marker_that_open_removes(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log()
    log.append(plain(b"k", b"v"))
    log.close()
    assert (log.directory / CLEAN_SHUTDOWN).exists()
    again = open_log()
    assert not (log.directory / CLEAN_SHUTDOWN).exists()
    assert again.log_end_offset == 1


@pytest.mark.parametrize("damage", ["missing", "garbage", "half-entry", "stale", "beyond-log"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_missing_or_damaged_index_is_rebuilt(
    open_log: OpenLog, tmp_path: Path, damage: str, suffix: str
) -> None:
    log = open_log(index_interval_bytes=64)
    for i in range(50):
        log.append(plain(b"k%d" % i, b"v" * 20, 1000 + i))
    log.close()
    path = _segment(log.directory, 0, suffix)
    original = path.read_bytes()
    assert len(original) > 24
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(original)))
    elif damage == "half-entry":
        path.write_bytes(original[:-3])
    elif damage == "stale":  # entries swapped: still sized right
        entry = 8 if suffix == ".index" else 12
        path.write_bytes(original[entry : 2 * entry] + original[:entry] + original[2 * entry :])
    else:
        path.write_bytes(original[:-8] + b"\x00\x10\x00\x00\x00\x10\x00\x00")
    again = open_log(index_interval_bytes=64)
    if suffix == ".index":
        assert path.read_bytes() == original
    else:  # less the entry close() adds for the active segment's largest timestamp
        assert path.read_bytes() == original[:-12]
    assert [m.offset for m in read_all(again)] == list(range(50))
    assert again.offset_for_timestamp(1020) == (20, 1020)
    for offset in range(50):
        assert again.read(offset, 100).bytes()[:8] == offset.to_bytes(8, "big")


def test_an_interrupted_compaction_swap_is_completed(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(cleanup_policy="compact", segment_bytes=512, min_cleanable_dirty_ratio=0.0)
    for i in range(40):
        log.append(plain(b"k%d" % (i % 4), b"%d" % i))
    log.close()
    reference = tmp_path / "reference" / "t-0"
    crash_copy(log.directory, reference)
    # Compact a copy fully, then fake a crash right after its manifest was written.
    compacted_dir = crash_copy(log.directory, tmp_path / "compacted" / "t-0")
    compacted = PartitionLog.open(compacted_dir, log.config)
    closed_bases = compacted.segment_base_offsets[:-1]
    assert compacted.compact()
    new_bases = compacted.segment_base_offsets[:-1]
    expected = triples(read_all(compacted))
    compacted.close()
    crashed = crash_copy(reference, tmp_path / "crashed" / "t-0")
    for base in new_bases:
        for suffix in (".log", ".index", ".timeindex"):
            os.replace(
                compacted_dir / f"{base:020d}{suffix}", crashed / f"{base:020d}{suffix}.cleaned"
            )
    write_swap_manifest(crashed / SWAP_MANIFEST, list(closed_bases), list(new_bases))
    reopened = PartitionLog.open(crashed, log.config)
    assert triples(read_all(reopened)) == expected
    assert not list(crashed.glob("*.cleaned")) and not (crashed / SWAP_MANIFEST).exists()
    reopened.close()


def test_cleaned_files_without_a_manifest_are_discarded(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    log.append(plain(b"k", b"v"))
    expected = triples(read_all(log))
    log.close()
    (log.directory / f"{0:020d}.log.cleaned").write_bytes(b"half written")
    again = open_log()
    assert triples(read_all(again)) == expected
    assert not list(log.directory.glob("*.cleaned"))
