"""Topic configs on a single broker: IncrementalAlterConfigs sets and deletes overrides (saved in
topics.json, applied to the open logs), DescribeConfigs tells each effective value and its
source, bad keys and values and internal topics are refused by name -- through ``Topics``,
the Admin client and ``odradek topics describe/alter``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.log import LogConfig
from broker.settings import BrokerSettings
from broker.topics import SOURCE_BROKER, SOURCE_DEFAULT, SOURCE_TOPIC, Topics, describe_configs
from client import Admin, Producer
from protocol.errors import (
    InvalidConfigError,
    InvalidTopicError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from tooling.cli import main as cli


@pytest.fixture
def settings(tmp_path: Path) -> BrokerSettings:
    return BrokerSettings(data_dir=str(tmp_path / "data"),
                          log=LogConfig(segment_bytes=1 << 20))


def test_alter_sets_and_deletes_overrides_and_reconfigures_the_logs(
    settings: BrokerSettings,
) -> None:
    topics = Topics(settings)
    topics.create("t", 2, 1, {"retention_ms": "1000"})
    topics.alter_configs("t", {"cleanup.policy": "compact", "retention.ms": "5000"}, [])
    assert topics.get("t").configs == {"cleanup.policy": "compact", "retention.ms": "5000"}
    log = topics.log("t", 1)
    assert log is not None and log.config.compacted and log.config.retention_ms == 5000
    topics.alter_configs("t", {}, ["cleanup_policy"])  # deleted by either of its names
    assert topics.get("t").configs == {"retention.ms": "5000"}
    assert not log.config.compacted
    topics.close()
    reopened = Topics(settings)  # kept in topics.json
    assert reopened.get("t").configs == {"retention.ms": "5000"}
    assert reopened.log("t", 0).config.retention_ms == 5000
    reopened.close()


def test_bad_configs_change_nothing_and_name_the_key(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topics.create("t", 1, 1, {})
    with pytest.raises(InvalidConfigError, match=r"topic 't'.*'no_such_thing'"):
        topics.alter_configs("t", {"no_such_thing": "1"}, [])
    with pytest.raises(InvalidConfigError, match=r"topic 't'.*cleanup_policy.*'sometimes'"):
        topics.alter_configs("t", {"cleanup_policy": "sometimes"}, [])
    with pytest.raises(InvalidConfigError, match=r"topic 't'.*min_insync_replicas"):
        topics.alter_configs("t", {"min_insync_replicas": "0"}, [])
    with pytest.raises(UnknownTopicOrPartitionError, match="'gone'"):
        topics.alter_configs("gone", {"retention_ms": "1"}, [])
    topics.alter_configs("t", {"retention_ms": "7"}, [], validate_only=True)
    assert topics.get("t").configs == {}
    topics.close()
    saved = json.loads((settings.data_path / "topics.json").read_text())
    assert saved["topics"]["t"]["configs"] == {}


def test_describe_tells_each_value_and_its_source(settings: BrokerSettings) -> None:
    described = {n: (v, s) for n, v, s in describe_configs({"retention.ms": "5"}, settings)}
    assert described["retention_ms"] == ("5", SOURCE_TOPIC)
    assert described["segment_bytes"] == (str(1 << 20), SOURCE_BROKER)
    assert described["cleanup_policy"] == ("delete", SOURCE_DEFAULT)
    assert described["flush_ms"] == (None, SOURCE_DEFAULT)
    assert described["unclean_leader_election_enable"] == ("false", SOURCE_DEFAULT)


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_admin_and_cli_describe_and_alter_configs(
    broker, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = broker.bootstrap
    with Admin(bootstrap) as admin:
        admin.create_topic("cfg", configs={"retention_ms": "3600000"})
        entries = {c.name: c for c in admin.describe_configs(["cfg"])["cfg"]}
        assert (entries["retention_ms"].value, entries["retention_ms"].source) == (
            "3600000", "topic")
        assert entries["cleanup_policy"].source == "default"
        # a smaller max_message_bytes takes effect on the open log at once
        admin.alter_configs("cfg", {"max.message.bytes": "200"})
        with Producer(bootstrap, retries=0) as producer, pytest.raises(MessageTooLargeError):
            producer.send("cfg", b"x" * 1000).result(timeout=20)
        with pytest.raises(InvalidConfigError, match=r"topic 'cfg'.*'bogus\.key'"):
            admin.alter_configs("cfg", {"bogus.key": "1"})
        with pytest.raises(InvalidConfigError, match=r"topic 'cfg'.*retention_ms"):
            admin.alter_configs("cfg", {"retention_ms": "soon"})
        with pytest.raises(InvalidTopicError, match="internal topic '__consumer_offsets'"):
            admin.alter_configs("__consumer_offsets", {"retention_ms": "1"})
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope'"):
            admin.describe_configs(["nope"])

    args = ["--bootstrap", bootstrap]
    assert cli.main(["topics", "alter", "cfg", "--config", "cleanup_policy=compact",
                     "--delete-config", "max.message.bytes", *args]) == 0
    capsys.readouterr()
    assert cli.main(["topics", "describe", "cfg", "--json", *args]) == 0
    [topic] = json.loads(capsys.readouterr().out)
    assert topic["configs"] == [
        {"name": "retention_ms", "value": "3600000", "source": "topic"},
        {"name": "cleanup_policy", "value": "compact", "source": "topic"},
    ]
    assert cli.main(["topics", "describe", "cfg", "--all-configs", "--json", *args]) == 0
    [topic] = json.loads(capsys.readouterr().out)
    every = {c["name"]: c for c in topic["configs"]}
    assert every["max_message_bytes"]["source"] == "default"
    assert every["segment_bytes"]["source"] == "default"
    assert len(every) > 10
    assert cli.main(["topics", "describe", "cfg", *args]) == 0
    table = capsys.readouterr().out
    assert "cleanup_policy" in table and "compact" in table
    assert cli.main(["topics", "alter", "cfg", "--config", "cleanup_policy=maybe", *args]) == 1
    err = capsys.readouterr().err
    assert "cfg" in err and "cleanup_policy" in err and "Traceback" not in err
