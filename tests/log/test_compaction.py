from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import PartitionLog, compaction
from protocol.compression import Codec
from protocol.messageset import decode_messages
from tests.log.support import FakeClock, crash_copy, message_set, plain, read_all, triples

OpenLog = Callable[..., PartitionLog]
DAY_MS = 24 * 3600 * 1000


def compacted_log(open_log: OpenLog, **changes: object) -> PartitionLog:
    settings: dict[str, object] = {
        "cleanup_policy": "compact",
        "segment_bytes": 600,
        "min_cleanable_dirty_ratio": 0.0,
        "delete_retention_ms": DAY_MS,
    }
    settings.update(changes)
    return open_log(**settings)


def newest_per_key(
    appended: list[tuple[int, bytes, bytes | None]], below: int
) -> list[tuple[int, bytes, bytes | None]]:
    """What compaction keeps of the messages below ``below``, and everything from it on."""
    latest: dict[bytes, int] = {}
    for offset, key, _value in appended:
        if offset < below:
            latest[key] = offset
    return [(o, k, v) for o, k, v in appended if o >= below or latest[k] == o]


def test_keeps_the_newest_message_per_key_at_its_offset(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    appended = []
    for i in range(60):
        key, value = b"k%d" % (i % 5), b"value-%d" % i
        appended.append((log.append(plain(key, value, clock.ms)).first_offset, key, value))
    active = log.active_segment_base_offset
    assert active > 0
    assert log.compact()
    assert triples(read_all(log)) == newest_per_key(appended, active)
    assert log.log_end_offset == 60
    assert log.append(plain(b"k0", b"after", clock.ms)).first_offset == 60


def test_tombstones_are_kept_for_delete_retention_ms_then_removed(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    for i in range(10):
        log.append(plain(b"gone", b"v%d" % i, clock.ms))
        log.append(plain(b"kept", b"v%d" % i, clock.ms))
    tombstone = log.append(plain(b"gone", None, clock.ms)).first_offset
    log.roll()
    assert log.compact()
    assert [(m.key, m.value) for m in read_all(log)] == [(b"kept", b"v9"), (b"gone", None)]
    log.append(plain(b"other", b"x", clock.ms))  # new dirty data for the next pass
    log.roll()
    clock.advance(DAY_MS / 1000 + 1)
    assert log.compact()
    remaining = read_all(log)
    assert (tombstone, b"gone", None) not in triples(remaining)
    assert [(m.key, m.value) for m in remaining] == [(b"kept", b"v9"), (b"other", b"x")]


def test_the_dirty_ratio_decides_whether_to_run(open_log: OpenLog, clock: FakeClock) -> None:
    log = compacted_log(open_log, min_cleanable_dirty_ratio=0.5)
    assert not log.compact()  # no closed segment
    for i in range(40):
        log.append(plain(b"k%d" % (i % 3), b"v" * 20, clock.ms))
    log.roll()
    assert log.compact()  # all dirty
    assert not log.compact()  # nothing new
    log.append(plain(b"k1", b"new", clock.ms))
    log.roll()
    assert not log.compact()  # one small dirty segment: below half
    for _ in range(3):
        for i in range(20):
            log.append(plain(b"k%d" % (i % 3), b"v" * 20, clock.ms))
        log.roll()
    assert log.compact()


def test_a_delete_policy_log_is_never_compacted(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=600)
    for _ in range(40):
        log.append(plain(b"k", b"v" * 20))
    assert not log.compact()
    assert len(read_all(log)) == 40


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4], ids=str)
def test_wrappers_keep_their_codec_and_offsets(
    open_log: OpenLog, clock: FakeClock, codec: Codec
) -> None:
    log = compacted_log(open_log)
    appended = []
    for batch in range(8):
        records = [(b"k%d" % ((batch + i) % 4), b"v%d.%d" % (batch, i), clock.ms) for i in range(3)]
        first = log.append(message_set(records, codec)).first_offset
        appended += [(first + i, k, v) for i, (k, v, _t) in enumerate(records)]
    log.roll()
    untouched = log.read(log.log_start_offset, 1 << 20).bytes()
    assert log.compact()
    assert triples(read_all(log)) == newest_per_key(appended, log.log_end_offset)
    stored = log.read(log.log_start_offset, 1 << 20).bytes()
    assert len(stored) < len(untouched)
    assert stored[12 + 5] & 0x07 == codec  # first entry: still a wrapper of this codec


def test_a_read_answered_before_the_swap_sees_the_old_segments(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    for i in range(40):
        log.append(plain(b"k%d" % (i % 2), b"v%d" % i, clock.ms))
    log.roll()
    result = log.read(0, 1 << 20)
    before = decode_messages(result.bytes())[0]
    assert log.compact()
    assert decode_messages(result.bytes())[0] == before
    assert [m.offset for m in read_all(log)] == [38, 39]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_compacted_log_reopens(
    open_log: OpenLog, clock: FakeClock, tmp_path: Path, clean: bool
) -> None:
    log = compacted_log(open_log)
    for i in range(60):
        log.append(plain(b"k%d" % (i % 7), b"v%d" % i, clock.ms))
    assert log.compact()
    expected = triples(read_all(log))
    if clean:
        log.close()
        again = open_log(config=log.config)
    else:
        again = PartitionLog.open(crash_copy(log.directory, tmp_path / "c" / "t-0"), log.config)
    assert triples(read_all(again)) == expected
    assert not again.compact()  # the cleaner checkpoint survived
    assert again.append(plain(b"k1", b"x", clock.ms)).first_offset == 60
    again.close()


def test_compaction_in_a_thread_while_appending(open_log: OpenLog, clock: FakeClock) -> None:
    """The server may run compaction in a worker thread; appends and reads carry on."""
    log = compacted_log(open_log, segment_bytes=2048)
    values: dict[int, tuple[bytes, bytes]] = {}
    for i in range(300):
        key, value = b"k%d" % (i % 10), b"v%d" % i
        values[log.append(plain(key, value, clock.ms)).first_offset] = (key, value)
    done = threading.Event()
    ran: list[bool] = []

    def run() -> None:
        try:
            ran.append(log.compact())
        finally:
            done.set()

    worker = threading.Thread(target=run)
    worker.start()
    i = 300
    while not done.is_set() or i < 400:
        key, value = b"k%d" % (i % 10), b"v%d" % i
        values[log.append(plain(key, value, clock.ms)).first_offset] = (key, value)
        read_all(log)
        i += 1
    worker.join(timeout=60)
    assert not worker.is_alive() and ran == [True]
    remaining = read_all(log)
    assert all((m.key, m.value) == values[m.offset] for m in remaining)
    newest = {key: offset for offset, (key, _v) in sorted(values.items())}
    assert set(newest.values()) <= {m.offset for m in remaining}
    assert len(remaining) < len(values)


# ---------------------------------------------------------------------------------------------
# A bounded key map (cleaner_dedupe_buffer_bytes): several passes, same result


def _fill(log: PartitionLog, clock: FakeClock, start: int, count: int) -> None:
    """``count`` messages over 150 keys, every seventh a tombstone, every fifth a gzip set."""
    i = start
    while i < start + count:
        if i % 5 == 0:
            records: list[tuple[bytes | None, bytes | None, int]] = [
                (b"key-%03d" % ((i + j) * 37 % 150), b"v%d" % (i + j), clock.ms) for j in range(4)
            ]
            log.append(message_set(records, Codec.GZIP))
            i += 4
        else:
            value = None if i % 7 == 0 else b"value-%d" % i
            log.append(plain(b"key-%03d" % (i * 37 % 150), value, clock.ms))
            i += 1


@pytest.mark.parametrize("expired", [False, True], ids=["tombstones-kept", "tombstones-expired"])
def test_a_bounded_key_map_compacts_in_passes_like_an_unbounded_one(
    open_log: OpenLog,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    expired: bool,
) -> None:
    bound = 20 * compaction.map_entry_bytes(b"key-000")  # 20 of the 150 keys per pass
    bounded = compacted_log(open_log, directory=tmp_path / "b-0", cleaner_dedupe_buffer_bytes=bound)
    unbounded = compacted_log(open_log, directory=tmp_path / "u-0")
    maps: list[compaction.OffsetMap] = []
    real = compaction.offset_map

    def recording(*args: object, **kwargs: object) -> compaction.OffsetMap:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        maps.append(result)
        return result

    monkeypatch.setattr(compaction, "offset_map", recording)
    now = clock() + (2 * DAY_MS / 1000 if expired else 0)
    for start, count in ((0, 400), (400, 300)):  # a second round over a compacted log
        for log in (bounded, unbounded):
            _fill(log, clock, start, count)
            log.roll()
        maps.clear()
        assert bounded.compact(now)
        passes = list(maps)
        maps.clear()
        assert unbounded.compact(now)
        assert len(maps) == 1 and not maps[0].full
        assert len(maps[0].latest) > 100  # the unbounded map held them all at once
        assert len(passes) >= 5
        assert all(m.full for m in passes[:-1]) and not passes[-1].full
        assert all(len(m.latest) <= 20 and m.size_bytes <= bound for m in passes)
        assert [m.end for m in passes] == sorted(m.end for m in passes)  # each from the last
        assert triples(read_all(bounded)) == triples(read_all(unbounded))
    survivors = triples(read_all(bounded))
    keys = [k for _o, k, _v in survivors]
    assert len(keys) == len(set(keys)) == (150 if not expired else len(keys))
    assert any(v is None for _o, _k, v in survivors) != expired
    assert bounded.append(plain(b"key-000", b"after", clock.ms)).first_offset == 700


def test_offset_map_takes_at_least_one_key_and_stops_at_the_bound(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    for i in range(10):
        log.append(plain(b"k%d" % (i % 4), b"v", clock.ms))
    log.roll()
    closed = log._live().closed
    tiny = compaction.offset_map(closed, 0, 1)  # smaller than any key: still one per pass
    assert tiny.full and tiny.latest == {b"k0": 0} and tiny.end == 0
    two = compaction.offset_map(closed, 0, 2 * compaction.map_entry_bytes(b"k0"))
    assert two.full and two.latest == {b"k0": 0, b"k1": 1} and two.end == 1
    rest = compaction.offset_map(closed, 6, None)
    assert not rest.full and rest.latest == {b"k2": 6, b"k3": 7, b"k0": 8, b"k1": 9}
    assert rest.end == 9


def test_a_bounded_pass_survives_a_restart_at_its_mid_segment_checkpoint(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(
        open_log, cleaner_dedupe_buffer_bytes=3 * compaction.map_entry_bytes(b"k00")
    )
    appended: list[tuple[int, bytes, bytes | None]] = []
    for i in range(80):
        key, value = b"k%02d" % (i * 7 % 12), b"v%d" % i
        appended.append((log.append(plain(key, value, clock.ms)).first_offset, key, value))
    log.roll()
    assert log.compact()
    expected = newest_per_key(appended, 80)
    assert triples(read_all(log)) == expected
    log.close()
    reopened = compacted_log(open_log, cleaner_dedupe_buffer_bytes=1 << 20)
    assert triples(read_all(reopened)) == expected
    assert not reopened.compact()  # nothing dirty is left
