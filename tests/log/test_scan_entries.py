"""The log's scan against the codec's general reader (protocol.messageset.read_entries): same
entries, same columns, the same first problem, whatever the bytes -- including runs of
same-shaped entries, which the scan checks column-wise."""

from __future__ import annotations

import struct
import zlib
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protocol import record_batch
from protocol.entry_scan import Scan, scan_entries
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import LOG_OVERHEAD, encode_records, read_entries
from tests.log.message_sets import damaged, message_sets


def reason(exc: MessageFormatError) -> str:
    """The error's message without the " (offset N at byte position P)" the codec adds; the
    scan reads the magic byte unsigned."""
    text = str(exc).rsplit(" (", 1)[0]
    if text.startswith("unknown magic -"):
        text = f"unknown magic {int(text.rsplit(' ', 1)[1]) + 256}"
    return text


class _Row(NamedTuple):
    position: int
    offset: int  # a batch's: its last offset
    size: int
    magic: int
    attributes: int
    timestamp: int
    key_length: int
    first_offset: int  # what must follow ``after_offset``: a batch's base offset


def _first_batch(data: bytes, start: int) -> int | None:
    """Where the first entry with magic 2 starts, walking entries by their sizes from
    ``start`` (None: none is reached)."""
    pos = start
    while pos + 17 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if size < 14:
            return None
        if data[pos + 16] == 2:
            return pos
        pos += LOG_OVERHEAD + size
    return None


def reference_scan(data: bytes, verify_crc: bool, after_offset: int | None) -> tuple[Any, ...]:
    """What ``scan_entries`` must find, spelled out with the codecs' readers: the v0/v1
    reader, and where it meets magic 2, the record-batch reader."""
    error: str | None = None
    bad_crc = False
    rows: list[_Row] = []
    start = 0
    while True:
        cut = _first_batch(data, start)
        try:
            entries, end = read_entries(data[start:cut], verify_crc=verify_crc,
                                        base_position=start)
            end += start
        except MessageFormatError as exc:
            entries, end = read_entries(data[start : exc.position], verify_crc=verify_crc,
                                        base_position=start)
            end += start
            error, bad_crc = reason(exc), isinstance(exc, CorruptMessageError)
        rows += [_Row(e.position, e.offset, LOG_OVERHEAD + e.size, e.magic, e.attributes & 0xFF,
                      e.timestamp, -1 if e.key is None else len(e.key), e.offset)
                 for e in entries]
        if error is not None or cut is None or end != cut:
            break
        try:
            header = record_batch.check_batch(data, end, verify_crc=verify_crc)
        except MessageFormatError as exc:
            error, bad_crc = exc.reason, isinstance(exc, CorruptMessageError)
            break
        if header is None:  # not whole: the scan stops there without an error
            break
        rows.append(_Row(end, header.last_offset, header.size, 2, header.attributes,
                         header.max_timestamp, -1, header.base_offset))
        start = end + header.size
    if after_offset is not None:
        last = after_offset
        for i, row in enumerate(rows):
            if row.first_offset <= last:
                error = f"offset {row.first_offset} does not follow offset {last}"
                bad_crc = False
                end = row.position
                rows = rows[:i]
                break
            last = row.offset
    return (
        [r.position for r in rows],
        [r.offset for r in rows],
        [r.size for r in rows],
        [r.magic for r in rows],
        [r.attributes for r in rows],
        [r.timestamp for r in rows],
        [r.key_length for r in rows],
        end,
        error,
        bad_crc,
    )


def columns(scan: Scan) -> tuple[Any, ...]:
    return (*map(list, scan[:7]), *scan[7:])


def at_least(examples: int) -> int:
    """``examples``, or more if the loaded profile asks for more (HYPOTHESIS_PROFILE=deep): a
    plain ``max_examples`` here would override the profile's."""
    return max(examples, settings().max_examples)


# Found by hypothesis: four v1 entries (offset 0, null key and value), the second with a byte
# 0x04 inserted after its magic: attributes 4 (no such codec) and key length 0x00ffffff. The
# codec's reader checks the lengths before the codec: the key length is the error.
INSERTED_BYTE_UNKNOWN_CODEC = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x16\xcc/y\xd9\x01\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x16\xcc/y\xd9\x01\x04\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x16\xcc/y\xd9\x01\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x16\xcc/y\xd9\x01\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
)


@settings(max_examples=at_least(1500))
@given(
    data=damaged(message_sets),
    verify_crc=st.booleans(),
    after_offset=st.sampled_from([None, None, -1, 0, 5]),
)
@example(data=INSERTED_BYTE_UNKNOWN_CODEC, verify_crc=False, after_offset=None)
def test_scan_agrees_with_the_general_reader(
    data: bytes, verify_crc: bool, after_offset: int | None
) -> None:
    expected = reference_scan(data, verify_crc, after_offset)
    assert columns(scan_entries(data, verify_crc=verify_crc, after_offset=after_offset)) == expected


@settings(max_examples=at_least(100))
@given(data=damaged(message_sets), prefix=st.binary(max_size=40))
def test_scan_from_a_start_position_and_of_a_memoryview(data: bytes, prefix: bytes) -> None:
    whole = prefix + data
    scanned = scan_entries(memoryview(whole), start=len(prefix))
    expected = reference_scan(data, True, None)
    positions = [p - len(prefix) for p in scanned.positions]
    assert (positions, *columns(scanned)[1:7], scanned.end - len(prefix)) == (
        *expected[:7],
        expected[7],
    )
    assert (scanned.error, scanned.bad_crc) == expected[8:]


def test_a_long_run_with_damage_deep_inside_stops_at_the_damaged_entry() -> None:
    """Past the first chunks of a run: the 300th of 400 same-shaped entries is damaged."""
    data = bytearray(encode_records([(None, b"v" * 50, i) for i in range(400)]))
    whole = len(data) // 400
    data[299 * whole + 40] ^= 0x01
    scan = scan_entries(bytes(data))
    assert (len(scan.positions), scan.end, scan.bad_crc) == (299, 299 * whole, True)
    assert scan.sizes == [whole] * 299 and scan.offsets == list(range(299))


def entry_with_body(body: bytes, offset: int = 3) -> bytes:
    """An entry around an arbitrary body with a correct CRC: only format checks can catch it."""
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


MALFORMED_V1 = [
    pytest.param(struct.pack(">bbqii", 1, 0, 0, -1, -1) + b"abc", id="null-value-then-bytes"),
    pytest.param(struct.pack(">bbqii", 1, 0, 0, -1, 1) + b"abc", id="bytes-after-value"),
    pytest.param(struct.pack(">bbqii", 1, 0, 0, -1, 5) + b"abc", id="value-past-the-entry"),
    pytest.param(
        struct.pack(">bbqii", 1, 0, 0, -1, -7) + b"abc", id="value-length-below-minus-one"
    ),
    pytest.param(
        struct.pack(">bbqi", 1, 0, 0, 9) + b"abc" + struct.pack(">i", -1), id="key-past-the-entry"
    ),
    pytest.param(
        struct.pack(">bbqi", 1, 0, 0, -2) + struct.pack(">i", -1), id="key-length-below-minus-one"
    ),
    pytest.param(
        struct.pack(">bbqi", 1, 0, 0, 2) + b"ab" + struct.pack(">i", -1) + b"x",
        id="null-value-after-key-then-bytes",
    ),
    pytest.param(struct.pack(">bbqii", 1, 6, 0, -1, -1), id="unknown-codec"),
    pytest.param(struct.pack(">bbqii", 3, 0, 0, -1, -1), id="unknown-magic"),
]


@pytest.mark.parametrize("body", MALFORMED_V1)
@pytest.mark.parametrize("run", [1, 20])
def test_a_malformed_entry_with_a_good_crc_is_named(body: bytes, run: int) -> None:
    """After a run of good entries or a single one: the fast paths stop, the scan says why."""
    data = encode_records([(None, b"v" * 10, i) for i in range(run)]) + entry_with_body(body)
    expected = reference_scan(data, True, None)
    assert expected[8] is not None
    assert columns(scan_entries(data)) == expected


MIXED = (
    encode_records([(b"k", b"v1", 7)])
    + record_batch.encode_batch([(b"k", b"a", 8, ()), (None, b"b", 9, (("h", b"x"),))],
                                base_offset=1)
    + encode_records([(None, b"v2", 10)], base_offset=3)
)


@pytest.mark.parametrize("verify_crc", [True, False])
def test_a_mixed_set_scans_as_the_readers_read_it_whatever_byte_is_flipped(
    verify_crc: bool,
) -> None:
    """Every byte of a v1 entry, a record batch and a v1 entry, flipped in turn, and every
    cut: the scan stops where the readers stop, for the reason they give."""
    for i in range(len(MIXED)):
        damaged_set = bytearray(MIXED)
        damaged_set[i] ^= 0x41
        for data in (bytes(damaged_set), MIXED[:i]):
            assert columns(scan_entries(data, verify_crc=verify_crc, after_offset=-1)) == (
                reference_scan(data, verify_crc, -1)), (i, data)
    whole = scan_entries(MIXED)
    assert (whole.offsets, whole.magics, whole.error) == ([0, 2, 3], [1, 2, 1], None)
