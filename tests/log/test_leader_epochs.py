"""The leader-epoch cache (KIP-101 / KIP-279), its ``leader-epoch-checkpoint`` file, and how
``PartitionLog`` keeps it in step with the log. The cases follow the behaviour Kafka's
LeaderEpochFileCacheTest pins down for Kafka 2.0's cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import (
    UNDEFINED_EPOCH,
    CorruptCheckpointError,
    EpochEntry,
    InvalidMessageError,
    LeaderEpochCache,
    PartitionLog,
)
from broker.log.layout import LEADER_EPOCH_CHECKPOINT
from protocol.compression import Codec
from tests.log.support import crash_copy, message_set, plain, small_config

OpenLog = Callable[..., PartitionLog]
UNDEFINED = (-1, -1)


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)


def _cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    for epoch, start in entries:
        assert cache.assign(epoch, start)
    return cache


def _on_disk(cache: LeaderEpochCache) -> list[EpochEntry]:
    return list(LeaderEpochCache.load(cache.path).entries)


# ------------------------------------------------------------------------------------ assign


def test_an_assigned_epoch_is_the_latest_and_ends_at_the_log_end(cache: LeaderEpochCache) -> None:
    assert cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.entries == (EpochEntry(2, 10),)
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_an_epoch_keeps_its_first_start_offset(cache: LeaderEpochCache) -> None:
    assert cache.assign(2, 6)
    assert not cache.assign(2, 7)
    assert not cache.assign(2, 10)
    assert not cache.assign(2, 5)
    assert cache.entries == (EpochEntry(2, 6),)
    assert cache.end_offset_for(2, 14) == (2, 14)


def test_an_older_epoch_is_ignored(cache: LeaderEpochCache) -> None:
    cache.assign(1, 5)
    cache.assign(2, 6)
    assert not cache.assign(1, 7)
    assert cache.entries == (EpochEntry(1, 5), EpochEntry(2, 6))
    assert cache.latest_epoch == 2


def test_a_newer_epoch_starting_below_the_latest_start_is_ignored(
    cache: LeaderEpochCache,
) -> None:
    cache.assign(2, 6)
    assert not cache.assign(3, 5)
    assert cache.entries == (EpochEntry(2, 6),)


def test_a_newer_epoch_may_start_where_the_latest_started(cache: LeaderEpochCache) -> None:
    """Leaders that wrote nothing: every epoch is kept, the empty one ends where it starts."""
    cache.assign(0, 0)
    assert cache.assign(1, 0)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 0))
    assert cache.end_offset_for(0, 5) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1), (-5, 3)])
def test_negative_epochs_and_offsets_are_refused(
    cache: LeaderEpochCache, epoch: int, start: int
) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        cache.assign(epoch, start)
    assert cache.entries == ()
    assert not cache.path.exists()


def test_epochs_need_not_start_from_zero(cache: LeaderEpochCache) -> None:
    cache.assign(2, 6)
    assert cache.end_offset_for(2, 7) == (2, 7)
    assert cache.entries == (EpochEntry(2, 6),)


def test_epochs_followed_as_leaders_change_many_times(cache: LeaderEpochCache) -> None:
    cache.assign(0, 0)
    cache.assign(1, 0)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)  # five messages in epoch 1
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_epochs_followed_as_a_follower_receives_messages(cache: LeaderEpochCache) -> None:
    for end, epoch in enumerate([0, 0, 0, 1, 1, 1, 2, 2, 2]):
        cache.assign(epoch, end)
        assert cache.latest_epoch == epoch
        assert cache.end_offset_for(epoch, end + 1) == (epoch, end + 1)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 6))
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


# ------------------------------------------------------------------------------ end_offset_for


def test_an_empty_cache_answers_undefined(cache: LeaderEpochCache) -> None:
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.latest_entry is None
    for requested in (-1, 0, 7):
        assert cache.end_offset_for(requested, 73) == UNDEFINED


def test_the_undefined_epoch_is_answered_undefined(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (2, 11), (3, 12))
    assert cache.end_offset_for(UNDEFINED_EPOCH, 20) == UNDEFINED


def test_an_epoch_below_the_first_is_undefined(tmp_path: Path) -> None:
    """KIP-279 as Kafka 2.0 has it: the leader cannot say where that epoch ended."""
    cache = _cache_with(tmp_path, (5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 20) == UNDEFINED
    assert cache.end_offset_for(0, 20) == UNDEFINED


def test_an_epoch_above_the_latest_is_undefined(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (2, 100))
    assert cache.end_offset_for(3, 100) == UNDEFINED


def test_an_earlier_epoch_ends_where_the_next_starts(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (1, 11), (2, 13), (3, 15))
    assert cache.end_offset_for(2, 17) == (2, 15)
    assert cache.end_offset_for(1, 17) == (1, 13)
    assert cache.end_offset_for(3, 17) == (3, 17)


def test_a_missing_epoch_is_answered_for_the_largest_one_below_it(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1, 20) == (0, 13)
    assert cache.end_offset_for(2, 20) == (2, 17)
    assert cache.end_offset_for(3, 20) == (2, 17)
    assert cache.end_offset_for(4, 20) == (4, 20)


# --------------------------------------------------------------------------------- truncation


def test_truncating_from_the_end_on_an_epoch_boundary_drops_it(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_end(8)
    assert cache.entries == (EpochEntry(2, 6),)
    assert _on_disk(cache) == [EpochEntry(2, 6)]


def test_truncating_from_the_end_between_boundaries_keeps_the_epoch_before(
    tmp_path: Path,
) -> None:
    cache = _cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_end(9)
    assert cache.latest_epoch == 3
    assert cache.entries == (EpochEntry(2, 6), EpochEntry(3, 8))


@pytest.mark.parametrize("end", [-1, 12, 100])
def test_truncating_from_the_end_past_the_last_start_changes_nothing(
    tmp_path: Path, end: int
) -> None:
    cache = _cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    before = cache.path.stat().st_mtime_ns, cache.path.read_bytes()
    assert not cache.truncate_from_end(end)
    assert len(cache.entries) == 3
    assert (cache.path.stat().st_mtime_ns, cache.path.read_bytes()) == before


def test_truncating_from_the_end_to_the_first_start_empties_the_cache(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (2, 6), (3, 8))
    assert cache.truncate_from_end(0)
    assert cache.entries == ()
    assert cache.path.read_text() == "0\n0\n"


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (1, [(2, 6), (3, 8), (4, 11)]),  # before the first epoch: nothing to do
        (6, [(2, 6), (3, 8), (4, 11)]),  # on the first start
        (7, [(2, 7), (3, 8), (4, 11)]),  # inside the first epoch
        (8, [(3, 8), (4, 11)]),  # on a boundary: that entry stays as it is
        (9, [(3, 9), (4, 11)]),  # between boundaries: the epoch holding it moves up
        (11, [(4, 11)]),
        (15, [(4, 15)]),  # beyond the last start: the latest epoch stays, moved up
    ],
)
def test_truncating_from_the_start(
    tmp_path: Path, start: int, expected: list[tuple[int, int]]
) -> None:
    cache = _cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    changed = cache.truncate_from_start(start)
    assert changed == (expected != [(2, 6), (3, 8), (4, 11)])
    assert cache.entries == tuple(EpochEntry(*e) for e in expected)
    assert _on_disk(cache) == list(cache.entries)


def test_truncating_from_the_start_inside_the_first_of_three_epochs(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert cache.entries == (EpochEntry(0, 5), EpochEntry(1, 7), EpochEntry(2, 10))


def test_an_empty_cache_truncates_and_clears_quietly(cache: LeaderEpochCache) -> None:
    assert not cache.truncate_from_start(7)
    assert not cache.truncate_from_end(7)
    assert not cache.clear()
    assert not cache.path.exists()


def test_clear_drops_every_entry_on_disk_too(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    assert cache.clear()
    assert cache.entries == ()
    assert _on_disk(cache) == []


# ----------------------------------------------------------------------------------- the file


def test_the_file_is_in_kafkas_format(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (0, 0), (1, 150))
    assert cache.path.read_text("ascii") == "0\n2\n0 0\n1 150\n"


def test_every_change_is_on_disk_and_survives_a_new_instance(tmp_path: Path) -> None:
    cache = _cache_with(tmp_path, (2, 6))
    assert _on_disk(cache) == [EpochEntry(2, 6)]
    cache.assign(3, 9)
    assert _on_disk(cache) == [EpochEntry(2, 6), EpochEntry(3, 9)]
    again = LeaderEpochCache.load(cache.path)
    assert again.entries == cache.entries
    assert again.end_offset_for(2, 20) == (2, 9)


def test_a_missing_file_is_an_empty_cache(tmp_path: Path) -> None:
    assert LeaderEpochCache.load(tmp_path / LEADER_EPOCH_CHECKPOINT).entries == ()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n0\n",  # an unknown version
        "0\n",  # no count
        "0\nx\n",
        "0\n2\n0 0\n",  # fewer entries than counted
        "0\n1\n0 0\n1 5\n",  # more
        "0\n1\n0 0 0\n",  # three fields
        "0\n1\na 0\n",
        "0\n2\n3 5\n2 6\n",  # epochs going down
        "0\n2\n2 6\n3 5\n",  # start offsets going down
        "0\n1\n-1 5\n",
    ],
)
def test_a_damaged_file_is_refused_with_its_name(tmp_path: Path, text: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=LEADER_EPOCH_CHECKPOINT):
        LeaderEpochCache.load(path)


# -------------------------------------------------------------------- against a simple model


def _model_end_offset(
    entries: list[tuple[int, int]], requested: int, log_end: int
) -> tuple[int, int]:
    if requested < 0 or not entries or requested > entries[-1][0]:
        return UNDEFINED
    if requested == entries[-1][0]:
        return requested, log_end
    below = [i for i, (epoch, _start) in enumerate(entries) if epoch <= requested]
    if not below:
        return UNDEFINED
    return entries[below[-1]][0], entries[below[-1] + 1][1]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(-1, 60), st.just(0)),
        st.tuples(st.just("start"), st.integers(0, 60), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_the_cache_agrees_with_a_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]]
) -> None:
    path = tmp_path_factory.mktemp("epochs") / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    model: list[tuple[int, int]] = []
    for op, a, b in ops:
        if op == "assign":
            fits = not model or (a > model[-1][0] and b >= model[-1][1])
            assert cache.assign(a, b) == fits
            if fits:
                model.append((a, b))
        elif op == "end":
            kept = [e for e in model if not (a >= 0 and e[1] >= a)]
            assert cache.truncate_from_end(a) == (kept != model)
            model = kept
        else:
            below = [e for e in model if e[1] <= a]
            if below:
                model = [(below[-1][0], a)] + [e for e in model if e[1] > a]
            cache.truncate_from_start(a)
        assert cache.entries == tuple(EpochEntry(*e) for e in model)
        log_end = max([60, *(s for _e, s in model)])
        for requested in range(-1, 14):
            assert cache.end_offset_for(requested, log_end) == _model_end_offset(
                model, requested, log_end
            )
    if path.exists():
        assert list(LeaderEpochCache.load(path).entries) == list(cache.entries)


# ------------------------------------------------------------------------- in a PartitionLog


def test_a_leader_append_records_a_new_epoch_at_its_first_offset(open_log: OpenLog) -> None:
    log = open_log()
    log.append(plain(b"k", b"v"))  # no epoch given: nothing recorded
    assert log.leader_epochs.entries == ()
    log.append(message_set([(b"a", b"1", 0), (b"b", b"2", 0)], Codec.GZIP), leader_epoch=3)
    log.append(plain(b"k", b"v"), leader_epoch=3)
    log.append(message_set([(b"c", b"3", 0), (b"d", b"4", 0)], Codec.LZ4), leader_epoch=5)
    log.append(plain(b"k", b"v"), leader_epoch=4)  # stale: ignored, the append is not
    assert log.leader_epochs.entries == (EpochEntry(3, 1), EpochEntry(5, 4))
    assert log.log_end_offset == 7
    assert (log.directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n3 1\n5 4\n"
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(5) == (5, 7)
    assert log.end_offset_for_epoch(2) == UNDEFINED


def test_a_refused_append_records_no_epoch(open_log: OpenLog) -> None:
    log = open_log()
    with pytest.raises(InvalidMessageError):
        log.append(b"\x00" * 30, leader_epoch=1)
    assert log.leader_epochs.entries == ()


def test_a_new_leader_records_its_epoch_at_the_log_end(open_log: OpenLog) -> None:
    log = open_log()
    log.append(message_set([(b"a", b"1", 0), (b"b", b"2", 0)]), leader_epoch=0)
    assert log.assign_leader_epoch(1)
    assert not log.assign_leader_epoch(1)
    assert log.leader_epochs.entries == (EpochEntry(0, 0), EpochEntry(1, 2))
    log.append(plain(b"k", b"v"), leader_epoch=1)
    assert log.end_offset_for_epoch(0) == (0, 2)
    assert log.end_offset_for_epoch(1) == (1, 3)


def test_the_cache_survives_a_clean_reopen(open_log: OpenLog) -> None:
    log = open_log()
    log.append(plain(b"k", b"v"), leader_epoch=1)
    log.append(plain(b"k", b"v"), leader_epoch=2)
    log.close()
    assert open_log().leader_epochs.entries == (EpochEntry(1, 0), EpochEntry(2, 1))


def test_epochs_of_a_tail_lost_in_a_crash_are_dropped_at_open(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(segment_bytes=1 << 20)
    log.append(plain(b"a", b"1"), leader_epoch=1)
    size = log.size_bytes()
    log.append(plain(b"b", b"2"), leader_epoch=2)
    copy = crash_copy(log.directory, tmp_path / "crash" / "t-0")
    with open(copy / f"{0:020d}.log", "r+b") as f:
        f.truncate(size + 5)  # the second entry never fully reached the disk
    reopened = open_log(copy)
    assert reopened.log_end_offset == 1
    assert reopened.leader_epochs.entries == (EpochEntry(1, 0),)
    assert (copy / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n1 0\n"


def test_a_damaged_checkpoint_stops_the_log_from_opening(open_log: OpenLog) -> None:
    log = open_log()
    log.append(plain(b"a", b"1"), leader_epoch=1)
    log.close()
    (log.directory / LEADER_EPOCH_CHECKPOINT).write_text("0\n5\n1 0\n")
    with pytest.raises(CorruptCheckpointError, match="expected 5 entries"):
        PartitionLog.open(log.directory, small_config())


def test_retention_moves_the_first_epoch_up_to_the_new_log_start(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=200, retention_bytes=300)  # two entries a segment
    for i in range(12):
        log.append(plain(b"k%d" % i, b"v" * 40, 0), leader_epoch=0 if i < 5 else 1 if i < 9 else 2)
    assert log.leader_epochs.entries == (EpochEntry(0, 0), EpochEntry(1, 5), EpochEntry(2, 9))
    assert log.enforce_retention() == 4
    assert log.log_start_offset == 8
    assert log.leader_epochs.entries == (EpochEntry(1, 8), EpochEntry(2, 9))
    assert log.end_offset_for_epoch(0) == UNDEFINED
    assert log.end_offset_for_epoch(1) == (1, 9)


def test_truncation_drops_the_epochs_that_start_at_or_after_the_new_end(
    open_log: OpenLog,
) -> None:
    log = open_log()
    for epoch, start in ((0, 0), (1, 3), (2, 5)):
        log.assign_leader_epoch(epoch)
        assert log.log_end_offset == start
        log.append(message_set([(b"k", b"v", 0)] * (3 if epoch == 0 else 2)), leader_epoch=epoch)
    log.truncate_to(6)
    assert log.leader_epochs.entries == (EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 5))
    log.truncate_to(5)
    assert log.leader_epochs.entries == (EpochEntry(0, 0), EpochEntry(1, 3))
    log.truncate_to(1)
    assert log.leader_epochs.entries == (EpochEntry(0, 0),)
    log.truncate_fully_and_start_at(40)
    assert log.leader_epochs.entries == ()
    assert (log.directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n0\n"


def test_the_cache_goes_with_a_deleted_log(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    log.append(plain(b"a", b"1"), leader_epoch=1)
    log.delete()
    assert not (tmp_path / "t-0").exists()
    assert open_log().leader_epochs.entries == ()
