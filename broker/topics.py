"""The broker's topics: names, partition counts, settings, and their partition logs.

A single broker is its own controller, so the cluster metadata a controller would keep in
ZooKeeper lives in the data directory: ``topics.json`` lists each topic's partition count,
replication factor and configs (as given to CreateTopics). It is replaced atomically and fsynced
before the logs change, so a crash leaves it describing the logs or describing more than them:

- create: the file first, then the partition logs; at start, missing logs are created;
- delete: the topic moves to ``deleting`` in the file, its logs are removed, then the file
  forgets it; at start, deletions found there are finished.

Partition directories the file does not know (a data directory from before the file existed)
are adopted with default settings rather than thrown away.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from broker.log import SETTINGS as LOG_SETTINGS
from broker.log import LogConfig, LogManager, PartitionLog
from broker.log.layout import write_atomically
from broker.settings import BrokerSettings
from protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

log = structlog.get_logger(__name__)

TOPICS_FILE = "topics.json"
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_PREFIX = "__"
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
# One broker until clustering exists; the replication factor may not exceed it.
LIVE_BROKERS = 1


_LOG_SETTINGS_BY_ALIAS = {alias: s for s in LOG_SETTINGS
                          for alias in (s.name, s.topic_name, s.broker_name) if alias}


def _at_least_one(name: str, value: str) -> None:
    try:
        ok = int(value) >= 1
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def _boolean(name: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise ValueError(f"{name} must be true or false, got {value!r}")


#: topic configs that are not about storage but about replication (cluster mode), by our name
#: and Kafka's; the broker settings of the same names are their defaults
REPLICATION_CONFIGS: dict[str, Callable[[str, str], None]] = {
    "min_insync_replicas": _at_least_one,
    "min.insync.replicas": _at_least_one,
    "unclean_leader_election_enable": _boolean,
    "unclean.leader.election.enable": _boolean,
}


#: the config sources DescribeConfigs reports (Kafka's ConfigSource numbers)
SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG: the topic's override
SOURCE_BROKER = 4  # STATIC_BROKER_CONFIG: the broker's setting, not its built-in default
SOURCE_DEFAULT = 5  # DEFAULT_CONFIG
SOURCE_NAMES = {SOURCE_TOPIC: "topic", SOURCE_BROKER: "broker", SOURCE_DEFAULT: "default"}
#: the replication configs by our name, with Kafka's name as their alias
_REPLICATION_ALIASES = {"min_insync_replicas": ("min_insync_replicas", "min.insync.replicas"),
                        "unclean_leader_election_enable": ("unclean_leader_election_enable",
                                                           "unclean.leader.election.enable")}


def config_aliases(key: str) -> tuple[str, ...]:
    """Every name of the topic config ``key`` (ours and Kafka's); ``(key,)`` if unknown."""
    for names in _REPLICATION_ALIASES.values():
        if key in names:
            return names
    setting = _LOG_SETTINGS_BY_ALIAS.get(key)
    if setting is None:
        return (key,)
    return tuple(n for n in (setting.name, setting.topic_name) if n)


def changed_configs(current: Mapping[str, str], set_: Mapping[str, str],
                    delete: Iterable[str]) -> dict[str, str]:
    """``current`` overrides with ``delete`` removed and ``set_`` set; a key replaces or removes
    the override under any of its names (``retention.ms`` and ``retention_ms``)."""
    out = dict(current)
    for key in [*delete, *set_]:
        for alias in config_aliases(key):
            out.pop(alias, None)
    out.update(set_)
    return out


def describe_configs(overrides: Mapping[str, str],
                     settings: BrokerSettings) -> list[tuple[str, str | None, int]]:
    """Every topic config by our name with its effective value and source (SOURCE_*): the
    topic's override, else the broker's setting where it differs from the built-in default."""
    builtin, broker = LogConfig(), settings.log
    out: list[tuple[str, str | None, int]] = []
    names = [s.name for s in LOG_SETTINGS] + list(_REPLICATION_ALIASES)
    defaults = BrokerSettings()
    for name in names:
        override = next((overrides[a] for a in config_aliases(name) if a in overrides), None)
        if name in _REPLICATION_ALIASES:
            base, default = getattr(settings, name), getattr(defaults, name)
        else:
            base, default = getattr(broker, name), getattr(builtin, name)
        if override is not None:
            out.append((name, override, SOURCE_TOPIC))
        else:
            text = None if base is None else str(base).lower() if isinstance(base, bool) \
                else str(base)
            out.append((name, text, SOURCE_BROKER if base != default else SOURCE_DEFAULT))
    return out


def check_topic_name(name: str) -> None:
    """Raise InvalidTopicError unless ``name`` is a legal topic name (Kafka's rules)."""
    if not name:
        raise InvalidTopicError("a topic name cannot be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"a topic cannot be named {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters; at most {MAX_TOPIC_NAME_LENGTH} are allowed"
        )
    if not _LEGAL_NAME.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} may only hold ASCII letters, digits, '.', '_' and '-'"
        )


def is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


def refuse_internal(name: str, action: str) -> None:
    """Raise InvalidTopicError naming the topic if ``name`` is internal. Request handlers call
    this for clients only: a deleted ``__consumer_offsets`` loses every group at the next start
    and a produced record can rewrite any group's offsets, while the coordinator writes its
    topic through the log and never through a handler (Kafka: "Cannot append to internal
    topic __consumer_offsets", INVALID_TOPIC_EXCEPTION)."""
    if is_internal(name):
        raise InvalidTopicError(f"cannot {action} internal topic {name!r}")


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    #: the partitions with a log here: None for all (a single broker); in a cluster, the ones
    #: the controller gave this broker a replica of
    hosted: frozenset[int] | None = None

    @property
    def is_internal(self) -> bool:
        return is_internal(self.name)

    def local_partitions(self) -> Iterable[int]:
        return range(self.partitions) if self.hosted is None else sorted(self.hosted)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "configs": dict(self.configs),
        }
        if self.hosted is not None:
            doc["hosted"] = sorted(self.hosted)
        return doc


class Topics:
    """Every topic of this broker and the log of each of its partitions."""

    def __init__(
        self, settings: BrokerSettings, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._settings = settings
        self._path = settings.data_path / TOPICS_FILE
        #: called with (name, partitions) after a topic is created, (name, None) after it is
        #: deleted -- the group coordinator rebalances groups subscribed to it
        self.listeners: list[Callable[[str, int | None], None]] = []
        settings.data_path.mkdir(parents=True, exist_ok=True)
        fresh = not self._path.exists()
        self._topics, deleting = ({}, []) if fresh else _read_topics_file(self._path)
        try:
            configs = {t.name: self._log_config(t.configs) for t in self._topics.values()}
        except ValueError as exc:
            raise TopicsFileError(f"{self._path} holds a bad topic config: {exc}") from None
        # in a cluster, a high watermark comes from replication and is checkpointed
        self.logs = LogManager(settings.data_path, settings.log, topic_configs=configs,
                               clock=clock, replicated=settings.zookeeper_connect is not None)
        self._finish_deletions(deleting)
        adopted = self._adopt_unknown_logs()
        for topic in self._topics.values():
            self._open_logs(topic)
        if fresh or deleting or adopted:
            self._save()

    # -------------------------------------------------------------------------------- reading

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def all(self) -> list[Topic]:
        return [self._topics[name] for name in sorted(self._topics)]

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    # ------------------------------------------------------------------------------- changing

    def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> Topic:
        """Create a topic (``-1`` asks for the broker's default partition count or replication
        factor). Raises the BrokerError to answer with when the request cannot be granted."""
        check_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if partitions == -1:
            partitions = self._settings.num_partitions
        if not 1 <= partitions <= self._settings.max_partitions_per_topic:
            raise InvalidPartitionsError(
                f"partition count must be between 1 and max_partitions_per_topic="
                f"{self._settings.max_partitions_per_topic}, got {partitions}"
            )
        if replication_factor == -1:
            replication_factor = self._settings.default_replication_factor
        if replication_factor < 1:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, got {replication_factor}"
            )
        if replication_factor > LIVE_BROKERS:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the number of live "
                f"brokers ({LIVE_BROKERS})"
            )
        try:
            config = self._log_config(configs)
        except ValueError as exc:
            raise InvalidConfigError(f"topic {name!r}: {exc}") from None
        topic = Topic(name, partitions, replication_factor, dict(configs))
        if validate_only:
            return topic
        self._topics[name] = topic
        self._save()
        self.logs.set_topic_config(name, config)
        self._open_logs(topic)
        log.info("topic.created", topic=name, partitions=partitions, configs=dict(configs))
        for listener in self.listeners:
            listener(name, partitions)
        return topic

    def get_or_auto_create(self, name: str, *, requested: bool = True) -> Topic:
        """The topic called ``name``; if missing, created with the broker's defaults when the
        request asks for that and ``auto_create_topics_enable`` allows it -- but never an
        internal topic, which its owner creates. Raises the BrokerError to report otherwise."""
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        check_topic_name(name)
        if not (requested and self._settings.auto_create_topics_enable) or is_internal(name):
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return self.create(
            name, self._settings.num_partitions, self._settings.default_replication_factor, {}
        )

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> Topic:
        """Grow a topic to ``count`` partitions (Kafka's CreatePartitions: never fewer)."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if count <= topic.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.partitions} partitions; the new count must be "
                f"larger, got {count}")
        if count > self._settings.max_partitions_per_topic:
            raise InvalidPartitionsError(
                f"topic {name!r}: {count} partitions exceed max_partitions_per_topic="
                f"{self._settings.max_partitions_per_topic}")
        grown = Topic(name, count, topic.replication_factor, topic.configs)
        if validate_only:
            return grown
        self._topics[name] = grown
        self._save()
        self._open_logs(grown)
        log.info("topic.partitions_added", topic=name, partitions=count,
                 before=topic.partitions)
        for listener in self.listeners:
            listener(name, count)
        return grown

    def check_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """ValueError naming the problem unless ``configs`` are valid topic settings."""
        self._log_config(configs)

    def alter_configs(self, name: str, set_: Mapping[str, str], delete: Iterable[str], *,
                      validate_only: bool = False) -> Topic:
        """Set and delete ``name``'s config overrides (IncrementalAlterConfigs): topics.json
        first, then the open logs. InvalidConfigError names the topic and the bad key."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        configs = changed_configs(topic.configs, set_, delete)
        try:
            self._log_config(configs)
        except ValueError as exc:
            raise InvalidConfigError(f"topic {name!r}: {exc}") from None
        if validate_only:
            return dataclasses.replace(topic, configs=configs)
        return self.set_configs(name, configs)

    def set_configs(self, name: str, configs: Mapping[str, str]) -> Topic:
        """Make ``configs`` the overrides of ``name`` (a no-op when they are already): saved in
        topics.json, then its logs reconfigured. In a cluster, from UpdateMetadata."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if dict(topic.configs) == dict(configs):
            return topic
        try:
            config = self._log_config(configs)
        except ValueError as exc:
            raise InvalidConfigError(f"topic {name!r}: {exc}") from None
        changed = dataclasses.replace(topic, configs=dict(configs))
        self._topics[name] = changed
        self._save()
        self.logs.set_topic_config(name, config)
        log.info("topic.configs_changed", topic=name, configs=dict(configs),
                 before=dict(topic.configs))
        return changed

    # ------------------------------------------------------------- cluster mode: replicas

    def host(self, name: str, partition: int, partitions: int, replication_factor: int,
             configs: Mapping[str, str]) -> PartitionLog:
        """Keep a replica of ``name``/``partition`` here (LeaderAndIsr): its log, created
        when missing, and the topic's entry in topics.json (before the log, as ``create``)."""
        topic = self._topics.get(name)
        hosted = frozenset() if topic is None or topic.hosted is None else topic.hosted
        wanted = Topic(name, max(partitions, topic.partitions if topic else 0),
                       replication_factor, dict(configs), hosted | {partition})
        if wanted != topic:
            try:
                config = self._log_config(configs)
            except ValueError as exc:
                raise InvalidConfigError(f"topic {name!r}: {exc}") from None
            self._topics[name] = wanted
            self._save()
            self.logs.set_topic_config(name, config)
        return self.logs.get_or_create(name, partition)

    def unhost(self, name: str, partition: int) -> None:
        """Delete the replica of ``name``/``partition`` here (StopReplica with delete); the
        topic's entry goes with its last hosted partition."""
        topic = self._topics.get(name)
        if topic is None:
            return
        hosted = (frozenset(topic.local_partitions())) - {partition}
        if hosted:
            self._topics[name] = Topic(name, topic.partitions, topic.replication_factor,
                                       topic.configs, hosted)
        else:
            del self._topics[name]
        self._save(deleting=[] if hosted else [name])
        if self.logs.get(name, partition) is not None:
            self.logs.delete(name, partition)
        self._save()

    def delete(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        del self._topics[name]
        self._save(deleting=[name])
        self._delete_logs(name)
        self._save()
        log.info("topic.deleted", topic=name, partitions=topic.partitions)
        for listener in self.listeners:
            listener(name, None)
        return topic

    def close(self) -> None:
        """Flush and close every log cleanly (each gets its clean-shutdown marker)."""
        self.logs.close()

    # -------------------------------------------------------------------------------- helpers

    def _log_config(self, configs: Mapping[str, str]) -> LogConfig:
        storage = {}
        for name, value in configs.items():
            check = REPLICATION_CONFIGS.get(name)
            if check is None:
                storage[name] = value
            else:
                check(name, value)
        return LogConfig.from_mapping(storage, base=self._settings.log)

    def _open_logs(self, topic: Topic) -> None:
        for partition in topic.local_partitions():
            self.logs.get_or_create(topic.name, partition)

    def _delete_logs(self, name: str) -> None:
        for topic, partition in self.logs.partitions():
            if topic == name:
                self.logs.delete(topic, partition)

    def _finish_deletions(self, names: Iterable[str]) -> None:
        for name in names:
            self._delete_logs(name)
            log.info("topic.deletion_finished", topic=name)

    def _adopt_unknown_logs(self) -> bool:
        found: dict[str, int] = {}
        for topic, partition in self.logs.partitions():
            if topic not in self._topics:
                found[topic] = max(found.get(topic, 0), partition + 1)
        for name, partitions in found.items():
            self._topics[name] = Topic(name, partitions, 1, {})
            log.warning("topic.adopted", topic=name, partitions=partitions)
        return bool(found)

    def _save(self, deleting: list[str] | None = None) -> None:
        doc = {
            "version": 1,
            "topics": {name: t.to_json() for name, t in sorted(self._topics.items())},
            "deleting": deleting or [],
        }
        write_atomically(self._path, json.dumps(doc, indent=1).encode("utf-8"), durable=True)


class TopicsFileError(RuntimeError):
    """topics.json cannot be read; the broker refuses to start rather than guess."""


def _read_topics_file(path: Path) -> tuple[dict[str, Topic], list[str]]:
    try:
        doc = json.loads(path.read_text("utf-8"))
        topics = {
            name: Topic(
                name,
                int(entry["partitions"]),
                int(entry["replication_factor"]),
                {str(k): str(v) for k, v in entry["configs"].items()},
                None if "hosted" not in entry else frozenset(int(p) for p in entry["hosted"]),
            )
            for name, entry in doc["topics"].items()
        }
        deleting = [str(name) for name in doc["deleting"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TopicsFileError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    return topics, deleting
