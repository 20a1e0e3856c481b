"""Example bodies built from the API schemas, for round trips and for fuzzing."""

from __future__ import annotations

from typing import Any

from protocol.schema import Array, Bool, Bytes, FieldType, Int, Map, String, Struct

FLAVOURS = ("low", "high", "null")


def example(ftype: FieldType, version: int, flavour: str) -> Any:
    """A value of ``ftype``: "low" = minimum ints, empty strings; "high" = maximum ints, long
    non-ASCII strings, two array items; "null" = null wherever the type allows it."""
    nullable = getattr(ftype, "nullable", False)
    if flavour == "null" and nullable:
        return None
    if isinstance(ftype, Int):
        limit = 1 << (ftype.bits - 1)
        return {"low": -limit, "high": limit - 1, "null": 0}[flavour]
    if isinstance(ftype, Bool):
        return flavour == "high"
    if isinstance(ftype, String):
        return "ünïcødé-名前-" * 20 if flavour == "high" else ""
    if isinstance(ftype, Bytes):
        return bytes(range(256)) if flavour == "high" else b""
    if isinstance(ftype, Map):
        return {"cleanup_policy": "compact", "ü": ""} if flavour == "high" else {}
    if isinstance(ftype, Array):
        count = {"low": 1, "high": 2, "null": 0}[flavour]
        return [example(ftype.of, version, flavour) for _ in range(count)]
    if isinstance(ftype, Struct):
        return {f.name: example(f.type, version, flavour) for f in ftype.fields_for(version)}
    raise AssertionError(f"no example for {ftype!r}")
