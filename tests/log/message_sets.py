"""Hypothesis strategies for the log's fast paths: produced message sets as they come (runs of
same-shaped messages long enough to reach the run path, v0 messages, wrappers of every codec and
both magics, wrappers whose inner offsets are not 0..n-1, whose inner messages are compressed or
of another magic, or that have a key), and the same sets with a few bytes changed, inserted or
cut."""

from __future__ import annotations

from hypothesis import strategies as st

from protocol.compression import Codec, compress
from protocol.messageset import encode_message, encode_message_set, encode_records

keys = st.sampled_from([None, b"", b"k", b"key-2"])
# the last: entries past 4 KiB, whose CRCs the run path computes over views, not copies
values = st.sampled_from([None, b"", b"v" * 10, b"w" * 10, b"x" * 33, b"y" * 4070])
# Up to 70 of a shape: past the first chunk of a run (16) and into the second.
run_lengths = st.sampled_from([1, 1, 2, 3, 15, 16, 17, 40, 70])
timestamps = st.integers(-1, 2**40)


@st.composite
def plain_run(draw: st.DrawFn) -> bytes:
    key, value, ts = draw(keys), draw(values), draw(timestamps)
    return encode_records([(key, value, ts + i) for i in range(draw(run_lengths))])


@st.composite
def v0_messages(draw: st.DrawFn) -> bytes:
    count = draw(st.integers(1, 3))
    return b"".join(encode_message(0, draw(keys), draw(values), magic=0) for _ in range(count))


@st.composite
def wrapper(draw: st.DrawFn) -> bytes:
    codec = draw(st.sampled_from([Codec.GZIP, Codec.SNAPPY, Codec.LZ4]))
    records = [(draw(keys), draw(values), draw(timestamps)) for _ in range(draw(run_lengths))]
    quirk = draw(st.sampled_from(
        ["none", "none", "none", "v0", "v0", "gap", "nested", "empty", "keyed", "mixed-magic"]
    ))
    if quirk == "none":
        return encode_message_set(records, codec=codec)
    if quirk == "v0":  # inner offsets absolute, here from wherever the producer started
        return encode_message_set(records, codec=codec, magic=0, base_offset=draw(run_lengths))
    if quirk == "keyed":
        inner = encode_records(records)
        return encode_message(len(records) - 1, b"k", compress(codec, inner), 5,
                              attributes=int(codec))
    if quirk == "mixed-magic":  # v1 messages in a v0 wrapper
        inner = encode_records(records)
        return encode_message(0, None, compress(codec, inner, magic=0), attributes=int(codec),
                              magic=0)
    if quirk == "gap":
        inner = encode_records(records[:1]) + encode_records(records, base_offset=2)
    elif quirk == "nested":
        inner = encode_message_set(records, codec=codec)
    else:
        inner = b""
    return encode_message(0, None, compress(codec, inner), 5, attributes=int(codec))


pieces = st.one_of(plain_run(), plain_run(), v0_messages(), wrapper())
message_sets = st.lists(pieces, min_size=1, max_size=4).map(b"".join)


@st.composite
def damaged(draw: st.DrawFn, sets: st.SearchStrategy[bytes]) -> bytes:
    """A set from ``sets`` with up to three bytes changed, added or cut (positions drawn
    evenly: sampled_from, not integers, which would favour the first bytes)."""
    raw = bytearray(draw(sets))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.sampled_from(range(len(raw) + 1)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if action == "flip" and at < len(raw):
            raw[at] ^= draw(st.integers(1, 255))
        elif action == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del raw[at : at + draw(st.integers(1, 4))]
        elif action == "cut":
            del raw[at:]
    return bytes(raw)
