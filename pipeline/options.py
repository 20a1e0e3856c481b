"""The data source's options, parsed once and checked with errors that name the option.

Names and meanings are those of Spark's own Kafka source, so a Spark user needs nothing new.
Spark hands options over case-insensitively (its option map lower-cases the keys); errors use
the spelling below. Unlike Spark's Kafka source, an option this source does not know, or one
that does not apply to the operation (``endingOffsets`` on a stream, ``subscribe`` on a write),
is an error rather than silently ignored: a misspelt option should not change what a job reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Literal

from client.errors import ConfigError
from client.network import parse_bootstrap
from client.offsets import EARLIEST, LATEST
from client.producer import parse_acks
from client.records import TopicPartition
from client.security import PROPERTY_KEYS, SecurityConfig
from pipeline.offsets import OffsetsFormatError, offsets_from_json
from protocol.compression import BatchCodec


class OptionError(ValueError):
    """An option is missing, unknown, misplaced or malformed; the message names it."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"option '{option}': {problem}")
        self.option = option


class Operation(Enum):
    BATCH_READ = "batch read"
    STREAM_READ = "streaming read"
    WRITE = "write"


_READS = frozenset({Operation.BATCH_READ, Operation.STREAM_READ})
_ALL = frozenset(Operation)

# Every option, with the operations that accept it.
OPTIONS: dict[str, frozenset[Operation]] = {
    "bootstrap.servers": _ALL,
    "kafka.bootstrap.servers": _ALL,
    "subscribe": _READS,
    "subscribePattern": _READS,
    "assign": _READS,
    "startingOffsets": _READS,
    "endingOffsets": frozenset({Operation.BATCH_READ}),
    "minPartitions": _READS,
    "failOnDataLoss": _READS,
    "includeHeaders": _READS,
    "kafkaConsumer.pollTimeoutMs": _READS,
    "maxOffsetsPerTrigger": frozenset({Operation.STREAM_READ}),
    "groupId": frozenset({Operation.STREAM_READ}),
    "topic": frozenset({Operation.WRITE}),
    "kafka.acks": frozenset({Operation.WRITE}),
    "kafka.compression.type": frozenset({Operation.WRITE}),
    "kafka.linger.ms": frozenset({Operation.WRITE}),
    "kafka.batch.size": frozenset({Operation.WRITE}),
    # security, as Spark's Kafka source passes them to its clients (docs/security.md)
    **{f"kafka.{key}": _ALL for key in PROPERTY_KEYS},
}
_CANONICAL = {name.lower(): name for name in OPTIONS}
# Spark's own options, which it passes on to the source with the user's; not ours to check.
_SPARKS_OWN = frozenset({"checkpointlocation"})


@dataclass(frozen=True)
class Subscribe:
    option: ClassVar[str] = "subscribe"
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    option: ClassVar[str] = "subscribePattern"
    pattern: re.Pattern[str]

    def matches(self, topic: str) -> bool:
        """A whole-name match, as Java's ``Pattern.matcher(topic).matches()`` in Spark."""
        return self.pattern.fullmatch(topic) is not None


@dataclass(frozen=True)
class Assign:
    option: ClassVar[str] = "assign"
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign

# "earliest", "latest", or an offset per partition (EARLIEST = -2 and LATEST = -1 allowed).
OffsetSpec = Literal["earliest", "latest"] | Mapping[TopicPartition, int]


_POLL_TIMEOUT_MS = 120_000  # Spark's default: spark.network.timeout
_BATCH_BYTES = 16_384  # the Kafka producer's batch.size


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec  # "latest" for streams: they have no end
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    group_id: str | None
    poll_timeout_ms: int
    security: SecurityConfig = field(default_factory=SecurityConfig)
    include_headers: bool = False  # the ``headers`` column


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None = None
    acks: int = -1
    compression: BatchCodec = BatchCodec.NONE
    linger_ms: int = 0
    batch_bytes: int = _BATCH_BYTES
    security: SecurityConfig = field(default_factory=SecurityConfig)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    operation = Operation.STREAM_READ if streaming else Operation.BATCH_READ
    given = _canonical(options, operation)
    starting = _offset_spec(given, "startingOffsets", "latest" if streaming else "earliest")
    ending = _offset_spec(given, "endingOffsets", "latest")
    if not streaming:
        # A batch query has to know where it starts and ends before it runs (Spark's rule).
        if starting == "latest" or (not isinstance(starting, str) and LATEST in starting.values()):
            raise OptionError("startingOffsets", "latest (-1) is not allowed in a batch query")
        if ending == "earliest" or (not isinstance(ending, str) and EARLIEST in ending.values()):
            raise OptionError("endingOffsets", "earliest (-2) is not allowed in a batch query")
    group_id = given.get("groupId")
    if group_id is not None and not group_id.strip():
        raise OptionError("groupId", "must not be empty")
    return ReadOptions(
        bootstrap=_bootstrap(given),
        subscription=_subscription(given),
        starting=starting,
        ending=ending,
        min_partitions=_int(given, "minPartitions", low=1),
        max_offsets_per_trigger=_int(given, "maxOffsetsPerTrigger", low=1),
        fail_on_data_loss=_bool(given, "failOnDataLoss", default=True),
        group_id=group_id,
        poll_timeout_ms=_int(given, "kafkaConsumer.pollTimeoutMs", low=1) or _POLL_TIMEOUT_MS,
        security=_security(given),
        include_headers=_bool(given, "includeHeaders", default=False),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    given = _canonical(options, Operation.WRITE)
    topic = given.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "must not be empty")
    try:
        acks = parse_acks(given.get("kafka.acks", "all"))
    except ConfigError as exc:
        raise OptionError("kafka.acks", str(exc)) from None
    try:
        compression = BatchCodec.parse(given.get("kafka.compression.type", "none"))
    except ValueError as exc:
        raise OptionError("kafka.compression.type", str(exc)) from None
    return WriteOptions(
        bootstrap=_bootstrap(given),
        topic=topic,
        acks=acks,
        compression=compression,
        linger_ms=_int(given, "kafka.linger.ms", low=0) or 0,
        batch_bytes=_int(given, "kafka.batch.size", low=1) or _BATCH_BYTES,
        security=_security(given),
    )


# ------------------------------------------------------------------------------------- parts


def _canonical(options: Mapping[str, str], operation: Operation) -> dict[str, str]:
    """The given options under their canonical names; unknown or misplaced ones raise."""
    given = {}
    for key, value in options.items():
        if key.lower() in _SPARKS_OWN:
            continue
        name = _CANONICAL.get(key.lower())
        if name is None:
            known = ", ".join(n for n, ops in OPTIONS.items() if operation in ops)
            raise OptionError(key, f"unknown option for a {operation.value}; known: {known}")
        if operation not in OPTIONS[name]:
            allowed = " or ".join(sorted(op.value for op in OPTIONS[name]))
            raise OptionError(name, f"applies to a {allowed}, not a {operation.value}")
        given[name] = value
    return given


def _security(given: dict[str, str]) -> SecurityConfig:
    """``kafka.security.protocol``, ``kafka.sasl.jaas.config`` ...: the clients' security."""
    keys = {name: name.removeprefix("kafka.") for name in given
            if name.removeprefix("kafka.") in PROPERTY_KEYS}
    try:
        return SecurityConfig.from_mapping({key: given[name] for name, key in keys.items()})
    except ConfigError as exc:
        raise OptionError(next(iter(keys), "kafka.security.protocol"), str(exc)) from None


def _bootstrap(given: dict[str, str]) -> str:
    names = [n for n in ("bootstrap.servers", "kafka.bootstrap.servers") if n in given]
    if not names:
        raise OptionError("bootstrap.servers", "is required (HOST:PORT[,HOST:PORT...])")
    if len(names) == 2:
        raise OptionError("kafka.bootstrap.servers", "give it or bootstrap.servers, not both")
    value = given[names[0]]
    try:
        parse_bootstrap(value)
    except ValueError as exc:
        raise OptionError(names[0], str(exc)) from None
    return value


def _subscription(given: dict[str, str]) -> Subscription:
    names = [n for n in ("assign", "subscribe", "subscribePattern") if n in given]
    if len(names) != 1:
        detail = "none was given" if not names else f"{' and '.join(names)} were both given"
        raise OptionError(
            names[-1] if names else "subscribe",
            f"give exactly one of assign, subscribe, subscribePattern; {detail}",
        )
    name = names[0]
    value = given[name]
    if name == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise OptionError(name, "needs a comma-separated list of topics")
        return Subscribe(topics)
    if name == "subscribePattern":
        try:
            return SubscribePattern(re.compile(value))
        except re.error as exc:
            raise OptionError(name, f"invalid regular expression ({exc})") from None
    return Assign(_assignment(value))


def _assignment(value: str) -> tuple[TopicPartition, ...]:
    """``{"topicA": [0, 1], "topicB": [2]}`` -> its topic partitions."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(
            "assign", f'malformed JSON ({exc}); expected {{"topic": [0, 1]}}'
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError("assign", 'expected a non-empty object {"topic": [0, 1]}')
    partitions: list[TopicPartition] = []
    for topic, numbers in parsed.items():
        if (
            not topic
            or not isinstance(numbers, list)
            or not numbers
            or not all(type(n) is int and n >= 0 for n in numbers)
        ):
            raise OptionError(
                "assign", f"topic {topic!r}: expected a non-empty list of partition numbers"
            )
        partitions.extend(TopicPartition(topic, n) for n in numbers)
    return tuple(dict.fromkeys(partitions))


def _offset_spec(given: dict[str, str], name: str, default: str) -> OffsetSpec:
    value = given.get(name, default).strip()
    if value.lower() in ("earliest", "latest"):
        return "earliest" if value.lower() == "earliest" else "latest"
    try:
        offsets = offsets_from_json(value, lowest=EARLIEST)
        if not offsets:
            raise OffsetsFormatError("no partitions given")
    except OffsetsFormatError as exc:
        raise OptionError(
            name,
            f'{exc}; expected earliest, latest or JSON {{"topic": {{"0": offset}}}} '
            "(-2 earliest, -1 latest)",
        ) from None
    return offsets


def _int(given: dict[str, str], name: str, *, low: int) -> int | None:
    value = given.get(name)
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise OptionError(name, f"{value!r} is not an integer") from None
    if number < low:
        raise OptionError(name, f"{number} is invalid; it must be at least {low}")
    return number


def _bool(given: dict[str, str], name: str, *, default: bool) -> bool:
    value = given.get(name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OptionError(name, f"{value!r} is not true or false")
