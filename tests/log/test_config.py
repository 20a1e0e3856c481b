from __future__ import annotations

import pytest

from broker.log import SETTINGS, LogConfig


def test_defaults_match_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.index_interval_bytes == 4096
    assert config.flush_messages is None and config.flush_ms is None
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes is None
    assert config.cleanup_policy == "delete"
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"


@pytest.mark.parametrize("name", ["segment_bytes", "segment.bytes", "log.segment.bytes"])
def test_from_mapping_accepts_our_and_kafkas_names(name: str) -> None:
    assert LogConfig.from_mapping({name: "2048"}).segment_bytes == 2048


def test_from_mapping_parses_every_kind_of_value() -> None:
    config = LogConfig.from_mapping(
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.25",
            "retention.ms": "-1",
            "flush.messages": "10000",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert config.compacted
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.retention_ms is None
    assert config.flush_messages == 10000
    assert config.log_append_time


def test_from_mapping_starts_from_the_base() -> None:
    base = LogConfig(segment_bytes=4096, retention_ms=None)
    config = LogConfig.from_mapping({"flush.ms": "1000"}, base)
    assert (config.segment_bytes, config.retention_ms, config.flush_ms) == (4096, None, 1000)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"segment.byte": "1"}, "segment.byte"),
        ({"segment.bytes": "big"}, "segment_bytes"),
        ({"segment.bytes": "1"}, "segment_bytes"),
        ({"segment.bytes": str(1 << 31)}, "segment_bytes"),
        ({"cleanup.policy": "shred"}, "cleanup_policy"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min_cleanable_dirty_ratio"),
        ({"message.timestamp.type": "Now"}, "message_timestamp_type"),
        ({"flush.messages": "0"}, "flush_messages"),
        ({"delete.retention.ms": "none"}, "delete_retention_ms"),
    ],
)
def test_bad_settings_raise_naming_the_setting(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        LogConfig.from_mapping(settings)


def test_every_field_has_exactly_one_setting_row() -> None:
    fields = list(LogConfig.__dataclass_fields__)
    assert [s.name for s in SETTINGS] == fields
