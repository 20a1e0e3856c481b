"""``Admin``: topics, offsets and the cluster, one blocking call each.

Topic changes go to the controller (the one broker today); reads go to any broker. Each call
waits for its answer (driving the sockets itself) up to ``timeout_ms``, and raises the typed
error for a failed topic, its message naming the topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, Unpack

from client.errors import BrokerConnectionError, ConfigError, IllegalStateError, partition_error
from client.metadata import BrokerInfo, ClusterMetadata, MetadataTracker, TopicInfo
from client.network import NetworkClient
from client.offsets import OffsetAndTimestamp, list_offsets
from client.records import TopicPartition
from client.replica_reads import ReplicaRead, ReplicaReads, read_replicas
from client.security import SecurityConfig, SecurityOptions
from protocol.acls import AclBinding, AclBindingFilter
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    ErrorCode,
    OdradekError,
    TopicAlreadyExistsError,
    error_for,
)
from protocol.scram import MIN_ITERATIONS, CredentialFormatError, ScramCredential


@dataclass(frozen=True)
class NewTopic:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)
    #: partition -> replicas (the preferred leader first); instead of partitions and
    #: replication_factor, which it implies (Kafka's --replica-assignment)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class ConfigEntry:
    """One topic config as DescribeConfigs tells it: its effective value (None: none) and where
    the value comes from: "topic" (an override), "broker" (the broker's setting), "default"."""

    name: str
    value: str | None
    source: str


#: DescribeConfigs' sources (Kafka's ConfigSource numbers)
_CONFIG_SOURCES = {1: "topic", 4: "broker", 5: "default"}
_RESOURCE_TOPIC = 2


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


@dataclass(frozen=True)
class ReplicaLogDir:
    """One partition log on a broker's disk (DescribeLogDirs)."""

    broker_id: int
    log_dir: str
    topic: str
    partition: int
    size: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    segments: int


#: A quota entity: {"user": "alice"}, {"user": "alice", "client-id": "app"}; a name of None is
#: the default of its type ({"client-id": None}: every client id without its own quota).
QuotaEntity = Mapping[str, str | None]
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
#: DescribeClientQuotas' match types
_MATCH_EXACT, _MATCH_DEFAULT = 0, 1
#: the pause before asking the controller again, after it could not be reached or had moved
_CONTROLLER_RETRY_S = 0.1


def _not_controller(body: Mapping[str, Any]) -> bool:
    """The answer says the broker asked is not the controller (the whole request, or any of
    its topics)."""
    codes = [body.get("error_code"), *(t.get("error_code") for t in body.get("topics", ()))]
    return ErrorCode.NOT_CONTROLLER in codes


@dataclass(frozen=True)
class ClientQuota:
    """The quotas set on one entity (bytes/s by key: producer_byte_rate, consumer_byte_rate)."""

    entity: dict[str, str | None]
    values: dict[str, int]


@dataclass(frozen=True)
class ApiVersionRange:
    api_key: int
    name: str
    min_version: int
    max_version: int


class Admin:
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "127.0.0.1:9092",
        *,
        client_id: str = "odradek-admin",
        request_timeout_ms: int = 30_000,
        timeout_ms: int = 30_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1_000,
        **security: Unpack[SecurityOptions],
    ) -> None:
        self._network = NetworkClient(
            bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            security=SecurityConfig(**security),
        )
        self._metadata = MetadataTracker(self._network)
        self._metadata.track_all_topics()
        self._timeout = timeout_ms / 1000
        self._closed = False

    # ------------------------------------------------------------------------------ topics

    def create_topics(
        self, topics: Iterable[NewTopic], *, validate_only: bool = False
    ) -> dict[str, BrokerError | None]:
        """Create topics; each topic's result is None or its typed error."""
        entries = []
        for t in topics:
            entry: dict[str, Any] = {
                "name": t.name,
                "num_partitions": t.partitions,
                "replication_factor": t.replication_factor,
                "configs": dict(t.configs),
                "assignments": None,
            }
            if t.replica_assignment is not None:  # v1: the replicas say both counts
                entry.update(num_partitions=-1, replication_factor=-1, assignments=[
                    {"partition": p, "broker_ids": list(r)}
                    for p, r in sorted(t.replica_assignment.items())])
            entries.append(entry)
        body = {"topics": entries, "timeout_ms": int(self._timeout * 1000),
                "validate_only": validate_only}
        return self._topic_results(
            self._ask_controller(ApiKey.CREATE_TOPICS, body, api_version=1))

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
        *,
        exist_ok: bool = False,
    ) -> bool:
        """Create one topic or raise its typed error (``TopicAlreadyExistsError``, ...).

        With ``exist_ok=True`` a topic of that name that already exists is no error (its
        partitions and configs are left as they are, not compared): the call returns False.
        Returns True when this call created the topic."""
        new = NewTopic(name, partitions, replication_factor, dict(configs or {}),
                       replica_assignment)
        results = self.create_topics([new])
        if exist_ok and isinstance(results.get(name), TopicAlreadyExistsError):
            return False
        _raise_first(results)
        return True

    def delete_topics(self, names: Iterable[str]) -> dict[str, BrokerError | None]:
        body = {"topic_names": list(names), "timeout_ms": int(self._timeout * 1000)}
        return self._topic_results(self._ask_controller(ApiKey.DELETE_TOPICS, body))

    def delete_topic(self, name: str) -> None:
        _raise_first(self.delete_topics([name]))

    def create_partitions(self, name: str, count: int,
                          assignments: list[list[int]] | None = None) -> None:
        """Grow topic ``name`` to ``count`` partitions (never fewer; Kafka's CreatePartitions);
        ``assignments``: replica lists of the new partitions, else the broker places them."""
        self._check_open()
        body = {"topics": [{"name": name, "count": count, "assignments": assignments}],
                "timeout_ms": int(self._timeout * 1000), "validate_only": False}
        node = self._network.least_loaded_node()
        answer = self._network.send(node, ApiKey.CREATE_PARTITIONS, body).result(
            self._timeout + 5)
        _raise_first(self._topic_results(answer))

    def describe_configs(self, names: Iterable[str]) -> dict[str, list[ConfigEntry]]:
        """Every config of each named topic, effective value and source; raises the first
        topic's error (``UnknownTopicOrPartitionError`` naming it)."""
        out: dict[str, list[ConfigEntry]] = {}
        for name, configs in self.describe_configs_results(names).items():
            if isinstance(configs, BrokerError):
                raise configs
            out[name] = configs
        return out

    def describe_configs_results(
        self, names: Iterable[str]
    ) -> dict[str, list[ConfigEntry] | BrokerError]:
        """Each named topic's configs, or its typed error (``TopicAuthorizationFailedError``
        without DescribeConfigs on it): one topic refused does not hide the others' answers,
        as Kafka's DescribeConfigsResult has a future per resource."""
        self._check_open()
        body = {"resources": [{"resource_type": _RESOURCE_TOPIC, "resource_name": n,
                               "config_names": None} for n in names]}
        node = self._network.least_loaded_node()
        answer = self._network.send(node, ApiKey.DESCRIBE_CONFIGS, body).result(self._timeout)
        out: dict[str, list[ConfigEntry] | BrokerError] = {}
        for r in answer["results"]:
            name = r["resource_name"]
            if r["error_code"]:
                out[name] = partition_error(f"topic {name!r}", r["error_code"], r["error_message"])
                continue
            out[name] = [ConfigEntry(c["name"], c["value"],
                                     _CONFIG_SOURCES.get(c["source"], str(c["source"])))
                         for c in r["configs"]]
        return out

    def alter_configs(self, name: str, set_: Mapping[str, str] | None = None,
                      delete: Iterable[str] = (), *, validate_only: bool = False) -> None:
        """Set and delete topic ``name``'s config overrides, all or none (Kafka's
        IncrementalAlterConfigs); raises the typed error (``InvalidConfigError`` naming the
        topic and config)."""
        self._check_open()
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in (set_ or {}).items()]
        ops += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        body = {"resources": [{"resource_type": _RESOURCE_TOPIC, "resource_name": name,
                               "configs": ops}],
                "timeout_ms": int(self._timeout * 1000), "validate_only": validate_only}
        node = self._network.least_loaded_node()
        answer = self._network.send(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, body).result(
            self._timeout + 5)
        for r in answer["results"]:
            if r["error_code"]:
                raise partition_error(f"topic {r['resource_name']!r}", r["error_code"],
                                      r["error_message"])

    def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> list[tuple[str, int]]:
        """Preferred-leader election (Kafka's ElectLeaders), done by the controller: the
        partitions whose leadership moved back to their first replica."""
        wanted = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            wanted = [{"topic": t, "partitions": ps} for t, ps in sorted(by_topic.items())]
        body = {"topic_partitions": wanted, "timeout_ms": int(self._timeout * 1000)}
        answer = self._ask_controller(ApiKey.ELECT_LEADERS, body)
        return [(e["topic"], e["partition"]) for e in answer["elected"]]

    def reassign_partitions(self, moves: Mapping[tuple[str, int], Sequence[int]]) -> None:
        """Start moving partitions to new replicas (Kafka's AlterPartitionReassignments),
        done by the controller; raises the first partition's refusal. Metadata shows the end:
        the partition's replicas become the new list."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), replicas in sorted(moves.items()):
            by_topic.setdefault(topic, []).append(
                {"partition": partition, "replicas": list(replicas)})
        body = {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                "timeout_ms": int(self._timeout * 1000)}
        answer = self._ask_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
        for t in answer["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    raise partition_error(f"{t['name']}-{p['partition']}", p["error_code"],
                                          p["error_message"])

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        metadata = self._refresh()
        return sorted(
            name
            for name, info in metadata.topics.items()
            if info.error is ErrorCode.NONE and (include_internal or not info.internal)
        )

    def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicInfo]:
        """Partitions, leaders, replicas and ISR of the named topics (all if None). A named
        topic that does not exist raises ``UnknownTopicOrPartitionError`` naming it."""
        metadata = self._refresh()
        if names is None:
            return [
                metadata.topics[n]
                for n in sorted(metadata.topics)
                if metadata.topics[n].error is ErrorCode.NONE
            ]
        out = []
        for name in names:
            info = metadata.topics.get(name)
            if info is None:
                raise partition_error(f"topic {name!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if info.error is not ErrorCode.NONE:
                raise info.error_for_topic()
            out.append(info)
        return out

    # ---------------------------------------------------------------------- offsets, cluster

    def list_offsets(
        self, specs: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """``{tp: EARLIEST | LATEST | timestamp_ms}`` -> each partition's offset (and the found
        message's timestamp for a lookup by time). See client.offsets for the constants."""
        return list_offsets(self._metadata, specs, self._timeout)

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Delete the records below the given offsets (Kafka's DeleteRecords; -1: the high
        watermark), asking each partition's leader: ``{tp: its new log start offset}``. Raises
        the first partition's typed error."""
        metadata = self._refresh()
        by_leader: dict[int, dict[str, list[dict[str, int]]]] = {}
        for tp, offset in before.items():
            leader = metadata.leader_for(tp.topic, tp.partition)
            if leader is None:
                info = metadata.topics.get(tp.topic)
                if info is not None and info.error is not ErrorCode.NONE:
                    raise info.error_for_topic()
                known = tp.partition in (metadata.partitions_for(tp.topic) or ())
                code = (ErrorCode.LEADER_NOT_AVAILABLE if known
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                raise partition_error(tp, code)
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(
                {"partition": tp.partition, "offset": offset})
        futures = [
            self._network.send(node, ApiKey.DELETE_RECORDS, {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": int(self._timeout * 1000)})
            for node, topics in by_leader.items()
        ]
        out: dict[TopicPartition, int] = {}
        for future in futures:
            answer = future.result(self._timeout + 5)
            for t in answer["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition"])
                    if p["error_code"]:
                        raise partition_error(tp, p["error_code"], p["error_message"])
                    out[tp] = p["low_watermark"]
        return out

    def describe_log_dirs(
        self, topics: Iterable[str] | None = None, *, brokers: Iterable[int] | None = None
    ) -> list[ReplicaLogDir]:
        """The partition logs on each broker's disk (Kafka's DescribeLogDirs), of ``topics``
        (all if None), asking every broker Metadata lists (or those in ``brokers``)."""
        metadata = self._refresh()
        nodes = sorted(metadata.brokers) if brokers is None else sorted(brokers)
        body = {"topics": None if topics is None else sorted(set(topics))}
        futures = [(node, self._network.send(node, ApiKey.DESCRIBE_LOG_DIRS, body))
                   for node in nodes]
        out: list[ReplicaLogDir] = []
        for node, future in futures:
            answer = future.result(self._timeout + 5)
            if answer["error_code"]:
                raise partition_error(f"broker {node}", answer["error_code"])
            for d in answer["log_dirs"]:
                if d["error_code"]:
                    raise partition_error(f"broker {node} {d['log_dir']}", d["error_code"])
                for t in d["topics"]:
                    out.extend(
                        ReplicaLogDir(node, d["log_dir"], t["name"], p["partition"], p["size"],
                                      p["log_start_offset"], p["log_end_offset"],
                                      p["high_watermark"], p["segments"])
                        for p in t["partitions"])
        return out

    def read_replicas(self, reads: ReplicaReads
                      ) -> dict[int, dict[TopicPartition, ReplicaRead] | OdradekError]:
        """Each named broker's own replicas of partitions, leader or follower, from the given
        offsets (client.replica_reads: Kafka's debugging fetch), every broker asked at once; a
        broker that cannot be reached gives its error instead. Brokers are known by the ids the
        latest metadata (``describe_topics``, ``cluster_metadata``) named."""
        self._check_open()
        return read_replicas(self._network, reads, self._timeout)

    # ------------------------------------------------------------------------------- users

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                        ) -> dict[str, dict[str, int]]:
        """Each user's SCRAM mechanisms and their iteration counts (all users for None);
        raises ``ResourceNotFoundError`` for a named user who has none."""
        answer = self._ask_any(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                               {"users": None if users is None else list(users)})
        out: dict[str, dict[str, int]] = {}
        for r in answer["results"]:
            if r["error_code"]:
                raise error_for(r["error_code"], r["error_message"] or "")
            out[r["user"]] = {c["mechanism"]: c["iterations"] for c in r["credential_infos"]}
        return out

    def upsert_user_scram_credential(self, name: str, mechanism: str, password: str, *,
                                     iterations: int = MIN_ITERATIONS) -> None:
        """Create or replace ``name``'s credential: derived here from ``password`` under a
        fresh salt, so that only the salt and the derived keys travel (KIP-554)."""
        try:
            credential = ScramCredential.derive(mechanism, password, iterations=iterations)
        except CredentialFormatError as exc:
            raise ConfigError(str(exc)) from None
        self._alter_users([], [{"name": name, "mechanism": credential.mechanism,
                                "iterations": credential.iterations, "salt": credential.salt,
                                "stored_key": credential.stored_key,
                                "server_key": credential.server_key}])

    def delete_user_scram_credential(self, name: str, mechanism: str) -> None:
        self._alter_users([{"name": name, "mechanism": mechanism}], [])

    def _alter_users(self, deletions: list[dict[str, Any]], upsertions: list[dict[str, Any]]
                     ) -> None:
        answer = self._ask_any(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                               {"deletions": deletions, "upsertions": upsertions})
        for r in answer["results"]:
            if r["error_code"]:
                raise error_for(r["error_code"], r["error_message"] or "")

    def describe_cluster(self) -> ClusterDescription:
        metadata = self._refresh()
        brokers = sorted(metadata.brokers.values(), key=lambda b: b.node_id)
        return ClusterDescription(metadata.cluster_id, metadata.controller_id, brokers)

    def cluster_metadata(self) -> ClusterMetadata:
        """A fresh snapshot of everything a Metadata response says: live brokers, the
        controller, and every topic (internal ones too) with each partition's leader, replicas
        and ISR -- what ``odradek cluster status`` counts from (tooling.cluster_health)."""
        return self._refresh()

    def api_versions(self) -> list[ApiVersionRange]:
        """The APIs and versions a broker supports."""
        self._check_open()
        node = self._network.least_loaded_node()
        body = self._network.send(node, ApiKey.API_VERSIONS, {}).result(self._timeout)
        return [
            ApiVersionRange(a["api_key"], a["name"], a["min_version"], a["max_version"])
            for a in body["apis"]
        ]

    # ------------------------------------------------------------------ ACLs and quotas

    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        """Add ACLs (needs Alter on the cluster); raises the first failure's typed error."""
        body = self._ask_any(ApiKey.CREATE_ACLS,
                             {"creations": [acl.to_wire() for acl in acls]})
        for acl, result in zip(acls, body["results"], strict=True):
            if result["error_code"]:
                raise error_for(result["error_code"], f"{acl}: {result['error_message']}")

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (all by default; needs Describe on the cluster)."""
        body = self._ask_any(ApiKey.DESCRIBE_ACLS,
                             {"filter": (acl_filter or AclBindingFilter()).to_wire()})
        if body["error_code"]:
            raise error_for(body["error_code"], body["error_message"] or "")
        return [AclBinding.from_wire(a) for a in body["acls"]]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        """Delete the ACLs the filters match; the deleted ones."""
        body = self._ask_any(ApiKey.DELETE_ACLS, {"filters": [f.to_wire() for f in filters]})
        deleted: list[AclBinding] = []
        for result in body["filter_results"]:
            if result["error_code"]:
                raise error_for(result["error_code"], result["error_message"] or "")
            deleted += [AclBinding.from_wire(a) for a in result["matching_acls"]]
        return list(dict.fromkeys(deleted))

    def describe_client_quotas(self, entity: QuotaEntity | None = None, *,
                               strict: bool = False) -> list[ClientQuota]:
        """The quotas set on entities matching ``entity`` (None: every entity; a name of None:
        the default entity of its type). ``strict``: only entities with no other parts."""
        components = [
            {"entity_type": t, "match_type": _MATCH_DEFAULT if n is None else _MATCH_EXACT,
             "match": n} for t, n in (entity or {}).items()]
        body = self._ask_any(ApiKey.DESCRIBE_CLIENT_QUOTAS,
                             {"components": components, "strict": strict})
        if body["error_code"]:
            raise error_for(body["error_code"], body["error_message"] or "")
        return [ClientQuota({e["entity_type"]: e["entity_name"] for e in entry["entity"]},
                            {v["key"]: v["value"] for v in entry["values"]})
                for entry in body["entries"]]

    def alter_client_quotas(self, entity: QuotaEntity, set_: Mapping[str, int] | None = None,
                            remove: Iterable[str] = (), *, validate_only: bool = False) -> None:
        """Set quotas (bytes/s) on an entity and remove others; raises the typed error."""
        ops = [{"key": k, "value": v, "remove": False} for k, v in (set_ or {}).items()]
        ops += [{"key": k, "value": 0, "remove": True} for k in remove]
        wire_entity = [{"entity_type": t, "entity_name": n} for t, n in entity.items()]
        body = self._ask_any(ApiKey.ALTER_CLIENT_QUOTAS, {
            "entries": [{"entity": wire_entity, "ops": ops}], "validate_only": validate_only})
        for result in body["entries"]:
            if result["error_code"]:
                raise error_for(result["error_code"], result["error_message"] or "")

    # ----------------------------------------------------------------------------- helpers

    def _ask_any(self, api: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
        self._check_open()
        node = self._network.least_loaded_node()
        result: dict[str, Any] = self._network.send(node, api, body).result(self._timeout)
        return result

    def _refresh(self) -> ClusterMetadata:
        self._check_open()
        return self._metadata.refresh(self._timeout)

    def _ask_controller(self, api: ApiKey, body: dict[str, Any], *, api_version: int = 0
                        ) -> dict[str, Any]:
        """The request to the controller the latest metadata names; asked again, with fresh
        metadata, while that broker cannot be reached or answers NOT_CONTROLLER (the
        controller moved), until the admin's timeout -- as Kafka's AdminClient does. A retry
        after a connection lost mid-request may find its own work done (CreateTopics: the
        topic already exists)."""
        deadline = time.monotonic() + self._timeout
        while True:
            metadata = self._refresh()
            node = metadata.controller_id
            if node not in metadata.brokers:
                node = self._network.least_loaded_node()
            try:
                result: dict[str, Any] = self._network.send(
                    node, api, body, api_version=api_version).result(self._timeout + 5)
            except BrokerConnectionError:
                if time.monotonic() >= deadline:
                    raise
            else:
                if not _not_controller(result) or time.monotonic() >= deadline:
                    return result
            self._network.poll(_CONTROLLER_RETRY_S)

    @staticmethod
    def _topic_results(body: dict[str, Any]) -> dict[str, BrokerError | None]:
        return {
            t["name"]: (
                partition_error(f"topic {t['name']!r}", t["error_code"], t["error_message"])
                if t["error_code"]
                else None
            )
            for t in body["topics"]
        }

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._network.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("admin client is closed")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _raise_first(results: dict[str, BrokerError | None]) -> None:
    for error in results.values():
        if error is not None:
            raise error
