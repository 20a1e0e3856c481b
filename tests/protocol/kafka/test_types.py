"""Kafka's primitive types, written by hand from the protocol description: fixed-width numbers,
strings and bytes with their null forms, and the flexible versions' unsigned varints, compact
strings and arrays and tagged fields (the request header v2 uses them)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.kafka.errors import EncodeError, MalformedMessageError
from protocol.kafka.header import FLEXIBLE_API_VERSIONS_REQUEST, REQUEST_HEADER
from protocol.kafka.schema import Array, Field, Struct, compile_struct, decode_with
from protocol.kafka.types import (
    BOOLEAN,
    BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_STRING,
    INT8_T,
    INT64_T,
    NULLABLE_BYTES,
    NULLABLE_STRING,
    STRING,
    TAGGED_FIELDS,
    UINT32_T,
    UVARINT,
    KafkaType,
)
from tests.protocol.kafka.strategies import value_of

#: a schema of every flexible type, nested, for round trips of the compact forms
FLEXIBLE = Struct(
    Field("id", UVARINT),
    Field("flags", UINT32_T),
    Field("name", COMPACT_NULLABLE_STRING),
    Field("items", Array(Struct(Field("key", COMPACT_STRING), Field("n", INT8_T)), compact=True),
          nullable_since=0),
    Field("offsets", Array(INT64_T, compact=True)),
    Field("tagged_fields", TAGGED_FIELDS),
)


def _write(kind: KafkaType, value: Any) -> bytes:
    out = bytearray()
    kind.write(out, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("kind", "value", "wire"),
    [
        (INT8_T, -2, b"\xfe"),
        (INT64_T, 1, b"\x00" * 7 + b"\x01"),
        (UINT32_T, 0xFFFFFFFE, b"\xff\xff\xff\xfe"),
        (BOOLEAN, True, b"\x01"),
        (STRING, "é", b"\x00\x02\xc3\xa9"),
        (NULLABLE_STRING, None, b"\xff\xff"),
        (BYTES, b"", b"\x00\x00\x00\x00"),
        (NULLABLE_BYTES, None, b"\xff\xff\xff\xff"),
        (UVARINT, 0, b"\x00"),
        (UVARINT, 127, b"\x7f"),
        (UVARINT, 128, b"\x80\x01"),
        (UVARINT, 300, b"\xac\x02"),
        (UVARINT, 0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
        (COMPACT_STRING, "ab", b"\x03ab"),
        (COMPACT_STRING, "", b"\x01"),
        (COMPACT_NULLABLE_STRING, None, b"\x00"),
        (TAGGED_FIELDS, {}, b"\x00"),
        (TAGGED_FIELDS, {1: b"x", 0: b""}, b"\x02\x00\x00\x01\x01x"),
    ],
)
def test_vectors(kind: KafkaType, value: Any, wire: bytes) -> None:
    assert _write(kind, value) == wire
    assert kind.read(memoryview(wire), 0) == (value, len(wire))


def test_any_nonzero_boolean_byte_is_true() -> None:
    assert BOOLEAN.read(memoryview(b"\x07"), 0) == (True, 1)


@pytest.mark.parametrize(
    ("kind", "wire"),
    [
        (STRING, b"\xff\xff"),  # null where the field may not be
        (STRING, b"\xff\xfe"),
        (BYTES, b"\x00\x00\x00\x05abcd"),
        (COMPACT_STRING, b"\x00"),
        (COMPACT_STRING, b"\x05ab"),
        (UVARINT, b"\xff\xff\xff\xff\xff\x01"),  # a sixth byte
        (TAGGED_FIELDS, b"\x02\x01\x00\x00\x00"),  # tags out of order
        (TAGGED_FIELDS, b"\x01\x00\x09ab"),
        (TAGGED_FIELDS, b"\xff\xff\xff\xff\x07"),  # 2^32-1 fields in no bytes
    ],
)
def test_malformed_primitives(kind: KafkaType, wire: bytes) -> None:
    with pytest.raises(MalformedMessageError):
        kind.read(memoryview(wire), 0)


def test_values_that_do_not_fit_are_refused_before_writing() -> None:
    with pytest.raises(EncodeError, match="32768 bytes"):
        _write(STRING, "x" * 0x8000)
    with pytest.raises(EncodeError, match="unsigned varint"):
        _write(UVARINT, -1)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_flexible_types_round_trip(data: st.DataObject) -> None:
    for schema, version in ((FLEXIBLE, 0), (REQUEST_HEADER, 2), (FLEXIBLE_API_VERSIONS_REQUEST, 3)):
        read, write = compile_struct(schema, version)
        value = data.draw(value_of(schema, version))
        out = bytearray()
        write(out, value)
        assert decode_with(read, memoryview(bytes(out)), 0, "flexible") == (value, len(out))
        for cut in range(len(out)):
            with pytest.raises(MalformedMessageError, match="flexible"):
                decode_with(read, memoryview(bytes(out[:cut])), 0, "flexible")
