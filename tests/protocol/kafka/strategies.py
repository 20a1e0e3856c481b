"""Hypothesis strategies generated from the Kafka schemas themselves: a value of every field of
one version, of the ranges its wire type holds, null where the field may be null."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from protocol.kafka.schema import Array, Struct
from protocol.kafka.types import Bytes, CompactString, KafkaType, String, TaggedFields

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def value_of(kind: KafkaType | Struct | Array, version: int, nullable: bool = False) -> Any:
    """A strategy for one value of ``kind`` at ``version``."""
    if isinstance(kind, Struct):
        return st.fixed_dictionaries({
            f.name: value_of(f.type, version, f.nullable_in(version))
            for f in kind.fields_in(version)
        })
    if isinstance(kind, Array):
        items = st.lists(value_of(kind.element, version), max_size=3)
        return items | st.none() if nullable or kind.nullable else items
    base = _primitive(kind)
    nullable = nullable or getattr(kind, "nullable", False)
    return base | st.none() if nullable else base


def _primitive(kind: KafkaType) -> Any:
    if kind.name in _INTS:
        bits = _INTS[kind.name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if kind.name in ("uint32", "uvarint"):
        return st.integers(0, 0xFFFFFFFF)
    if kind.name == "boolean":
        return st.booleans()
    if isinstance(kind, String | CompactString):
        return st.text(max_size=12)
    if isinstance(kind, Bytes):
        return st.binary(max_size=24)
    if isinstance(kind, TaggedFields):
        return st.dictionaries(st.integers(0, 300), st.binary(max_size=4), max_size=3)
    raise AssertionError(f"no strategy for {kind.name}")
