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
    ``version`` is the API version being checked: a Struct shows only the fields it has.
    ``path`` is where the value sits, for the error; None while it is not wanted (the first,
    fast pass of ``validate``), so no path string is built for a body that is valid."""

    name = ""

    def check(self, value: Any, path: str | None, version: int) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


class _Bad(Exception):
    def __init__(self, path: str | None, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Int(FieldType):
    bits: int

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"int{self.bits}"

    def check(self, value: Any, path: str | None, version: int) -> None:
        if type(value) is not int:
            raise _Bad(path, f"expected {self.name}, got {_kind(value)}")
        limit = 1 << (self.bits - 1)
        if not -limit <= value < limit:
            raise _Bad(path, f"{value} does not fit {self.name}")


@dataclass(frozen=True)
class Bool(FieldType):
    name = "bool"

    def check(self, value: Any, path: str | None, version: int) -> None:
        if type(value) is not bool:
            raise _Bad(path, f"expected bool, got {_kind(value)}")


@dataclass(frozen=True)
class String(FieldType):
    nullable: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return "string?" if self.nullable else "string"

    def check(self, value: Any, path: str | None, version: int) -> None:
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

    def check(self, value: Any, path: str | None, version: int) -> None:
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

    def check(self, value: Any, path: str | None, version: int) -> None:
        if value is None and self.nullable:
            return
        if not isinstance(value, list | tuple):
            raise _Bad(path, f"expected array, got {_kind(value)}")
        check = self.of.check
        if path is None:
            for item in value:
                check(item, None, version)
        else:
            for i, item in enumerate(value):
                check(item, f"{path}[{i}]", version)


@dataclass(frozen=True)
class Map(FieldType):
    """A map of string to string (topic configs)."""

    name = "{string: string}"

    def check(self, value: Any, path: str | None, version: int) -> None:
        if not isinstance(value, dict):
            raise _Bad(path, f"expected map, got {_kind(value)}")
        for k, v in value.items():
            if type(k) is not str or type(v) is not str:
                raise _Bad(None if path is None else f"{path}[{k!r}]",
                           "expected string keys and values")


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
    # fields_for's answers by version, and their names: computed once, not per value checked
    _by_version: dict[int, tuple[tuple[Field, ...], frozenset[str]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def fields_for(self, version: int) -> tuple[Field, ...]:
        return self._for_version(version)[0]

    def _for_version(self, version: int) -> tuple[tuple[Field, ...], frozenset[str]]:
        found = self._by_version.get(version)
        if found is None:
            wanted = tuple(f for f in self.fields if f.since <= version)
            found = self._by_version[version] = (wanted, frozenset(f.name for f in wanted))
        return found

    def check(self, value: Any, path: str | None, version: int) -> None:
        if not isinstance(value, dict):
            raise _Bad(path, f"expected map {self.name}, got {_kind(value)}")
        wanted, names = self._for_version(version)
        if len(value) != len(names) or not names.issuperset(value):
            for key in value:
                if key not in names:
                    raise _Bad(_join(path, str(key)), "unknown field")
        for f in wanted:
            if f.name not in value:
                raise _Bad(_join(path, f.name), "missing field")
            f.type.check(value[f.name], _join(path, f.name), version)


def _join(path: str | None, name: str) -> str | None:
    if path is None:
        return None
    return f"{path}.{name}" if path else name


def _kind(value: Any) -> str:
    return type(value).__name__


def validate(api: str, kind: str, version: int, schema: Struct, body: Any) -> Mapping[str, Any]:
    """Check ``body`` against ``schema`` at ``version``; raise SchemaError naming where it fails."""
    try:
        schema.check(body, None, version)
    except _Bad:
        try:  # again, naming the paths this time: the same check fails at the same place
            schema.check(body, "", version)
        except _Bad as bad:
            raise SchemaError(
                f"{api} v{version} {kind}: field {bad.path or '(body)'}: {bad.reason}"
            ) from None
        raise AssertionError("a body failed the check once and passed it twice") from None
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
