"""The produce path against Kafka's message-format rules: Kafka's own sets are accepted and stored
as Kafka's readers read them (magic 0 inner offsets absolute), malformed ones are refused as
Kafka refuses them, and segments written before magic 0 inner offsets were absolute are
converted once when the log opens."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import lz4.frame
import pytest

from broker.log import PartitionLog, compaction, layout
from broker.log.errors import (
    InvalidMessageError,
    LogError,
    ProducerTimestampTypeError,
)
from broker.log.validation import prepare_append
from protocol.compression import Codec, compress
from protocol.errors import ErrorCode
from protocol.messageset import encode_message_set, read_entries
from tests.kafka_format import GZIP, LZ4, SNAPPY, fixtures, lz4_stored, message, read_set, xerial
from tests.log.support import read_all, triples

OpenLog = Callable[..., PartitionLog]
PAYLOAD = {GZIP: lambda b: gzip.compress(b, mtime=0), SNAPPY: xerial, LZ4: lz4_stored}


def stored(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 24).bytes()


def test_kafkas_sets_are_accepted_and_stored_as_kafka_reads_them(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1 << 20, max_message_bytes=1 << 20)
    log.append(encode_message_set([(None, b"before", 1)] * 3))
    expected: list[tuple[int, bytes | None, bytes | None]] = [
        (i, None, b"before") for i in range(3)
    ]
    for fixture in fixtures():
        result = log.append(fixture.data)
        last = len(expected) + len(fixture.messages) - 1
        assert (result.first_offset, result.last_offset) == (len(expected), last)
        expected += [(len(expected) + i, k, v) for i, (_, k, v) in enumerate(fixture.messages)]
    read = read_set(stored(log))  # Kafka's rules: v0 inner offsets absolute, as stored
    assert [(m.offset, m.key, m.value) for m in read] == expected
    assert triples(read_all(log, chunk=1 << 20)) == expected
    assert [m.magic for m in read] == [1] * 3 + [0] * 9 + [1] * 6


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_magic_0_inner_offsets_are_rewritten_and_recompressed(codec: int) -> None:
    """Whatever a producer numbered them, inner offsets become the assigned absolute ones."""
    inner = b"".join(message(o, b"k", b"v%d" % i, magic=0) for i, o in enumerate((50, 3, 9)))
    wrapper = message(-1, None, PAYLOAD[codec](inner), magic=0, attributes=codec)
    prepared = prepare_append(wrapper, next_offset=1_000)
    assert (prepared.first_offset, prepared.last_offset) == (1_000, 1_002)
    data = bytes(prepared.data)
    assert [(m.offset, m.value) for m in read_set(data)] == [
        (1_000 + i, b"v%d" % i) for i in range(3)
    ]
    assert list(prepared.entries.offsets) == [1_002]
    assert list(prepared.entries.sizes) == [len(data)]
    (entry,), _ = read_entries(data)
    assert (entry.magic, entry.codec) == (0, Codec(codec))


def test_a_producers_offset_fields_are_ignored() -> None:
    data = (
        message(999, None, b"a")
        + message(-5, None, b"b", magic=0)
        + message(77, None, xerial(message(0, None, b"c") + message(1, None, b"d")), attributes=2)
    )
    prepared = prepare_append(data, next_offset=10)
    assert [m.offset for m in read_set(bytes(prepared.data))] == [10, 11, 12, 13]


def refused(data: bytes, **kwargs: object) -> LogError:
    with pytest.raises(LogError) as info:
        prepare_append(data, next_offset=0, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_magic_1_inner_offsets_must_be_0_to_n_minus_1() -> None:
    for numbers in ((5, 6, 7), (0, 2, 3), (1, 0, 2)):
        inner = b"".join(message(o, None, b"v") for o in numbers)
        error = refused(message(2, None, xerial(inner), attributes=SNAPPY))
        assert isinstance(error, InvalidMessageError)
        assert error.code is ErrorCode.CORRUPT_MESSAGE
        assert "inner offsets of a magic 1 compressed wrapper must be 0..2" in str(error)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "the message set is empty"),
        (message(0, None, b"whole") + message(1, None, b"cut")[:-3], "incomplete entry"),
        (message(0, None, b"x")[:10], "incomplete entry"),
    ],
    ids=["empty", "partial-last-entry", "shorter-than-a-header"],
)
def test_an_empty_or_partial_set_is_a_corrupt_message(data: bytes, reason: str) -> None:
    error = refused(data)
    assert error.code is ErrorCode.CORRUPT_MESSAGE and reason in str(error)


def test_a_compressed_wrapper_with_a_key_is_refused() -> None:
    inner = message(0, None, b"v")
    error = refused(message(0, b"key", gzip.compress(inner), attributes=GZIP))
    assert error.code is ErrorCode.CORRUPT_MESSAGE
    assert "compressed outer message should not have key" in str(error)


def test_an_lz4_frame_of_linked_blocks_is_refused() -> None:
    """Kafka's reader: "Dependent block stream is unsupported"."""
    inner = b"".join(message(i, None, b"x" * 30_000) for i in range(3))
    error = refused(message(2, None, lz4.frame.compress(inner), attributes=LZ4))
    assert error.code is ErrorCode.CORRUPT_MESSAGE
    assert "lz4 frame with linked blocks (FLG 0x48)" in str(error)


def test_inner_messages_of_another_magic_are_refused() -> None:
    error = refused(message(0, None, gzip.compress(message(0, None, b"v")), magic=0, attributes=1))
    assert "compressed message magic 1 does not equal wrapper magic 0" in str(error)


@pytest.mark.parametrize(
    "topic_time", [None, 1_800_000_000_000], ids=["CreateTime", "LogAppendTime"]
)
@pytest.mark.parametrize("where", ["plain", "wrapper", "inner"])
def test_a_producer_setting_log_append_time_is_refused(where: str, topic_time: int | None) -> None:
    lat = 0x08
    if where == "plain":
        data = message(0, None, b"ok") + message(0, None, b"v", attributes=lat)
    elif where == "wrapper":
        data = message(0, None, gzip.compress(message(0, None, b"v")), attributes=GZIP | lat)
    else:
        data = message(0, None, gzip.compress(message(0, None, b"v", attributes=lat)),
                       attributes=GZIP)
    error = refused(data, log_append_time=topic_time)
    assert isinstance(error, ProducerTimestampTypeError)
    assert error.code is ErrorCode.INVALID_TIMESTAMP
    assert "must not set the timestamp type LogAppendTime" in str(error)


def test_magic_0_is_accepted_and_stored_as_magic_0(open_log: OpenLog) -> None:
    log = open_log()
    log.append(encode_message_set([(b"k", b"plain", 0)], magic=0))
    log.append(encode_message_set([(b"k", b"lz4", 0)] * 2, codec=Codec.LZ4, magic=0))
    read = read_set(stored(log))
    assert [(m.offset, m.magic, m.value) for m in read] == [
        (0, 0, b"plain"), (1, 0, b"lz4"), (2, 0, b"lz4")
    ]


# ---------------------------------------------------------------------- segments written before


def legacy_segment(directory: Path) -> tuple[bytes, bytes]:
    """A segment as the broker wrote it before: a magic 0 gzip wrapper stored with the inner
    offsets its producer gave (0..2) and the absolute offset of its last message (5), between
    plain messages 0..2 and 6; and the v0 set already absolute (7..8) that needs nothing."""
    legacy_inner = b"".join(message(i, b"k%d" % i, b"old %d" % i, magic=0) for i in range(3))
    legacy = message(5, None, gzip.compress(legacy_inner, mtime=0), magic=0, attributes=GZIP)
    absolute = message(8, None, gzip.compress(
        message(7, None, b"abs 7", magic=0) + message(8, None, b"abs 8", magic=0), mtime=0
    ), magic=0, attributes=GZIP)
    head = b"".join(message(i, None, b"plain %d" % i, timestamp=i) for i in range(3))
    data = head + legacy + message(6, None, b"plain 6", timestamp=6) + absolute
    (directory / layout.segment_path(directory, 0, layout.LOG).name).write_bytes(data)
    return data, absolute


EXPECTED = (
    [(i, None, b"plain %d" % i) for i in range(3)]
    + [(3 + i, b"k%d" % i, b"old %d" % i) for i in range(3)]
    + [(6, None, b"plain 6"), (7, None, b"abs 7"), (8, None, b"abs 8")]
)


@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
def test_a_segment_written_before_is_converted_once_on_open(
    open_log: OpenLog, tmp_path: Path, shutdown: str
) -> None:
    directory = tmp_path / "t-0"
    open_log(directory).close()
    assert (directory / layout.V0_ABSOLUTE_OFFSETS).exists()  # a new log starts converted
    (directory / layout.V0_ABSOLUTE_OFFSETS).unlink()  # as a directory written before
    if shutdown == "unclean":
        (directory / layout.CLEAN_SHUTDOWN).unlink()
    old, absolute = legacy_segment(directory)

    log = open_log(directory)
    assert (directory / layout.V0_ABSOLUTE_OFFSETS).exists()
    data = stored(log)
    assert data != old and data.endswith(absolute)  # the absolute set is kept byte for byte
    assert [(m.offset, m.key, m.value) for m in read_set(data)] == EXPECTED
    assert triples(read_all(log)) == EXPECTED
    assert triples(read_all(log, start=6)) == EXPECTED[6:]  # the rebuilt index finds it
    assert log.log_end_offset == 9
    log.append(encode_message_set([(None, b"new", 0)]))
    log.close()

    reopened = open_log(directory)  # the marker is there: nothing is looked at again
    assert triples(read_all(reopened)) == [*EXPECTED, (9, None, b"new")]


def test_the_marker_means_no_conversion(open_log: OpenLog, tmp_path: Path) -> None:
    """With the marker, a set is read as stored: what Kafka would read."""
    directory = tmp_path / "t-0"
    open_log(directory).close()
    old, _ = legacy_segment(directory)
    for suffix in (layout.INDEX, layout.TIME_INDEX):
        layout.segment_path(directory, 0, suffix).unlink()
    log = open_log(directory)
    assert stored(log) == old


def test_compaction_keeps_magic_0_inner_offsets_absolute() -> None:
    inner = b"".join(
        message(o, k, b"v%d" % o, magic=0) for o, k in ((10, b"a"), (11, b"b"), (12, b"a"))
    )
    raw = message(12, None, gzip.compress(inner), magic=0, attributes=GZIP)
    (entry,), _ = read_entries(raw)
    kept = compaction._retained(entry, raw, {b"a": 12, b"b": 11}, drop_tombstones=False)
    assert kept is not None
    assert [(m.offset, m.key) for m in read_set(kept)] == [(11, b"b"), (12, b"a")]


def test_a_magic_0_lz4_set_is_stored_with_kafka_0_9s_header(open_log: OpenLog) -> None:
    log = open_log()
    inner = message(0, None, b"v", magic=0)
    log.append(message(0, None, lz4_stored(inner), magic=0, attributes=LZ4))
    (entry,), _ = read_entries(stored(log))
    assert (entry.value or b"")[:7] == b"\x04\x22\x4d\x18\x60\x40\x1a"
    assert compress(Codec.LZ4, b"v", magic=0)[:7] == b"\x04\x22\x4d\x18\x60\x40\x1a"


def test_a_follower_copies_a_magic_0_set_with_its_offsets(
    open_log: OpenLog, tmp_path: Path
) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    leader.append(encode_message_set([(None, b"first", 0)]))
    leader.append(encode_message_set([(b"k", b"v0", 0)] * 3, codec=Codec.SNAPPY, magic=0))
    follower = open_log(tmp_path / "follower" / "t-0")
    data = stored(leader)
    result = follower.append_as_follower(data)
    assert (result.first_offset, result.last_offset) == (0, 3)
    assert stored(follower) == data
    assert [m.offset for m in read_set(stored(follower))] == [0, 1, 2, 3]
