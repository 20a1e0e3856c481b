"""Kafka's primitive wire types, each a reader and a writer over memoryviews and bytearrays.

Big-endian fixed-width integers and booleans are ``Fixed`` rows holding one precompiled
``struct.Struct``: the schema compiler fuses runs of them into one ``Struct`` per run, so a
partition's index, error code and offset are one ``unpack_from``. Lengths are checked against
the bytes left before anything is sliced (a memoryview slice past the end is silently short), so
a hostile length raises ``MalformedMessageError`` and never makes the reader allocate or loop.
Arrays of fixed-width numbers are read and written with one format of ``count`` items.

The flexible types (unsigned varint, compact string and array, tagged fields) exist for the
flexible request header v2 that ApiVersions v3+ requests carry; the 0.10.2 table uses none.
``Records`` is a message set kept opaque: a memoryview slice of the request, so stored or
received bytes pass through without a copy or a re-encoding.
"""

from __future__ import annotations

import struct
from typing import Any

from protocol.kafka.errors import EncodeError, MalformedMessageError

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")


class KafkaType:
    """A wire type. ``read`` returns the value and the position after it; ``write`` appends.
    ``fixed`` is the struct of a fixed-width type (None otherwise), ``min_size`` the fewest
    bytes one value takes (bounds an array's count by the bytes left)."""

    name = ""
    fixed: struct.Struct | None = None
    min_size = 1

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        raise NotImplementedError

    def write(self, out: bytearray, value: Any) -> None:
        raise NotImplementedError

    def as_nullable(self) -> KafkaType:
        raise TypeError(f"{self.name} has no nullable form")


class Fixed(KafkaType):
    def __init__(self, name: str, fmt: str) -> None:
        self.name = name
        self.fixed = struct.Struct(">" + fmt)
        self.min_size = self.fixed.size

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        assert self.fixed is not None
        return self.fixed.unpack_from(buf, pos)[0], pos + self.min_size

    def write(self, out: bytearray, value: Any) -> None:
        assert self.fixed is not None
        out += self.fixed.pack(value)


def _span(buf: memoryview, pos: int, length: int, what: str) -> int:
    """The end of ``length`` bytes at ``pos``; MalformedMessageError if they are not all there."""
    end = pos + length
    if length < 0 or end > len(buf):
        raise MalformedMessageError(
            f"{what} of {length} bytes at position {pos} runs past the end ({len(buf)} bytes)"
        )
    return end


class String(KafkaType):
    """int16 length, then UTF-8; -1 is null where the field is nullable."""

    def __init__(self, nullable: bool = False) -> None:
        self.nullable = nullable
        self.name = "nullable_string" if nullable else "string"
        self.min_size = 2

    def as_nullable(self) -> KafkaType:
        return String(nullable=True)

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        (length,) = INT16.unpack_from(buf, pos)
        pos += 2
        if length == -1 and self.nullable:
            return None, pos
        end = _span(buf, pos, length, self.name)
        return str(buf[pos:end], "utf-8"), end

    def write(self, out: bytearray, value: Any) -> None:
        if value is None and self.nullable:
            out += INT16.pack(-1)
            return
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise EncodeError(f"a string of {len(data)} bytes does not fit an int16 length")
        out += INT16.pack(len(data))
        out += data


class Bytes(KafkaType):
    """int32 length, then the bytes; -1 is null where nullable. ``Records`` keeps a memoryview
    slice (the message set), other fields a ``bytes`` copy (small: group metadata)."""

    view = False

    def __init__(self, nullable: bool = False) -> None:
        self.nullable = nullable
        self.name = "nullable_bytes" if nullable else "bytes"
        self.min_size = 4

    def as_nullable(self) -> KafkaType:
        return type(self)(nullable=True)

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        (length,) = INT32.unpack_from(buf, pos)
        pos += 4
        if length == -1 and self.nullable:
            return None, pos
        end = _span(buf, pos, length, self.name)
        return (buf[pos:end] if self.view else bytes(buf[pos:end])), end

    def write(self, out: bytearray, value: Any) -> None:
        if value is None and self.nullable:
            out += INT32.pack(-1)
            return
        out += INT32.pack(len(value))
        out += value


class Records(Bytes):
    view = True

    def __init__(self, nullable: bool = False) -> None:
        super().__init__(nullable)
        self.name = "nullable_records" if nullable else "records"


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes, 7 bits each, low group first)."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    for shift in (7, 14, 21, 28):
        pos += 1
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
    raise MalformedMessageError(f"unsigned varint longer than 5 bytes at position {pos - 4}")


def write_uvarint(out: bytearray, value: int) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise EncodeError(f"{value} does not fit an unsigned varint")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class UnsignedVarint(KafkaType):
    name = "uvarint"

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        return read_uvarint(buf, pos)

    def write(self, out: bytearray, value: Any) -> None:
        write_uvarint(out, value)


class CompactString(KafkaType):
    """Unsigned varint length + 1 (0 is null where nullable), then UTF-8."""

    def __init__(self, nullable: bool = False) -> None:
        self.nullable = nullable
        self.name = "compact_nullable_string" if nullable else "compact_string"

    def as_nullable(self) -> KafkaType:
        return CompactString(nullable=True)

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        length, pos = read_uvarint(buf, pos)
        if length == 0:
            if self.nullable:
                return None, pos
            raise MalformedMessageError(f"null {self.name} at position {pos - 1}")
        end = _span(buf, pos, length - 1, self.name)
        return str(buf[pos:end], "utf-8"), end

    def write(self, out: bytearray, value: Any) -> None:
        if value is None and self.nullable:
            out.append(0)
            return
        data = value.encode("utf-8")
        write_uvarint(out, len(data) + 1)
        out += data


class TaggedFields(KafkaType):
    """A flexible version's tagged fields: a count, then (tag, size, bytes) in increasing tag
    order. None of ours are known, so they are kept raw as ``{tag: bytes}``."""

    name = "tagged_fields"

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_uvarint(buf, pos)
        _span(buf, pos, count * 2, "tagged fields")  # each takes at least its tag and size
        fields: dict[int, bytes] = {}
        last = -1
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            if tag <= last:
                raise MalformedMessageError(f"tagged field {tag} out of order after {last}")
            size, pos = read_uvarint(buf, pos)
            end = _span(buf, pos, size, f"tagged field {tag}")
            fields[tag] = bytes(buf[pos:end])
            last, pos = tag, end
        return fields, pos

    def write(self, out: bytearray, value: Any) -> None:
        fields = value or {}
        write_uvarint(out, len(fields))
        for tag in sorted(fields):
            write_uvarint(out, tag)
            write_uvarint(out, len(fields[tag]))
            out += fields[tag]


INT8_T = Fixed("int8", "b")
INT16_T = Fixed("int16", "h")
INT32_T = Fixed("int32", "i")
INT64_T = Fixed("int64", "q")
UINT32_T = Fixed("uint32", "I")
BOOLEAN = Fixed("boolean", "?")
STRING = String()
NULLABLE_STRING = String(nullable=True)
BYTES = Bytes()
NULLABLE_BYTES = Bytes(nullable=True)
RECORDS = Records(nullable=True)
UVARINT = UnsignedVarint()
COMPACT_STRING = CompactString()
COMPACT_NULLABLE_STRING = CompactString(nullable=True)
TAGGED_FIELDS = TaggedFields()
