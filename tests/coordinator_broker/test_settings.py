"""The coordinator's broker settings: read like every other setting, checked together."""

from __future__ import annotations

import pytest

from broker.settings import BrokerSettings, SettingsError, load_settings
from coordinator import CoordinatorConfig


def test_defaults_are_the_coordinators_own() -> None:
    assert BrokerSettings().coordinator_config() == CoordinatorConfig()


def test_settings_reach_the_coordinator_config() -> None:
    settings = load_settings(env={
        "ODRADEK_GROUP_MIN_SESSION_TIMEOUT_MS": "100",
        "ODRADEK_PARTITION_ASSIGNMENT_STRATEGIES": " sticky, range ,sticky",
        "ODRADEK_OFFSETS_TOPIC_PARTITIONS": "4",
        "ODRADEK_OFFSETS_RETENTION_CHECK_INTERVAL_MS": "250",
    })
    config = settings.coordinator_config()
    assert config.group_min_session_timeout_ms == 100
    assert config.partition_assignment_strategies == ("sticky", "range")
    assert config.offsets_topic_partitions == 4
    assert config.offsets_retention_check_interval_ms == 250


@pytest.mark.parametrize(("env", "fragment"), [
    ({"ODRADEK_PARTITION_ASSIGNMENT_STRATEGIES": "range,fair"}, "must name strategies among"),
    ({"ODRADEK_PARTITION_ASSIGNMENT_STRATEGIES": ","}, "ODRADEK_PARTITION_ASSIGNMENT_STRATEGIES"),
    ({"ODRADEK_GROUP_MIN_SESSION_TIMEOUT_MS": "400000"}, "group_min_session_timeout_ms <="),
    ({"ODRADEK_OFFSETS_TOPIC_PARTITIONS": "0"}, "below the minimum 1"),
])
def test_bad_coordinator_settings_are_refused(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        load_settings(env=env)
