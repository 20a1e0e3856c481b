"""The log's scan against the codec's general reader (protocol.messageset.read_entries): same
entries, same columns, the same first problem, whatever the bytes -- including runs of
same-shaped entries, which the scan checks column-wise."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


def reference_scan(data: bytes, verify_crc: bool, after_offset: int | None) -> tuple[Any, ...]:
    """What ``scan_entries`` must find, spelled out with the codec's reader."""
    error: str | None = None
    bad_crc = False
    try:
        entries, end = read_entries(data, verify_crc=verify_crc)
    except MessageFormatError as exc:
        entries, end = read_entries(data[: exc.position], verify_crc=verify_crc)
        error, bad_crc = reason(exc), isinstance(exc, CorruptMessageError)
    if after_offset is not None:
        last = after_offset
        for i, entry in enumerate(entries):
            if entry.offset <= last:
                error = f"offset {entry.offset} does not follow offset {last}"
                bad_crc = False
                end = entry.position
                entries = entries[:i]
                break
            last = entry.offset
    return (
        [e.position for e in entries],
        [e.offset for e in entries],
        [LOG_OVERHEAD + e.size for e in entries],
        [e.magic for e in entries],
        [e.attributes & 0xFF for e in entries],
        [e.timestamp for e in entries],
        [-1 if e.key is None else len(e.key) for e in entries],
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
