"""Topics: name rules, create and delete, and what the data directory holds after restarts
and interrupted changes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from broker.settings import BrokerSettings
from broker.topics import TOPICS_FILE, Topics, TopicsFileError, check_topic_name
from protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from protocol.messageset import encode_message_set


@pytest.fixture
def settings(tmp_path: Path) -> BrokerSettings:
    return BrokerSettings(data_dir=str(tmp_path / "data"), max_partitions_per_topic=8)


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "x" * 249, "__consumer_offsets"])
def test_legal_names(name: str) -> None:
    check_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a\0", "t:1"])
def test_illegal_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        check_topic_name(name)


def test_create_and_reopen(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topics.create("t", 3, 1, {"cleanup_policy": "compact"})
    topics.create("d", -1, -1, {})  # the broker's defaults
    log = topics.log("t", 2)
    assert log is not None and log.config.cleanup_policy == "compact"
    log.append(encode_message_set([(b"k", b"v", 0)]))
    topics.close()

    again = Topics(settings)
    assert [(t.name, t.partitions, t.replication_factor) for t in again.all()] == [
        ("d", 1, 1), ("t", 3, 1)
    ]
    reopened = again.log("t", 2)
    assert reopened is not None and reopened.log_end_offset == 1
    assert reopened.config.cleanup_policy == "compact"
    again.close()


@pytest.mark.parametrize(
    ("args", "error", "fragment"),
    [
        (("t", 1, 1, {}), TopicAlreadyExistsError, "already exists"),
        (("bad name", 1, 1, {}), InvalidTopicError, "may only hold"),
        (("n", 0, 1, {}), InvalidPartitionsError, "between 1 and max_partitions_per_topic=8"),
        (("n", 9, 1, {}), InvalidPartitionsError, "got 9"),
        (("n", 1, 0, {}), InvalidReplicationFactorError, "at least 1"),
        (("n", 1, 3, {}), InvalidReplicationFactorError,
         r"replication factor 3 is larger than the number of live brokers \(1\)"),
        (("n", 1, 1, {"colour": "red"}), InvalidConfigError, "unknown log setting 'colour'"),
        (("n", 1, 1, {"retention.ms": "soon"}), InvalidConfigError, "retention_ms"),
    ],
)
def test_create_refusals_change_nothing(
    settings: BrokerSettings, args: tuple, error: type[Exception], fragment: str
) -> None:
    topics = Topics(settings)
    topics.create("t", 1, 1, {})
    with pytest.raises(error, match=fragment):
        topics.create(*args)
    assert [t.name for t in topics.all()] == ["t"]
    assert topics.logs.partitions() == [("t", 0)]
    topics.close()


def test_validate_only_creates_nothing(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topic = topics.create("v", 2, 1, {}, validate_only=True)
    assert topic.partitions == 2
    assert topics.get("v") is None and topics.logs.partitions() == []
    topics.close()


def test_delete_removes_the_data(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topics.create("t", 2, 1, {})
    topics.create("keep", 1, 1, {})
    topics.delete("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        topics.delete("t")
    assert not (settings.data_path / "t-0").exists()
    topics.close()
    assert [t.name for t in Topics(settings).all()] == ["keep"]


def test_an_interrupted_deletion_is_finished_at_start(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topics.create("t", 2, 1, {})
    topics.close()
    path = settings.data_path / TOPICS_FILE
    doc = json.loads(path.read_text())
    del doc["topics"]["t"]
    doc["deleting"] = ["t"]  # the file was written, the logs not yet removed
    path.write_text(json.dumps(doc))
    again = Topics(settings)
    assert again.all() == [] and again.logs.partitions() == []
    assert json.loads(path.read_text())["deleting"] == []
    again.close()


def test_missing_partition_logs_are_created_at_start(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topics.create("t", 1, 1, {})
    topics.close()
    path = settings.data_path / TOPICS_FILE
    doc = json.loads(path.read_text())
    doc["topics"]["t"]["partitions"] = 3  # the file was written, then the broker stopped
    path.write_text(json.dumps(doc))
    again = Topics(settings)
    assert again.logs.partitions() == [("t", 0), ("t", 1), ("t", 2)]
    again.close()


def test_logs_without_a_topics_file_are_adopted(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    topics.create("old", 2, 1, {})
    topics.close()
    (settings.data_path / TOPICS_FILE).unlink()
    again = Topics(settings)
    assert [(t.name, t.partitions) for t in again.all()] == [("old", 2)]
    again.close()


def test_an_unreadable_topics_file_stops_the_start(settings: BrokerSettings) -> None:
    settings.data_path.mkdir(parents=True)
    (settings.data_path / TOPICS_FILE).write_text("{not json")
    with pytest.raises(TopicsFileError, match="cannot read"):
        Topics(settings)


def test_auto_creation_rules(settings: BrokerSettings) -> None:
    topics = Topics(settings)
    assert topics.get_or_auto_create("auto").partitions == settings.num_partitions
    assert topics.get_or_auto_create("auto") == topics.get("auto")
    with pytest.raises(UnknownTopicOrPartitionError):
        topics.get_or_auto_create("not-asked", requested=False)
    with pytest.raises(UnknownTopicOrPartitionError):
        topics.get_or_auto_create("__internal")
    with pytest.raises(InvalidTopicError):
        topics.get_or_auto_create("bad name")
    topics.close()
    off = Topics(dataclasses.replace(settings, auto_create_topics_enable=False))
    with pytest.raises(UnknownTopicOrPartitionError):
        off.get_or_auto_create("other")
    assert [t.name for t in off.all()] == ["auto"]
    off.close()
