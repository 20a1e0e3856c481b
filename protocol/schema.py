"""Field tables for request and response bodies, and the validator that checks them.

A body is a msgpack map. Each API declares its fields once, as a table of ``Field`` rows with the
versions they exist in (kafka-python's way, not a class per version). ``Schema.validate`` checks
field names and types recursively and raises ``SchemaError`` naming the API, version and the
path of the offending field, so nothing downstream ever sees a malformed body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import SchemaError


class FieldType:
    """A wire type. ``check`` raises ``_Bad`` with a reason; ``describe`` names it in the docs.
    ``version`` is the API version being checked: a Struct shows only the fields it has."""

    name = ""

    def check(self, value: Any, path: str, version: int) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


class _Bad(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Int(FieldType):
    bits: int

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"int{self.bits}"

    def check(self, value: Any, path: str, version: int) -> None:
        if type(value) is not int:
            raise _Bad(path, f"expected {self.name}, got {_kind(value)}")
        limit = 1 << (self.bits - 1)
        if not -limit <= value < limit:
            raise _Bad(path, f"{value} does not fit {self.name}")


@dataclass(frozen=True)
class Bool(FieldType):
    name = "bool"

    def check(self, value: Any, path: str, version: int) -> None:
        if type(value) is not bool:
            raise _Bad(path, f"expected bool, got {_kind(value)}")


@dataclass(frozen=True)
class String(FieldType):
    nullable: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return "string?" if self.nullable else "string"

    def check(self, value: Any, path: str, version: int) -> None:
        if value is None and self.nullable:
            return
        if type(value) is not str:
            raise _Bad(path, f"expected {self.name}, got {_kind(value)}")


@dataclass(frozen=True)
class Bytes(FieldType):
    nullable: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return "bytes?" if self.nullable else "bytes"

    def check(self, value: Any, path: str, version: int) -> None:
        if value is None and self.nullable:
            return
        if not isinstance(value, bytes | bytearray | memoryview):
            raise _Bad(path, f"expected {self.name}, got {_kind(value)}")


@dataclass(frozen=True)
class Array(FieldType):
    of: FieldType
    nullable: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"[{self.of.describe()}]" + ("?" if self.nullable else "")

    def describe(self) -> str:
        return self.name

    def check(self, value: Any, path: str, version: int) -> None:
        if value is None and self.nullable:
            return
        if not isinstance(value, list | tuple):
            raise _Bad(path, f"expected array, got {_kind(value)}")
        for i, item in enumerate(value):
            self.of.check(item, f"{path}[{i}]", version)


@dataclass(frozen=True)
class Map(FieldType):
    """A map of string to string (topic configs)."""

    name = "{string: string}"

    def check(self, value: Any, path: str, version: int) -> None:
        if not isinstance(value, dict):
            raise _Bad(path, f"expected map, got {_kind(value)}")
        for k, v in value.items():
            if type(k) is not str or type(v) is not str:
                raise _Bad(f"{path}[{k!r}]", "expected string keys and values")


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    doc: str = ""
    since: int = 0  # first version that has this field


@dataclass(frozen=True)
class Struct(FieldType):
    """A map with named fields. ``name`` is used in docs (e.g. ``FetchPartition``)."""

    name: str
    fields: tuple[Field, ...] = field(default=())

    def fields_for(self, version: int) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.since <= version)

    def check(self, value: Any, path: str, version: int) -> None:
        if not isinstance(value, dict):
            raise _Bad(path, f"expected map {self.name}, got {_kind(value)}")
        wanted = self.fields_for(version)
        names = {f.name for f in wanted}
        for key in value:
            if key not in names:
                raise _Bad(_join(path, str(key)), "unknown field")
        for f in wanted:
            if f.name not in value:
                raise _Bad(_join(path, f.name), "missing field")
            f.type.check(value[f.name], _join(path, f.name), version)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _kind(value: Any) -> str:
    return type(value).__name__


def validate(api: str, kind: str, version: int, schema: Struct, body: Any) -> Mapping[str, Any]:
    """Check ``body`` against ``schema`` at ``version``; raise SchemaError naming where it fails."""
    try:
        schema.check(body, "", version)
    except _Bad as bad:
        raise SchemaError(
            f"{api} v{version} {kind}: field {bad.path or '(body)'}: {bad.reason}"
        ) from None
    return body  # type: ignore[no-any-return]


def for_version(type_: FieldType, value: Any, version: int) -> Any:
    """``value`` with only the fields ``type_`` has at ``version``, recursively: an answer
    built for an API's newest version, trimmed for a client that asked an older one (which
    would refuse the fields it does not know). Fields missing from ``value`` stay missing."""
    if isinstance(type_, Struct) and isinstance(value, dict):
        wanted = type_.fields_for(version)
        return {
            f.name: for_version(f.type, value[f.name], version)
            for f in wanted if f.name in value
        }
    if isinstance(type_, Array) and isinstance(value, list | tuple):
        return [for_version(type_.of, item, version) for item in value]
    return value


def structs_in(schema: Struct) -> Sequence[Struct]:
    """Every nested Struct of a schema, outermost first, each once (for the docs)."""
    seen: list[Struct] = []

    def walk(s: Struct) -> None:
        if s in seen:
            return
        seen.append(s)
        for f in s.fields:
            t = f.type
            while isinstance(t, Array):
                t = t.of
            if isinstance(t, Struct):
                walk(t)

    walk(schema)
    return seen
