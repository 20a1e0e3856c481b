"""Broker settings: defaults, the four sources and their order, errors, and the docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.__main__ import build_parser
from broker.log import LogConfig
from broker.settings import (
    SETTINGS,
    BrokerSettings,
    SettingsError,
    load_settings,
    settings_markdown,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
README = Path(__file__).resolve().parents[2] / "README.md"


def test_defaults_are_the_embedded_broker() -> None:
    settings = load_settings()
    assert settings == BrokerSettings()
    assert settings.host == "127.0.0.1" and settings.port == 9092
    assert settings.data_dir == "./odradek-data"
    assert settings.auto_create_topics_enable is True
    assert settings.num_partitions == 1
    assert settings.broker_id is None
    assert settings.log == LogConfig()


def test_later_sources_win(tmp_path: Path) -> None:
    config = tmp_path / "odradek.toml"
    config.write_text('port = 1111\nnum_partitions = 3\nhost = "0.0.0.0"\nretention_ms = 5000\n')
    env = {"ODRADEK_PORT": "2222", "ODRADEK_AUTO_CREATE_TOPICS_ENABLE": "false",
           "ODRADEK_SEGMENT_BYTES": "4096"}
    settings = load_settings(config_file=config, env=env, overrides={"port": "3333"})
    assert settings.port == 3333  # flag over environment over file
    assert settings.num_partitions == 3  # file over default
    assert settings.auto_create_topics_enable is False  # environment over default
    assert settings.log.retention_ms == 5000
    assert settings.log.segment_bytes == 4096
    assert settings.advertised == "127.0.0.1"  # a wildcard host is not an address to give out


def test_unrelated_environment_variables_are_ignored() -> None:
    assert load_settings(env={"ODRADEK_BOOTSTRAP": "x:1", "PATH": "/bin"}) == BrokerSettings()


@pytest.mark.parametrize(
    ("toml", "env", "fragment"),
    [
        ("colour = 1\n", {}, "unknown setting 'colour'"),
        ("port = 70000\n", {}, "port: 70000 is not a TCP port"),
        ("[log]\nsegment_bytes = 1\n", {}, "log must be a single value"),
        ("port = \n", {}, "not valid TOML"),
        ("", {"ODRADEK_NUM_PARTITIONS": "0"}, "ODRADEK_NUM_PARTITIONS: 0 is below the minimum 1"),
        ("", {"ODRADEK_AUTO_CREATE_TOPICS_ENABLE": "maybe"}, "is not a boolean"),
        ("", {"ODRADEK_CLEANUP_POLICY": "shred"}, "ODRADEK_CLEANUP_POLICY"),
        ("", {"ODRADEK_LOG_LEVEL": "loud"}, "not one of debug"),
    ],
)
def test_bad_settings_name_the_setting_and_source(
    tmp_path: Path, toml: str, env: dict[str, str], fragment: str
) -> None:
    config = tmp_path / "odradek.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError, match=fragment.replace("(", r"\(")):
        load_settings(config_file=config, env=env)


def test_request_memory_must_hold_the_largest_request() -> None:
    env = {"ODRADEK_MAX_REQUEST_BYTES": "2048", "ODRADEK_QUEUED_MAX_REQUEST_BYTES": "2047"}
    with pytest.raises(SettingsError, match=r"queued_max_request_bytes .* at least max_request"):
        load_settings(env=env)
    env["ODRADEK_QUEUED_MAX_REQUEST_BYTES"] = "2048"
    assert load_settings(env=env).queued_max_request_bytes == 2048


def test_the_offsets_topic_must_fit_under_the_partition_limit() -> None:
    env = {"ODRADEK_MAX_PARTITIONS_PER_TOPIC": "4", "ODRADEK_OFFSETS_TOPIC_PARTITIONS": "8"}
    with pytest.raises(SettingsError, match=r"max_partitions_per_topic \(4\) must be at least "
                                            r"offsets_topic_partitions \(8\)"):
        load_settings(env=env)
    env["ODRADEK_OFFSETS_TOPIC_PARTITIONS"] = "4"
    assert load_settings(env=env).offsets_topic_partitions == 4


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(config_file=tmp_path / "absent.toml")


def test_command_line_flags_are_the_listed_ones() -> None:
    args = build_parser().parse_args(
        ["start", "--host", "h", "--port", "0", "--data-dir", "d", "--broker-id", "7",
         "--config", "c.toml"]
    )
    assert (args.host, args.port, args.data_dir, args.broker_id) == ("h", "0", "d", "7")
    assert {s.flag for s in SETTINGS if s.flag} == {
        "--host", "--port", "--data-dir", "--broker-id", "--zookeeper-connect", "--broker-rack"
    }


def test_operations_doc_lists_every_setting() -> None:
    assert settings_markdown() in DOC.read_text(), (
        "docs/operations.md is out of date: paste broker.settings.settings_markdown() into it"
    )


def test_readme_sends_readers_to_the_settings_table() -> None:
    """README.md keeps a short path: the table itself lives in docs/operations.md only, so
    there is one copy to keep up to date."""
    readme = README.read_text()
    assert "(docs/operations.md#settings)" in readme
    assert "\n## Settings\n" in DOC.read_text()
    assert settings_markdown().splitlines()[0] not in readme
