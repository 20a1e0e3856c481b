"""Declarative message schemas and the compiler that turns one version of them into a codec.

A ``Struct`` is a table of ``Field`` rows, each with the versions it exists in (``since``,
``until``) and the versions from which it may be null, the way Kafka's
``common/message/*.json`` describe a message. ``compile_struct(struct, version)`` walks the table
once and returns a reader and a writer for that version only: consecutive fixed-width fields
become one precompiled ``struct.Struct``, nested arrays their own compiled element codec. Nothing
is written per request or per version by hand, so a field added to a table is read, written and
advertised in every version it names, and nowhere else.

Values are plain dicts keyed by the fields' snake_case names. A decoded dict holds exactly the
fields of its version; an encoder ignores keys its version lacks, and takes a field's default
when the key is absent and the row gives one (so one dict can be encoded at any version).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from protocol.kafka.errors import EncodeError, MalformedMessageError
from protocol.kafka.types import INT32, KafkaType, read_uvarint, write_uvarint

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]
_Step = Callable[[memoryview, int, dict[str, Any]], int]
_WriteStep = Callable[[bytearray, dict[str, Any]], None]

REQUIRED: Any = object()  # a field's default when it has none: the key must be there
LAST = 0x7FFF  # "until" of a field still present in the newest version


@dataclass(frozen=True)
class Field:
    name: str
    type: KafkaType | Struct | Array
    since: int = 0
    until: int = LAST
    nullable_since: int | None = None
    default: Any = REQUIRED

    def exists_in(self, version: int) -> bool:
        return self.since <= version <= self.until

    def nullable_in(self, version: int) -> bool:
        return self.nullable_since is not None and version >= self.nullable_since


class Struct:
    """A message or a nested struct: its fields in wire order."""

    def __init__(self, *fields: Field) -> None:
        self.fields = fields

    def fields_in(self, version: int) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.exists_in(version))


@dataclass(frozen=True)
class Array:
    """An int32 count (-1 is null where nullable) then the elements; ``compact`` for the
    flexible versions' unsigned varint count + 1 (0 is null)."""

    element: KafkaType | Struct
    nullable: bool = False
    compact: bool = False

    def as_nullable(self) -> Array:
        return Array(self.element, True, self.compact)


def compile_struct(schema: Struct, version: int) -> tuple[Reader, Writer]:
    """The reader and the writer of ``schema`` at ``version``."""
    read_steps: list[_Step] = []
    write_steps: list[_WriteStep] = []
    run: list[Field] = []  # consecutive fixed-width fields not yet fused
    for f in schema.fields_in(version):
        kind = f.type
        if f.nullable_in(version) and not isinstance(kind, Struct):
            kind = kind.as_nullable()
        if isinstance(kind, KafkaType) and kind.fixed is not None:
            run.append(f)
            continue
        if run:
            _fuse(run, read_steps, write_steps)
            run = []
        reader, writer = compile_type(kind, version)
        read_steps.append(_read_step(f.name, reader))
        write_steps.append(_write_step(f, writer))
    if run:
        _fuse(run, read_steps, write_steps)
    return _struct_reader(read_steps), _struct_writer(write_steps)


def decode_with(reader: Reader, buf: memoryview, pos: int, what: str) -> tuple[Any, int]:
    """``reader``'s value at ``pos``, every way the bytes can fail to parse made one error
    naming ``what`` was read: struct's short reads, invalid UTF-8, a varint past the end."""
    try:
        return reader(buf, pos)
    except MalformedMessageError as exc:
        raise MalformedMessageError(f"{what}: {exc}") from None
    except (struct.error, ValueError, IndexError) as exc:
        raise MalformedMessageError(f"{what}: {exc}") from None


def encode_with(writer: Writer, value: Any, out: bytearray, what: str) -> None:
    """``writer`` applied, a value that does not fit made one error naming ``what``."""
    try:
        writer(out, value)
    except EncodeError as exc:
        raise EncodeError(f"{what}: {exc}") from None
    except (struct.error, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise EncodeError(f"{what}: {type(exc).__name__}: {exc}") from None


def compile_type(kind: KafkaType | Struct | Array, version: int) -> tuple[Reader, Writer]:
    if isinstance(kind, Struct):
        return compile_struct(kind, version)
    if isinstance(kind, Array):
        return _compile_array(kind, version)
    return kind.read, kind.write


def _struct_reader(steps: list[_Step]) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        out: dict[str, Any] = {}
        for step in steps:
            pos = step(buf, pos, out)
        return out, pos

    return read


def _struct_writer(steps: list[_WriteStep]) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        for step in steps:
            step(out, value)

    return write


def _getter(f: Field) -> Callable[[dict[str, Any]], Any]:
    if f.default is REQUIRED:
        return itemgetter(f.name)
    name, default = f.name, f.default
    return lambda value: value.get(name, default)


def _fuse(
    run: list[Field], read_steps: list[_Step], write_steps: list[_WriteStep]
) -> None:
    """One ``struct.Struct`` for a run of fixed-width fields, read and written in one call."""
    fmt = ">" + "".join(
        (f.type.fixed.format[1:] if isinstance(f.type, KafkaType) and f.type.fixed else "")
        for f in run
    )
    packer = struct.Struct(fmt)
    names = tuple(f.name for f in run)
    getters = tuple(_getter(f) for f in run)
    size = packer.size

    def read(buf: memoryview, pos: int, out: dict[str, Any]) -> int:
        out.update(zip(names, packer.unpack_from(buf, pos), strict=True))
        return pos + size

    def write(out: bytearray, value: dict[str, Any]) -> None:
        out += packer.pack(*[get(value) for get in getters])

    read_steps.append(read)
    write_steps.append(write)


def _read_step(name: str, reader: Reader) -> _Step:
    def read(buf: memoryview, pos: int, out: dict[str, Any]) -> int:
        out[name], pos = reader(buf, pos)
        return pos

    return read


def _write_step(f: Field, writer: Writer) -> _WriteStep:
    get = _getter(f)

    def write(out: bytearray, value: dict[str, Any]) -> None:
        writer(out, get(value))

    return write


def _min_size(kind: KafkaType | Struct | Array, version: int) -> int:
    """The fewest bytes one value takes: an array's count is bounded by the bytes left / this."""
    if isinstance(kind, KafkaType):
        return kind.min_size
    if isinstance(kind, Array):
        return 1 if kind.compact else 4
    return sum(_min_size(f.type, version) for f in kind.fields_in(version))


def _compile_array(kind: Array, version: int) -> tuple[Reader, Writer]:
    element = kind.element
    min_size = max(1, _min_size(element, version))
    read_count, write_count = _counter(kind)
    if isinstance(element, KafkaType) and element.fixed is not None:
        return _fixed_array(element.fixed.format[1:], read_count, write_count, min_size)
    read_one, write_one = compile_type(element, version)

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_count(buf, pos, min_size)
        if count is None:
            return None, pos
        items = []
        for _ in range(count):
            item, pos = read_one(buf, pos)
            items.append(item)
        return items, pos

    def write(out: bytearray, value: Any) -> None:
        write_count(out, value)
        if value is not None:
            for item in value:
                write_one(out, item)

    return read, write


_Counter = tuple[
    Callable[[memoryview, int, int], tuple[int | None, int]],
    Callable[[bytearray, Any], None],
]


def _counter(kind: Array) -> _Counter:
    """How an array's element count is read (None for null) and written."""
    nullable, compact = kind.nullable, kind.compact

    def read_count(buf: memoryview, pos: int, min_size: int) -> tuple[int | None, int]:
        if compact:
            count, pos = read_uvarint(buf, pos)
            count -= 1
        else:
            (count,) = INT32.unpack_from(buf, pos)
            pos += 4
        if count == -1 and nullable:
            return None, pos
        if count < 0 or count * min_size > len(buf) - pos:
            raise MalformedMessageError(
                f"array of {count} elements at position {pos} does not fit the "
                f"{len(buf) - pos} bytes left"
            )
        return count, pos

    def write_count(out: bytearray, value: Any) -> None:
        count = -1 if value is None and nullable else len(value)
        if compact:
            write_uvarint(out, count + 1)
        else:
            out += INT32.pack(count)

    return read_count, write_count


def _fixed_array(
    code: str,
    read_count: Callable[[memoryview, int, int], tuple[int | None, int]],
    write_count: Callable[[bytearray, Any], None],
    size: int,
) -> tuple[Reader, Writer]:
    """An array of fixed-width numbers: one ``unpack_from``/``pack`` for all of them."""

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_count(buf, pos, size)
        if count is None:
            return None, pos
        return list(struct.unpack_from(f">{count}{code}", buf, pos)), pos + count * size

    def write(out: bytearray, value: Any) -> None:
        write_count(out, value)
        if value is not None:
            out += struct.pack(f">{len(value)}{code}", *value)

    return read, write
