"""Property tests: whatever bytes arrive, decoders raise only the protocol's own errors.

Arbitrary bytes rarely get past the first check, so each decoder is also fed inputs that are
almost right: valid frames with a garbage tail, schema-shaped bodies with fields swapped for
arbitrary values, valid message sets with bytes changed, inserted or cut. The message-set fast
path is also checked against the general reader, result for result and error for error.

Example counts add up to well over 10,000 in the default profile; ``HYPOTHESIS_PROFILE=deep``
raises every test to the profile's own count.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.apis import REGISTRY, ApiKey
from protocol.compression import Codec
from protocol.errors import BrokerError, FrameTooLargeError, MessageFormatError, ProtocolError
from protocol.framing import FrameDecoder, encode_frame
from protocol.messageset import (
    Message,
    TimestampType,
    decode_messages,
    encode_message_set,
    open_wrapper,
    read_entries,
)
from protocol.wire import decode_request, decode_response_body, decode_response_envelope, pack
from tests.protocol.examples import FLAVOURS, example


def examples(n: int) -> settings:
    """At least ``n`` examples, or the active profile's count if that is larger."""
    return settings(max_examples=max(n, settings().max_examples))


# ----------------------------------------------------------------------------------- framing


def reference_frames(stream: bytes, limit: int) -> tuple[list[bytes], bool]:
    """The frames a correct decoder yields from ``stream``, and whether it must fail."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        length = int.from_bytes(stream[pos : pos + 4], "big")
        if length > limit:
            return frames, True
        if len(stream) - pos - 4 < length:
            break
        frames.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return frames, False


framed_streams = st.builds(
    lambda payloads, tail: b"".join(map(encode_frame, payloads)) + tail,
    st.lists(st.binary(max_size=80), max_size=6),
    st.binary(max_size=12),
)
chunkings = st.one_of(st.just([1]), st.lists(st.integers(1, 40), min_size=1, max_size=8))


@examples(3_000)
@given(
    stream=st.one_of(st.binary(max_size=300), framed_streams),
    limit=st.integers(0, 100),
    sizes=chunkings,
)
def test_frame_decoder_in_any_chunking(stream: bytes, limit: int, sizes: list[int]) -> None:
    decoder = FrameDecoder(max_frame_bytes=limit)
    frames: list[bytes] = []
    failed = False
    pos = i = 0
    try:
        while pos < len(stream):
            size = sizes[i % len(sizes)]
            decoder.receive_data(stream[pos : pos + size])
            pos, i = pos + size, i + 1
            while (frame := decoder.next_frame()) is not None:
                frames.append(frame)
    except FrameTooLargeError:
        failed = True
        assert decoder.buffered == 0
    assert (frames, failed) == reference_frames(stream, limit)


# ------------------------------------------------------------------------- requests/responses

scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=8) | st.binary(max_size=8)
)
field_names = st.sampled_from(sorted({
    f.name for api in REGISTRY.values() for s in (api.request, api.response) for f in s.fields
}))
msgpack_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(field_names | st.text(max_size=6) | st.binary(max_size=4), inner,
                      max_size=4),
    max_leaves=12,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside a body a value can be put: map keys and list indexes."""
    found = []
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        found.append((*prefix, key))
        found += paths(item, (*prefix, key))
    return found


@st.composite
def near_valid_bodies(draw: st.DrawFn, kind: str) -> tuple[ApiKey, Any]:
    """A valid body for some API with up to three fields replaced, removed or added."""
    api = draw(st.sampled_from(sorted(REGISTRY.values(), key=lambda a: a.key)))
    body = example(getattr(api, kind), api.min_version, draw(st.sampled_from(FLAVOURS)))
    for _ in range(draw(st.integers(0, 3))):
        spots = paths(body)
        if not spots:
            break
        *parent_path, key = draw(st.sampled_from(spots))
        parent = body
        for step in parent_path:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[key] = draw(msgpack_values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(field_names)] = draw(msgpack_values)
    return api.key, body


def decodes_or_protocol_error(payload: bytes) -> None:
    try:
        request = decode_request(payload)
    except ProtocolError:
        return
    assert request.api.supports(request.header.api_version)


@examples(1_500)
@given(st.binary(max_size=200))
def test_decode_request_arbitrary_bytes(payload: bytes) -> None:
    decodes_or_protocol_error(payload)


@examples(2_000)
@given(
    body=near_valid_bodies("request") | msgpack_values.map(lambda v: (ApiKey.FETCH, v)),
    key_shift=st.sampled_from([0, 0, 0, 1, -100, 1000]),
    version=st.sampled_from([0, 0, 0, 1, -1, 2**40]),
    correlation_id=st.sampled_from([0, 1, -(2**31), 2**31 - 1, 2**31, "1"]),
    client_id=st.sampled_from(["c", "", None, b"c"]),
)
def test_decode_request_near_valid_envelopes(
    body: tuple[ApiKey, Any], key_shift: int, version: int, correlation_id: Any, client_id: Any
) -> None:
    key, value = body
    decodes_or_protocol_error(pack([int(key) + key_shift, version, correlation_id, client_id,
                                    value]))


@examples(1_000)
@given(st.binary(max_size=200))
def test_decode_response_envelope_arbitrary_bytes(payload: bytes) -> None:
    with suppress(ProtocolError):
        decode_response_envelope(payload)


@examples(1_500)
@given(near_valid_bodies("response"))
def test_decode_response_near_valid_bodies(body: tuple[ApiKey, Any]) -> None:
    key, value = body
    _, raw = decode_response_envelope(pack([5, value]))
    # a schema error, or the typed error a request-error body stands for
    with suppress(ProtocolError, BrokerError):
        assert decode_response_body(key, 0, raw) == value


# ------------------------------------------------------------------------------ message sets


@examples(1_500)
@given(st.binary(max_size=300), st.booleans())
def test_message_set_readers_on_arbitrary_bytes(data: bytes, verify_crc: bool) -> None:
    for decode in (read_entries, decode_messages):
        try:
            _, whole = decode(data, verify_crc=verify_crc)
        except ProtocolError:
            continue
        assert 0 <= whole <= len(data)


keys = st.sampled_from([None, b"", b"k", b"key-2"])
values = st.sampled_from([None, b"", b"v" * 10, b"w" * 10, b"x" * 33])
# Runs of same-shaped records, as real batches have them (the fast path's case).
records = st.lists(
    st.tuples(keys, values, st.integers(1, 25), st.integers(-1, 2**40)), min_size=1, max_size=4
).map(lambda runs: [(k, v, ts + i) for k, v, n, ts in runs for i in range(n)])
batches = st.tuples(records, st.sampled_from(Codec), st.sampled_from(TimestampType))


def encode_batches(chosen: list[tuple[Any, Codec, TimestampType]]) -> bytes:
    out, offset = [], 0
    for recs, codec, ts_type in chosen:
        out.append(encode_message_set(recs, codec=codec, base_offset=offset,
                                      timestamp_type=ts_type))
        offset += len(recs)
    return b"".join(out)


@st.composite
def damaged_sets(draw: st.DrawFn) -> bytes:
    """Valid message sets (same-shaped runs, wrappers) with a few bytes changed, added or cut."""
    raw = bytearray(encode_batches(draw(st.lists(batches, min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(range(len(raw) + 1)))
        action = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        if action == "set" and at < len(raw):
            raw[at] = draw(st.integers(0, 255))
        elif action == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del raw[at : at + draw(st.integers(1, 4))]
        else:
            del raw[at:]
    return bytes(raw)


@examples(2_500)
@given(damaged_sets(), st.booleans())
def test_message_set_readers_on_damaged_sets(data: bytes, verify_crc: bool) -> None:
    try:
        _, whole = decode_messages(data, verify_crc=verify_crc, limit=1 << 16)
        assert whole <= len(data)
    except ProtocolError:
        pass
    try:
        entries, _ = read_entries(data, verify_crc=verify_crc)
    except ProtocolError:
        return
    for entry in entries:
        if entry.codec is not Codec.NONE:
            with suppress(ProtocolError):
                open_wrapper(entry, verify_crc=verify_crc, limit=1 << 16)


def general_reader(data: bytes) -> tuple[list[Message], int]:
    """decode_messages spelled out with the entry-at-a-time reader alone."""
    entries, whole = read_entries(data)
    out = []
    for e in entries:
        inner = open_wrapper(e) if e.codec is not Codec.NONE else [e]
        for m in inner:
            timestamp = e.timestamp if e.timestamp_type else m.timestamp
            out.append(Message(m.offset, timestamp, e.timestamp_type, m.key, m.value))
    return out, whole


def outcome(decode: Any, data: bytes) -> Any:
    try:
        return decode(data)
    except MessageFormatError as exc:
        return type(exc), str(exc)


@examples(1_000)
@given(st.lists(batches, min_size=1, max_size=4), st.data())
def test_fast_path_agrees_with_the_general_reader(chosen: Any, data: st.DataObject) -> None:
    raw = bytearray(encode_batches(chosen))
    # sampled_from picks positions evenly; integers() would favour the first few bytes
    if data.draw(st.booleans()):
        raw[data.draw(st.sampled_from(range(len(raw))))] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.sampled_from(range(len(raw))))]
    assert outcome(decode_messages, bytes(raw)) == outcome(general_reader, bytes(raw))
