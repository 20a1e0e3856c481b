"""The storage settings of one partition log, with their Kafka names.

``SETTINGS`` is the one table of them: field name, Kafka's topic-level and broker-level names and
a one-line meaning. ``LogConfig.from_mapping`` reads topic configs (strings, as CreateTopics
carries them) by any of the three names; docs/storage.md is checked against the table by a test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Index entries hold 32-bit positions, so one segment is at most 2 GiB - 1 (Kafka: an Int).
MAX_SEGMENT_BYTES = (1 << 31) - 1
MIN_SEGMENT_BYTES = 14  # Kafka's floor: room for one entry header


@dataclass(frozen=True)
class Setting:
    name: str
    topic_name: str  # Kafka's topic-level name (CreateTopics configs); "" when it has none
    broker_name: str  # Kafka's broker-level name (server.properties)
    meaning: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "segment_bytes",
        "segment.bytes",
        "log.segment.bytes",
        "Roll to a new segment before the active one would exceed this size.",
    ),
    Setting(
        "segment_ms",
        "segment.ms",
        "log.roll.ms",
        "Roll to a new segment once the active one has held data this long.",
    ),
    Setting(
        "index_interval_bytes",
        "index.interval.bytes",
        "log.index.interval.bytes",
        "Bytes of log between two offset-index entries (0: index every entry).",
    ),
    Setting(
        "flush_messages",
        "flush.messages",
        "log.flush.interval.messages",
        "fsync after this many messages; none leaves flushing to the OS.",
    ),
    Setting(
        "flush_ms",
        "flush.ms",
        "log.flush.interval.ms",
        "fsync once unflushed data is this old; none leaves flushing to the OS.",
    ),
    Setting(
        "retention_ms",
        "retention.ms",
        "log.retention.ms",
        "Delete closed segments whose newest message is older than this; none keeps them.",
    ),
    Setting(
        "retention_bytes",
        "retention.bytes",
        "log.retention.bytes",
        "Delete the oldest closed segments while the log stays at least this big.",
    ),
    Setting(
        "cleanup_policy",
        "cleanup.policy",
        "log.cleanup.policy",
        "delete (retention by age and size) or compact (newest message per key).",
    ),
    Setting(
        "delete_retention_ms",
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        "How long compaction keeps a tombstone (a null value) before removing it.",
    ),
    Setting(
        "min_cleanable_dirty_ratio",
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        "Compact once uncompacted bytes are at least this share of the closed segments.",
    ),
    Setting(
        "cleaner_dedupe_buffer_bytes",
        "",  # Kafka has no topic-level name: a topic may still set it by ours
        "log.cleaner.dedupe.buffer.size",
        "Memory for compaction's key map (key bytes + 100 per key); more keys: more passes.",
    ),
    Setting(
        "max_message_bytes",
        "max.message.bytes",
        "message.max.bytes",
        "The largest message set one append accepts.",
    ),
    Setting(
        "message_timestamp_type",
        "message.timestamp.type",
        "log.message.timestamp.type",
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
    ),
    Setting(
        "producer_id_expiration_ms",
        "",  # broker-level in Kafka (3.4+); a topic may still set it by ours
        "producer.id.expiration.ms",
        "Forget an idempotent producer's sequences once it has written nothing this long.",
    ),
)

_BY_NAME: dict[str, Setting] = {}
for _s in SETTINGS:
    for _alias in (_s.name, _s.topic_name, _s.broker_name):
        if _alias:
            _BY_NAME[_alias] = _s

_NONE_WORDS = ("", "none", "null", "-1")


@dataclass(frozen=True)
class LogConfig:
    """Storage settings of one partition log (see ``SETTINGS`` and docs/storage.md)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    flush_messages: int | None = None
    flush_ms: int | None = None
    retention_ms: int | None = 7 * 24 * 3600 * 1000
    retention_bytes: int | None = None
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    cleaner_dedupe_buffer_bytes: int = 128 * 1024 * 1024
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    producer_id_expiration_ms: int = 86_400_000

    def __post_init__(self) -> None:
        _check_range("segment_bytes", self.segment_bytes, MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES)
        _check_range("segment_ms", self.segment_ms, 1)
        _check_range("index_interval_bytes", self.index_interval_bytes, 0)
        _check_range("flush_messages", self.flush_messages, 1, optional=True)
        _check_range("flush_ms", self.flush_ms, 0, optional=True)
        _check_range("retention_ms", self.retention_ms, 0, optional=True)
        _check_range("retention_bytes", self.retention_bytes, 0, optional=True)
        _check_range("delete_retention_ms", self.delete_retention_ms, 0)
        _check_range("max_message_bytes", self.max_message_bytes, 0)
        _check_range("cleaner_dedupe_buffer_bytes", self.cleaner_dedupe_buffer_bytes, 1)
        _check_range("producer_id_expiration_ms", self.producer_id_expiration_ms, 1)
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise ValueError(f"min_cleanable_dirty_ratio must be within [0, 1], got {ratio!r}")
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(
                f"cleanup_policy must be one of {', '.join(CLEANUP_POLICIES)}, "
                f"got {self.cleanup_policy!r}"
            )
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"message_timestamp_type must be one of {', '.join(TIMESTAMP_TYPES)}, "
                f"got {self.message_timestamp_type!r}"
            )

    @property
    def compacted(self) -> bool:
        return self.cleanup_policy == "compact"

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """``base`` (or the defaults) with ``settings`` applied. Names may be ours
        (``segment_bytes``) or Kafka's (``segment.bytes``, ``log.segment.bytes``); values are
        strings. An unknown name or a bad value raises ValueError naming the setting."""
        base = base or cls()
        changes: dict[str, Any] = {}
        for key, text in settings.items():
            setting = _BY_NAME.get(key)
            if setting is None:
                raise ValueError(f"unknown log setting {key!r}")
            changes[setting.name] = _parse(setting.name, str(text))
        return dataclasses.replace(base, **changes)


def _parse(name: str, text: str) -> object:
    """A setting's string as its field's type (the annotation: ``int | None``, ``str``...)."""
    annotation = str(_FIELD_TYPES[name])
    word = text.strip()
    if annotation.endswith("| None") and word.lower() in _NONE_WORDS:
        return None
    try:
        if annotation.startswith("str"):
            return word
        if annotation.startswith("float"):
            return float(word)
        return int(word)
    except ValueError:
        raise ValueError(f"log setting {name}: {text!r} is not a valid value") from None


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(LogConfig)}


def _check_range(
    name: str, value: object, low: int, high: int | None = None, *, optional: bool = False
) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bounds}, got {value}")
