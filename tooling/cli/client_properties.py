"""``-X KEY=VALUE`` of ``produce`` and ``consume``: a Producer or Consumer setting by its odradek
name or its Kafka name, its value converted to the type the client's keyword argument is
annotated with -- read from the client's signature, so a new setting needs no change here."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

from tooling.cli.args import key_value

#: Kafka's names for the client settings whose odradek name is not Kafka's with _ for .
_KAFKA_NAMES = {
    "batch.size": "batch_bytes",
    "buffer.memory": "buffer_bytes",
    "max.request.size": "max_request_bytes",
    "compression.type": "compression",
    "max.partition.fetch.bytes": "partition_fetch_bytes",
    "fetch.message.max.bytes": "max_partition_fetch_bytes",
}
#: settings the CLI has its own options for, or that are no text: not passed by -X
_NOT_PROPERTIES = {"bootstrap", "group_id", "partitioner"}


def client_property(client: type, role: str) -> Callable[[str], tuple[str, Any]]:
    """An argparse type for ``-X KEY=VALUE``: KEY is a keyword argument of ``client`` (or its
    Kafka name), VALUE converted to the type the argument is annotated with."""
    annotations = {
        name: str(parameter.annotation)
        for name, parameter in inspect.signature(client).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in _NOT_PROPERTIES
    }

    def parse(text: str) -> tuple[str, Any]:
        key, value = key_value(text)
        name = _KAFKA_NAMES.get(key, key.replace(".", "_").replace("-", "_"))
        if name not in annotations:
            raise argparse.ArgumentTypeError(
                f"unknown {role} property {key!r}; known: {', '.join(annotations)}"
            )
        try:
            return name, _convert_setting(value, annotations[name])
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{role} property {key!r}: {exc}") from None

    parse.__name__ = f"{role} property"
    return parse


def _convert_setting(text: str, annotation: str) -> Any:
    kinds = [kind.strip() for kind in annotation.split("|")]
    if "bool" in kinds:
        if text.lower() in ("true", "yes", "1"):
            return True
        if text.lower() in ("false", "no", "0"):
            return False
        raise ValueError(f"{text!r} is not true or false")
    for kind in kinds:
        if kind in ("int", "float"):
            try:
                return int(text)
            except ValueError:
                if kind == "float":
                    try:
                        return float(text)
                    except ValueError:
                        pass
        elif kind != "None":
            return text  # str, or a name the client parses itself (Codec, OffsetReset)
    names = {"int": "a whole number", "float": "a number"}
    wanted = " or ".join(names.get(k, k) for k in kinds if k != "None")
    raise ValueError(f"{text!r} is not {wanted}")
