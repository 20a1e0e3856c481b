"""The C accelerator (protocol._speedups) does exactly what the Python code it stands in for
does: the same bytes from ``encode_records``, the same records and stopping place from
``_decode_plain``, the same columns and stopping place from the log's ``_scan_v1``, the same
v2 records from ``_py_parse_records`` (or None, leaving it to Python, wherever Python refuses)
-- for every input, damaged ones included -- and it releases what it takes."""

from __future__ import annotations

import gc
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.records import ConsumerRecord
from protocol import wire
from protocol.apis import ApiKey
from protocol.entry_scan import _Columns, _py_scan_v1, scan_entries
from protocol.framing import _py_frame_prefixes
from protocol.messageset import (
    TIMESTAMP_TYPE_BIT,
    Message,
    Record,
    _py_decode_plain,
    _py_encode_records,
    encode_message,
)
from protocol.record_batch import (
    RECORDS_AT,
    BatchRecord,
    _Malformed,
    _py_parse_records,
    encode_batch,
    encode_retained,
    read_batch_header,
)
from protocol.record_batch import Record as V2Record
from protocol.record_batch import (
    _py_encode_records as _py_encode_records_v2,
)
from protocol.wire import encode_request
from tests.log.message_sets import damaged, message_sets

native = pytest.importorskip("protocol._speedups", reason="the accelerator is not built here")
native.set_encode_fallback(_py_encode_records)  # as protocol.messageset does when it uses it


def outcome(fn, *args, **kwargs):
    """What a call gives: its result, or the type of the exception it raises."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        return type(exc)


# --------------------------------------------------------------------------------------------
# encode_records

payloads = st.one_of(st.none(), st.binary(max_size=5), st.binary(min_size=100, max_size=100))
timestamps = st.one_of(
    st.sampled_from([-1, 0, 1_700_000_000_000, 2**63 - 1, -(2**63)]), st.integers(-1, 2**62)
)
records = st.lists(st.tuples(payloads, payloads, timestamps), max_size=40)


def test_every_length_gets_the_python_crc() -> None:
    """Short spans take the accelerator's CRC tables, long ones zlib's crc32: every body length
    across the change (and every tail length of an eight-byte step) gives zlib's CRC."""
    batch = [(b"k" * (n % 3) or None, bytes((i * 7 + n) % 256 for i in range(n)), n)
             for n in range(700)]
    data = native.encode_records(batch)
    assert data == _py_encode_records(batch)
    assert native.decode_plain(data, True, Message, (), ()) == _py_decode_plain(
        data, True, Message, (), ())
    found = _Columns([], [], [], [], [], [], [])
    assert native.scan_v1(data, 0, True, None, found) == (len(data), None)
    assert len(found.positions) == 700


@settings(max_examples=400)
@given(
    records,
    st.sampled_from([0, 7, 2**40, 2**63 - 3]),
    st.sampled_from([0, TIMESTAMP_TYPE_BIT, 3, -1]),
)
def test_encode_records_gives_the_python_bytes(batch, base, attributes) -> None:
    expected = outcome(_py_encode_records, batch, base_offset=base, attributes=attributes)
    assert outcome(native.encode_records, batch, base_offset=base,
                   attributes=attributes) == expected
    assert outcome(native.encode_records, tuple(batch), base_offset=base,
                   attributes=attributes) == expected
    records_ = [Record(*r) for r in batch]
    assert outcome(native.encode_records, records_, base_offset=base,
                   attributes=attributes) == expected


class Swapped(tuple):
    """A record that iterates as (value, key, timestamp)."""

    def __iter__(self):
        return iter((self[1], self[0], self[2]))


@pytest.mark.parametrize(
    ("batch", "kwargs"),
    [
        ([(None, b"v", 1)], {}),
        ([(b"k", None, 1), (None, None, -1), (b"", b"", 0)], {"base_offset": 5}),
        (iter([(None, b"v", 1), (b"k", b"w", 2)]), {}),  # an iterator: the Python code reads it
        ([[None, b"v", 1]], {}),  # lists as records
        ([(bytearray(b"k"), memoryview(b"value"), 3)], {}),  # other buffers
        ([(None, b"v", 2**63)], {}),  # a timestamp beyond int64: struct.error
        ([(None, b"v", 1.5)], {}),  # not an int
        ([(None, b"v")], {}),  # two fields
        ([(None, "text", 1)], {}),  # str is not bytes
        ([(None, b"v", 1)], {"base_offset": 2**63}),  # offset out of range
        ([(None, b"v", 1), (None, b"v", 1)], {"base_offset": 2**63 - 1}),  # the second is
        ([(None, b"v", 1)], {"attributes": 128}),
        ([Swapped((b"key", b"value", 1))], {}),  # a tuple that iterates otherwise
        ([(None, b"v", 1)], {"base_offset": True}),
        ([], {}),
    ],
)
def test_encode_records_hands_what_it_does_not_take_to_python(batch, kwargs) -> None:
    items = list(batch)
    fresh = (lambda: items) if isinstance(batch, list) else (lambda: iter(items))
    expected = outcome(_py_encode_records, fresh(), **kwargs)
    assert outcome(native.encode_records, fresh(), **kwargs) == expected


def test_encode_records_takes_records_and_keywords_only_as_python_does() -> None:
    assert outcome(native.encode_records, [], 0) is TypeError
    assert outcome(native.encode_records) is TypeError
    one = encode_message(3, None, b"v", 1)
    assert native.encode_records([(None, b"v", 1)], base_offset=3) == one


# --------------------------------------------------------------------------------------------
# _decode_plain


Keyed = ConsumerRecord  # a reader's record type: two fields before the message's, one after
NO_HEADERS = ((),)  # what the consumer puts after each v0/v1 message: its headers


shapes = st.sampled_from([
    (Message, (), ()),
    (Keyed, ("t", 3), NO_HEADERS),
    (tuple, (), ()),
    (tuple, ("x",), ()),
    (tuple, (), ("y", None)),
    (tuple, ("x", 1), (b"z",)),
])
inputs = st.one_of(message_sets, damaged(message_sets), st.binary(max_size=200))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(inputs, st.booleans(), shapes, st.sampled_from([bytes, bytearray, memoryview]))
def test_decode_plain_builds_the_python_records(data, verify, shape, kind) -> None:
    cls, prefix, suffix = shape
    expected = _py_decode_plain(data, verify, cls, prefix, suffix)
    got = native.decode_plain(kind(data), verify, cls, prefix, suffix)
    assert got == expected
    assert [type(r) for r in got[0]] == [type(r) for r in expected[0]]


@pytest.mark.parametrize("damaged_at", [[], [0], [1], [511], [512], [550], [3, 700], [899]])
def test_decode_plain_stops_at_the_first_damaged_entry_of_a_long_set(damaged_at) -> None:
    # A damaged entry anywhere in a long set (the Python code checks runs a chunk at a time)
    # is found, and the records before it are handed out, as the Python code does.
    batch = [(None, b"v%03d" % (i % 1000) + b"x" * 96, 1_700_000_000_000 + i) for i in range(900)]
    batch[600] = (b"key", b"a different size", 5)
    raw = bytearray(_py_encode_records(batch, base_offset=10))
    for i in damaged_at:
        raw[len(_py_encode_records(batch[:i])) + 40] ^= 0x10
    data = bytes(raw)
    got = native.decode_plain(data, True, Message, (), ())
    assert got == _py_decode_plain(data, True, Message, (), ())
    assert len(got[0]) == (min(damaged_at) if damaged_at else 900)
    records = native.decode_plain(data, True, Keyed, ("t", 3), NO_HEADERS)
    assert records == _py_decode_plain(data, True, Keyed, ("t", 3), NO_HEADERS)
    assert records[0] == [Keyed("t", 3, *m, ()) for m in got[0]]


def test_decode_plain_takes_cls_prefix_suffix_and_data_as_python_does() -> None:
    data = encode_message(0, None, b"v", 1)
    for args in [
        (data, True, list, (), ()),  # not a tuple type, when there is a record to build
        (b"", True, list, (), ()),  # ... and when there is none
        (data, True, Message, 5, ()),  # a prefix that is not iterable
        (data, True, Message, (), 5),  # a suffix that is not iterable
        (b"", True, Message, (), 5),  # ... when there is no record to build
        (data, True, Message, 5, 5),  # both
        (data, True, tuple, ["x", "y"], ["z"]),  # lists as the prefix and the suffix
        ("text", True, Message, (), ()),  # not a buffer
    ]:
        assert outcome(native.decode_plain, *args) == outcome(_py_decode_plain, *args)
    assert outcome(native.decode_plain, data, True, tuple, ("x",), ["y", "z"]) == (
        [("x", 0, 1, 0, None, b"v", "y", "z")], len(data))
    # every argument is required, and no more are taken
    assert outcome(native.decode_plain, data, True, Message, ()) is TypeError
    assert outcome(_py_decode_plain, data, True, Message, ()) is TypeError
    assert outcome(native.decode_plain, data, True, Message, (), (), ()) is TypeError
    assert outcome(_py_decode_plain, data, True, Message, (), (), ()) is TypeError


# --------------------------------------------------------------------------------------------
# _scan_v1

lasts = st.one_of(st.none(), st.integers(-3, 80), st.sampled_from([2**63, -(2**63) - 1, 2**63 - 1]))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(inputs, st.booleans(), lasts, st.data())
def test_scan_v1_finds_the_python_columns(data, verify, last, draw) -> None:
    start = draw.draw(st.sampled_from([0, 0, *range(len(data) + 1)]))
    buf = draw.draw(st.sampled_from([bytes, bytearray]))(data)
    expected_cols = _Columns([], [], [], [], [], [], [])
    expected = _py_scan_v1(buf, start, verify, last, expected_cols)
    cols = _Columns([7], [7], [7], [7], [7], [7], [7])  # columns are appended to
    got = native.scan_v1(buf, start, verify, last, cols)
    assert got == expected
    assert cols == _Columns(*([7, *c] for c in expected_cols))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(inputs, st.booleans(), st.one_of(st.none(), st.integers(-2, 50)))
def test_scan_entries_gives_one_scan_with_either(data, verify, after) -> None:
    import protocol.entry_scan as entries

    got = scan_entries(data, verify_crc=verify, after_offset=after)
    saved = entries._scan_v1
    entries._scan_v1 = _py_scan_v1
    try:
        expected = scan_entries(data, verify_crc=verify, after_offset=after)
    finally:
        entries._scan_v1 = saved
    assert got == expected


def test_scan_v1_refuses_bad_arguments() -> None:
    cols = _Columns([], [], [], [], [], [], [])
    data = encode_message(0, None, b"v", 1)
    assert outcome(native.scan_v1, data, -1, True, None, cols) is ValueError
    assert outcome(native.scan_v1, data, 0, True, None, ([],) * 6) is TypeError
    assert outcome(native.scan_v1, data, 0, True, "x", cols) is TypeError
    assert outcome(native.scan_v1, object(), 0, True, None, cols) is TypeError
    assert outcome(native.scan_v1, data, 0, True, None) is TypeError
    assert cols == _Columns([], [], [], [], [], [], [])


# --------------------------------------------------------------------------------------------
# references and memory


def test_many_calls_leave_no_memory_or_references_behind() -> None:
    key, value, prefix_item, suffix_item = b"key-1", b"v" * 100, "topic-a", ("h", b"x")
    batch = [(key, value, 5), (None, value, 6), (key, None, 7)] * 20
    plain = native.encode_records(batch)
    bad = bytearray(plain)
    bad[len(plain) // 2] ^= 0xFF
    odd = [(key, value, 1.5)]  # handed to Python, which raises

    def one_round() -> None:
        native.encode_records(batch, base_offset=9)
        outcome(native.encode_records, odd)
        native.decode_plain(plain, True, Keyed, (prefix_item, 1), ((suffix_item,),))
        native.decode_plain(bytes(bad), True, Message, (), ())
        outcome(native.decode_plain, plain, True, list, (), ())
        outcome(native.decode_plain, plain, True, Keyed, 5, ())
        outcome(native.decode_plain, plain, True, Keyed, (prefix_item, 1), 5)
        outcome(native.decode_plain, "text", True, Message, (), ())
        native.scan_v1(plain, 0, True, 3, _Columns([], [], [], [], [], [], []))
        native.scan_v1(bad, 0, True, None, _Columns([], [], [], [], [], [], []))
        outcome(native.scan_v1, plain, -1, True, None, _Columns([], [], [], [], [], [], []))
        outcome(native.scan_v1, object(), 0, True, None, _Columns([], [], [], [], [], [], []))

    for _ in range(50):  # warm up: caches, free lists
        one_round()
    gc.collect()
    kept = (key, value, prefix_item, suffix_item, Keyed, Message, bad)
    refs = [sys.getrefcount(o) for o in kept]
    blocks = sys.getallocatedblocks()
    for _ in range(3000):
        one_round()
    gc.collect()
    assert [sys.getrefcount(o) for o in kept] == refs
    # 3000 rounds of ~150 records each: a leak of one object per call would be thousands
    assert sys.getallocatedblocks() - blocks < 500
    bad.append(0)  # no buffer export left behind (a bytearray with one refuses to resize)


# --------------------------------------------------------------------------------------------
# parse_records_v2 (protocol.record_batch._py_parse_records)

v2_headers = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=9)),
                      max_size=3).map(tuple)
v2_records = st.lists(
    st.builds(V2Record, st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=200),
              st.integers(0, 1 << 50), v2_headers),
    min_size=1, max_size=12,
)


AS_BATCH_RECORDS = (BatchRecord, (), None)  # (cls, prefix, ts_type): the log's readers'
# the consumer's records, with either timestamp type
layouts = st.sampled_from(
    [AS_BATCH_RECORDS, (ConsumerRecord, ("t", 3), 0), (ConsumerRecord, ("t", 3), 1)]
)


def both_parses(data, count, base_offset=0, base_ts=0, ts_override=None, start=RECORDS_AT,
                end=None, layout=AS_BATCH_RECORDS):
    """(the accelerator's answer, the Python function's outcome) for the records at start."""
    end = len(data) if end is None else end
    fast = native.parse_records_v2(data, start, end, count, base_offset, base_ts, ts_override,
                                   *layout)
    slow = outcome(_py_parse_records, data, start, end, 0, count, base_offset, base_ts,
                   ts_override, *layout)
    return fast, slow


@settings(max_examples=200, deadline=None)
@given(records=v2_records, base_offset=st.integers(0, 1 << 40),
       ts_override=st.none() | st.integers(0, 1 << 45), layout=layouts)
def test_parse_records_v2_builds_the_python_records(records, base_offset, ts_override,
                                                    layout) -> None:
    data = encode_batch(records)
    fast, slow = both_parses(data, len(records), base_offset, records[0].timestamp, ts_override,
                             layout=layout)
    assert isinstance(slow, list) and len(slow) == len(records)
    assert fast == slow
    cls, prefix, ts_type = layout
    assert all(type(r) is cls for r in fast)
    stamps = [ts_override if ts_override is not None else r.timestamp for r in records]
    middle = () if ts_type is None else (ts_type,)
    assert fast == [cls(*prefix, base_offset + i, stamp, *middle, r.key, r.value, r.headers)
                    for i, (r, stamp) in enumerate(zip(records, stamps, strict=True))]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=v2_records, data=st.data(), layout=layouts)
def test_parse_records_v2_gives_way_to_python_wherever_python_refuses(records, data,
                                                                      layout) -> None:
    """Damaged records sections: the accelerator returns the Python records or None (then the
    Python code runs and raises) -- never different records, never an exception of its own."""
    raw = bytearray(encode_batch(records))
    how = data.draw(st.sampled_from(["flip", "cut", "count", "garbage"]))
    count = len(records)
    if how == "flip":
        at = data.draw(st.integers(RECORDS_AT, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    elif how == "cut":
        del raw[data.draw(st.integers(RECORDS_AT, len(raw) - 1)):]
    elif how == "count":
        count = data.draw(st.integers(0, count + 3))
    else:
        raw[RECORDS_AT:] = data.draw(st.binary(max_size=60))
    fast, slow = both_parses(bytes(raw), count, 0, records[0].timestamp, layout=layout)
    if isinstance(slow, list):
        assert fast == slow
    else:
        assert fast is None and slow is _Malformed


@settings(max_examples=200, deadline=None)
@given(records=v2_records, data=st.data(), layout=layouts)
def test_parse_records_v2_reads_compacted_batches_with_gaps_as_python_does(records, data,
                                                                           layout) -> None:
    """What compaction leaves: some of the records, each at its own offset delta."""
    full = encode_batch(records)
    header = read_batch_header(full)
    assert header is not None
    kept = sorted(data.draw(st.sets(st.integers(0, len(records) - 1), min_size=1)))
    parsed = _py_parse_records(full, RECORDS_AT, len(full), 0, len(records), 0,
                               records[0].timestamp, None, *AS_BATCH_RECORDS)
    compacted = encode_retained(header, [parsed[i] for i in kept])
    fast, slow = both_parses(compacted, len(kept), 100, read_batch_header(compacted).base_timestamp,
                             layout=layout)
    assert isinstance(slow, list) and [r.offset for r in slow] == [100 + i for i in kept]
    assert fast == slow


def test_parse_records_v2_leaves_offsets_and_timestamps_past_int64_to_python() -> None:
    data = encode_batch([(None, b"a", 5), (None, b"b", 9)])
    fast, slow = both_parses(data, 2, base_offset=2**63 - 1)
    assert fast is None and [r.offset for r in slow] == [2**63 - 1, 2**63]
    fast, slow = both_parses(data, 2, base_ts=2**63 - 3)  # deltas 0 and 4
    assert fast is None and [r.timestamp for r in slow] == [2**63 - 3, 2**63 + 1]


def test_parse_records_v2_refuses_bad_arguments_and_leaves_nothing_behind() -> None:
    data = encode_batch([V2Record(b"k", b"v" * 50, 5, (("h", b"x"), ("n", None)))] * 3)
    damaged = bytearray(data)
    damaged[-3] ^= 0xFF
    plain = (BatchRecord, (), None)
    parse = native.parse_records_v2
    assert outcome(parse, data, RECORDS_AT, len(data), 1, 0, 0, None, list, (), None) is TypeError
    assert outcome(parse, "text", 0, 4, 1, 0, 0, None, *plain) is TypeError
    # prefix a tuple (not any iterable), the timestamp type an int or None
    assert outcome(parse, data, RECORDS_AT, len(data), 1, 0, 0, None, ConsumerRecord, ["t", 3],
                   0) is TypeError
    assert outcome(parse, data, RECORDS_AT, len(data), 1, 0, 0, None, ConsumerRecord, ("t", 3),
                   "0") is TypeError
    assert outcome(parse, data, RECORDS_AT, len(data), 1, 0, 0, None, BatchRecord) is TypeError
    assert outcome(parse, data, RECORDS_AT, len(data), 1, 0, 0, None, *plain, 0) is TypeError
    assert parse(data, -1, len(data), 1, 0, 0, None, *plain) is None
    assert parse(data, 0, len(data) + 1, 1, 0, 0, None, *plain) is None
    value = b"v" * 50
    topic = "a topic of its own"
    consumer = (ConsumerRecord, (topic, 3), 1)

    def one_round() -> None:
        for layout in (plain, consumer):
            assert len(parse(data, RECORDS_AT, len(data), 3, 0, 0, None, *layout)) == 3
            parse(data, RECORDS_AT, len(data), 1, 0, 0, None, *layout)
            parse(data, RECORDS_AT, len(data), 1, 0, 0, 7, *layout)
            parse(bytes(damaged), RECORDS_AT, len(data), 1, 0, 0, None, *layout)
            parse(data, RECORDS_AT, len(data), 2, 0, 0, None, *layout)

    for _ in range(50):
        one_round()
    gc.collect()
    held = (data, value, BatchRecord, ConsumerRecord, topic)
    refs = [sys.getrefcount(o) for o in held]
    blocks = sys.getallocatedblocks()
    for _ in range(3000):
        one_round()
    gc.collect()
    assert [sys.getrefcount(o) for o in held] == refs
    assert sys.getallocatedblocks() - blocks < 500
    damaged.append(0)  # no buffer export left behind


# --------------------------------------------------------------------------------------------
# encode_records_v2 (protocol.record_batch._py_encode_records)

odd_fields = st.one_of(st.none(), st.binary(max_size=20),
                       st.builds(bytearray, st.binary(max_size=3)), st.just("text"))
odd_headers = st.one_of(
    v2_headers, st.none(), st.just([]), st.lists(st.tuples(st.text(max_size=4), odd_fields),
                                                 max_size=2),
    st.just((("\udcff", b"x"),)),  # a lone surrogate: Python's surrogateescape takes it
    st.just([["k", b"v"]]),
)
odd_timestamps = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**64),
                           st.just(True))
odd_records = st.lists(
    st.one_of(
        st.tuples(odd_fields, odd_fields, odd_timestamps),
        st.tuples(odd_fields, odd_fields, odd_timestamps, odd_headers),
        st.builds(V2Record, st.none() | st.binary(max_size=30), st.binary(max_size=30),
                  st.integers(0, 2**50), v2_headers),
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(records=odd_records, base=st.one_of(st.integers(-(2**63), 2**63 - 1), st.just(2**64)),
       as_tuple=st.booleans())
def test_encode_records_v2_gives_the_python_bytes_or_gives_way(records, base, as_tuple) -> None:
    batch = tuple(records) if as_tuple else records
    fast = native.encode_records_v2(batch, base)
    slow = outcome(_py_encode_records_v2, batch, base)
    if fast is not None:
        assert fast == slow
    typical = all(
        isinstance(r, tuple) and all(f is None or type(f) is bytes for f in r[:2])
        and -(2**63) <= r[2] < 2**63 and -(2**63) <= r[2] - base < 2**63
        and (len(r) == 3 or not r[3] or all(
            type(h) is tuple and "\udcff" not in h[0] and (h[1] is None or type(h[1]) is bytes)
            for h in r[3]))
        for r in records
    )
    if typical and -(2**63) <= base < 2**63:
        assert fast is not None  # the common records are all taken


def test_encode_records_v2_takes_only_lists_and_tuples() -> None:
    records = [(None, b"a", 1)]
    assert native.encode_records_v2(iter(records), 0) is None
    assert native.encode_records_v2(records, 0) == _py_encode_records_v2(records, 0)
    assert outcome(native.encode_records_v2, records) is TypeError


def test_encode_records_v2_leaves_nothing_behind() -> None:
    key, value = b"key-1", b"v" * 100
    batch = [V2Record(key, value, 5, (("h", value), ("n", None))), (None, value, 6)] * 20
    odd = [(key, value, 1.5)]

    def one_round() -> None:
        native.encode_records_v2(batch, 0)
        native.encode_records_v2(odd, 0)
        native.encode_records_v2(batch, 2**64)

    for _ in range(50):
        one_round()
    gc.collect()
    refs = [sys.getrefcount(o) for o in (key, value)]
    blocks = sys.getallocatedblocks()
    for _ in range(3000):
        one_round()
    gc.collect()
    assert [sys.getrefcount(o) for o in (key, value)] == refs
    assert sys.getallocatedblocks() - blocks < 500


# --------------------------------------------------------------------------------------------
# parse_heartbeats and error_code_response (protocol.wire)


@st.composite
def mp_int(draw, value: int) -> bytes:
    """``value`` in any msgpack integer type that holds it."""
    forms = []
    if 0 <= value <= 0x7F or -32 <= value < 0:
        forms.append(value.to_bytes(1, "big", signed=True))
    for tag, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
        if 0 <= value < 1 << (8 * size):
            forms.append(bytes([tag]) + value.to_bytes(size, "big"))
    for tag, size in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
        if -(1 << (8 * size - 1)) <= value < 1 << (8 * size - 1):
            forms.append(bytes([tag]) + value.to_bytes(size, "big", signed=True))
    return draw(st.sampled_from(forms))


@st.composite
def mp_str(draw, text: bytes) -> bytes:
    """``text`` (UTF-8 or not) as any msgpack str type that holds it, or as bin."""
    n = len(text)
    forms = [b"\xd9" + n.to_bytes(1, "big"), b"\xda" + n.to_bytes(2, "big"),
             b"\xdb" + n.to_bytes(4, "big"), b"\xc4" + n.to_bytes(1, "big")]
    if n < 32:
        forms.append(bytes([0xA0 | n]))
    return draw(st.sampled_from(forms)) + text


often = st.integers(0, 4).map(bool)  # four times in five
texts = st.one_of(st.text(max_size=6).map(str.encode), st.binary(max_size=4))
int32s = st.integers(-(2**31), 2**31 - 1)
ints = st.one_of(int32s, st.sampled_from([2**31, -(2**31) - 1]), st.integers(-(2**63), 2**64 - 1))


@st.composite
def heartbeat_payloads(draw) -> bytes:
    """A Heartbeat's payload in any msgpack form, now and then damaged: what either parser
    may meet."""
    def value() -> bytes:  # of any type
        kind = draw(st.sampled_from(["int", "str", "nil", "true"]))
        if kind == "int":
            return draw(mp_int(draw(ints)))
        if kind == "str":
            return draw(mp_str(draw(texts)))
        return b"\xc0" if kind == "nil" else b"\xc3"

    def text() -> bytes:  # a str, most often
        return draw(mp_str(draw(st.text(max_size=6)).encode())) if draw(often) else value()

    def int32(values: st.SearchStrategy[int] = int32s) -> bytes:  # an int32, most often
        return draw(mp_int(draw(values))) if draw(often) else value()

    fields = draw(st.permutations(["group_id", "member_id", "generation_id"]))
    if not draw(often):
        fields = fields[: draw(st.integers(0, 3))] + draw(
            st.lists(st.sampled_from(["group_id", "extra"]), max_size=2))
    body = draw(st.sampled_from([bytes([0x80 | len(fields)])] * 3 + [
        b"\xde" + len(fields).to_bytes(2, "big")]))
    for name in fields:
        body += draw(mp_str(name.encode())) if draw(often) else value()
        body += int32() if name == "generation_id" else text()
    head = draw(st.sampled_from([b"\x95\x0c"] * 5 + [b"\x95\xcc\x0c", b"\xdc\x00\x05\x0c",
                                                       b"\x95\x0b", b"\x94\x0c"]))
    client = b"\xc0" if draw(st.booleans()) else text()
    payload = head + int32(st.sampled_from([0, 0, 0, 1, -1])) + int32() + client + body
    if not draw(often):
        payload += b"\xc0"  # extra data
    if not draw(often):
        payload = payload[: draw(st.integers(0, len(payload)))]
    return payload


@st.composite
def canonical_heartbeats(draw) -> bytes:
    """A Heartbeat as our encoder writes it, its fields in any order."""
    fields = {"group_id": draw(st.text(max_size=6)), "member_id": draw(st.text(max_size=40)),
              "generation_id": draw(int32s)}
    order = draw(st.permutations(list(fields)))
    return encode_request(ApiKey.HEARTBEAT, 0, draw(int32s), draw(st.none() | st.text(max_size=6)),
                          {name: fields[name] for name in order})[4:]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=st.lists(canonical_heartbeats() | heartbeat_payloads(), max_size=6),
       data=st.data())
def test_parse_heartbeats_takes_the_python_heartbeats(payloads, data) -> None:
    """The C parser takes what the Python one takes, and stops where it stops, or earlier
    (the Python one goes on from there: ``_parse_heartbeats_in_c``)."""
    frames = [len(p).to_bytes(4, "big") + p for p in payloads]
    buf = bytearray(b"".join(frames))
    stop = data.draw(st.integers(0, len(buf)))
    start = data.draw(st.sampled_from([0] + [len(f) for f in frames[:1]]).filter(
        lambda s: s <= stop))
    limit = data.draw(st.integers(0, 6))
    slow = wire._py_parse_heartbeats(buf, start, stop, limit)
    fast, fast_end = native.parse_heartbeats(buf, start, stop, limit, 12, 0, 0)
    assert fast == slow[0][: len(fast)]
    assert fast_end == (fast[-1][0] if fast else start)
    assert wire._parse_heartbeats_in_c(native.parse_heartbeats, buf, start, stop, limit) == slow
    buf.append(0)  # no buffer export left behind


@settings(max_examples=500, deadline=None)
@given(bodies=st.lists(st.binary(max_size=12), max_size=6), tail=st.binary(max_size=7),
       data=st.data())
def test_frame_prefixes_stop_where_python_stops(bodies, tail, data) -> None:
    """protocol.framing's prefix check: the same place, the same verdict, wherever it starts
    (a frame's first byte, or anywhere), whatever the limit."""
    buf = b"".join(len(b).to_bytes(4, "big") + b for b in bodies) + tail
    at = data.draw(st.integers(0, len(buf) + 5))
    limit = data.draw(st.integers(0, 12) | st.just(2**31))
    for chunk in (buf, bytearray(buf), memoryview(buf)):
        assert native.frame_prefixes(chunk, at, limit) == _py_frame_prefixes(chunk, at, limit)


def test_frame_prefixes_refuse_bad_arguments() -> None:
    assert outcome(native.frame_prefixes, b"", -1, 10) is ValueError
    assert outcome(_py_frame_prefixes, b"", -1, 10) is ValueError
    assert outcome(native.frame_prefixes, "text", 0, 10) is TypeError
    assert outcome(_py_frame_prefixes, "text", 0, 10) is TypeError


def test_parse_heartbeats_takes_every_canonical_heartbeat_in_c() -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 0, -7, None, {
        "member_id": "m-\u00e9", "generation_id": 2**31 - 1, "group_id": ""})
    buf = frame * 3
    fast, end = native.parse_heartbeats(buf, 0, len(buf), 10, 12, 0, 0)
    assert end == len(buf)
    assert fast == [(len(frame) * i, -7, None, "", "m-\u00e9", 2**31 - 1) for i in (1, 2, 3)]


def test_a_heartbeat_the_c_parser_does_not_take_is_decoded_in_python_and_c_goes_on() -> None:
    canonical = encode_request(ApiKey.HEARTBEAT, 0, 1, None, {
        "group_id": "g", "generation_id": 1, "member_id": "m"})
    payload = canonical[4:].replace(b"\x83", b"\xde\x00\x03")  # the body a map16
    other = len(payload).to_bytes(4, "big") + payload
    buf = canonical + other + canonical + canonical
    assert native.parse_heartbeats(buf, 0, len(buf), 10, 12, 0, 0)[1] == len(canonical)
    frames, end = wire._parse_heartbeats_in_c(native.parse_heartbeats, buf, 0, len(buf), 10)
    assert (frames, end) == wire._py_parse_heartbeats(buf, 0, len(buf), 10)
    assert len(frames) == 4 and end == len(buf)


def test_parse_heartbeats_refuses_bad_arguments() -> None:
    buf = encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {
        "group_id": "g", "generation_id": 1, "member_id": "m"})
    for start, stop in ((-1, len(buf)), (0, len(buf) + 1), (5, 4)):
        assert outcome(native.parse_heartbeats, buf, start, stop, 1, 12, 0, 0) is ValueError
        assert outcome(wire._py_parse_heartbeats, buf, start, stop, 1) is ValueError
    assert outcome(native.parse_heartbeats, "text", 0, 0, 1, 12, 0, 0) is TypeError
    assert outcome(native.parse_heartbeats, buf, 0, len(buf), 1) is TypeError


@given(correlation_id=st.integers(-(2**63), 2**64 - 1), body=st.binary(max_size=40))
def test_error_code_response_gives_the_python_bytes(correlation_id, body) -> None:
    assert outcome(native.error_code_response, correlation_id, body) == outcome(
        wire._py_error_code_response, correlation_id, body)


def test_heartbeat_calls_leave_no_memory_or_references_behind() -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 0, 300, "client", {
        "group_id": "group", "generation_id": 4, "member_id": "member"})
    buf = bytearray(frame * 4 + frame[:-1] + b"\xff")  # the last one is not UTF-8
    body = wire._packed_error_body(27)

    def one_round() -> None:
        native.parse_heartbeats(buf, 0, len(buf), 10, 12, 0, 0)
        native.error_code_response(300, body)
        outcome(native.error_code_response, 300, "text")

    for _ in range(50):
        one_round()
    gc.collect()
    refs = sys.getrefcount(body)
    blocks = sys.getallocatedblocks()
    for _ in range(3000):
        one_round()
    gc.collect()
    assert sys.getrefcount(body) == refs
    assert sys.getallocatedblocks() - blocks < 500
    buf.append(0)
