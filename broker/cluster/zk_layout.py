"""The ZooKeeper layout of a cluster, as seeds 000 and 003 show it: every path and the JSON each
node holds, in one place.

Every value is a JSON object with a ``version`` field (Kafka's ``"version":1``), so a reader can
tell a format it does not know. Paths are relative to the chroot given in ``zookeeper_connect``
(``127.0.0.1:2181/odradek`` keeps the cluster under ``/odradek``)::

    /cluster/id                                    {"version":"1","id":"<22 chars>"}
    /controller                        ephemeral   {"version":1,"brokerid":1,"timestamp":"..."}
    /controller_epoch                              14   (a bare integer, as Kafka writes it)
    /brokers/ids/<id>                  ephemeral   {"version":4,"host":..,"port":..,
                                                    "endpoints":[..],"rack":..,
                                                    "timestamp":"..","directory_id":..}
    /brokers/topics/<topic>                        {"version":1,"partitions":{"0":[1,2,3],..}}
    /brokers/topics/<topic>/partitions/<p>/state   {"version":1,"controller_epoch":14,"leader":1,
                                                    "leader_epoch":5,"isr":[1,0]}
    /admin/delete_topics/<topic>                   (empty: a request to delete the topic)
    /admin/reassign_partitions                     {"version":1,"partitions":[{"topic":..,
                                                    "partition":..,"replicas":[..]}]}
    /config/topics/<topic>                         {"version":1,"config":{"cleanup_policy":..}}
    /config/changes/config_change_<seq>            {"version":1,"topics":[..]} (configs changed)
    /isr_change_notification/isr_change_<seq>      {"version":1,"partitions":[{"topic":..,
                                                    "partition":..}]}
    /latest_producer_id_block                      {"version":1,"broker":1,"block_start":"1000",
                                                    "block_end":"1999"} (the last block of
                                                    producer ids a broker took, Kafka's node)

ACLs and client quotas (``/kafka-acl...``, ``/config/users``, ``/config/clients``) are laid out
in ``broker.security.zk_store``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.security.listeners import parse_endpoints
from protocol.partitions import TopicPartition

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
DELETE_TOPICS = "/admin/delete_topics"
#: partitions being moved to new replicas, so that a new controller finishes the moves
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
TOPIC_CONFIGS = "/config/topics"
#: a broker that changed topics' configs drops a sequential node here; the controller reads the
#: configs again and tells every broker (Kafka's config change notifications)
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
#: leaders drop a sequential node here after changing an ISR; the controller picks them up
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"

#: the last block of producer ids taken (InitProducerId): the next block follows it
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

#: every persistent node a cluster needs before brokers use it
PERSISTENT_PATHS = ("/cluster", BROKER_IDS, TOPICS, DELETE_TOPICS, TOPIC_CONFIGS, ISR_CHANGES,
                    CONFIG_CHANGES)


class ZkFormatError(ValueError):
    """A znode holds something this broker cannot read; the message names the path."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _dump(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _load(path: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkFormatError(f"{path} does not hold JSON: {exc}") from None
    if not isinstance(doc, dict) or "version" not in doc:
        raise ZkFormatError(f"{path} holds no JSON object with a version: {data[:100]!r}")
    return doc


# ------------------------------------------------------------------------------ registrations

@dataclass(frozen=True)
class BrokerRegistration:
    """What ``/brokers/ids/<id>`` says about a live broker."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    #: the data directory's own id (meta.properties ``directory.id``): a registration left by
    #: this same directory's previous process is stale, one from another directory is a clash
    directory_id: str = ""
    timestamp: str = field(default_factory=_now_ms)
    #: every listener as advertised, (name, host, port); empty: PLAINTEXT at host:port alone.
    #: host and port are the inter-broker listener's.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    #: the node's czxid, read with it (not written in it): Kafka's broker epoch (KIP-380),
    #: new with every registration; -1 when not read from ZooKeeper
    epoch: int = -1

    @property
    def listeners(self) -> tuple[tuple[str, str, int], ...]:
        return self.endpoints or (("PLAINTEXT", self.host, self.port),)

    def encode(self) -> bytes:
        return _dump({
            "version": 4,
            "host": self.host,
            "port": self.port,
            "endpoints": [f"{name}://{host}:{port}" for name, host, port in self.listeners],
            "listener_security_protocol_map": {name: name for name, _, _ in self.listeners},
            "jmx_port": -1,
            "rack": self.rack,
            "timestamp": self.timestamp,
            "directory_id": self.directory_id,
        })

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        path = broker_path(broker_id)
        doc = _load(path, data)
        try:
            host, port = str(doc["host"]), int(doc["port"])
            endpoints = tuple((e.name, e.host, e.port) for e in parse_endpoints(
                ",".join(doc.get("endpoints", []))))
            if endpoints == (("PLAINTEXT", host, port),):
                endpoints = ()
            return cls(broker_id, host, port, doc.get("rack"),
                       str(doc.get("directory_id", "")), str(doc.get("timestamp", "")),
                       endpoints)
        except (KeyError, TypeError, ValueError) as exc:
            raise ZkFormatError(f"{path}: {type(exc).__name__}: {exc}") from None


def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes) -> int:
    doc = _load(CONTROLLER, data)
    try:
        return int(doc["brokerid"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkFormatError(f"{CONTROLLER}: {type(exc).__name__}: {exc}") from None


def encode_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ZkFormatError(f"{CONTROLLER_EPOCH} holds {data[:40]!r}, not an integer") from None


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = _load(CLUSTER_ID, data)
    cluster_id = doc.get("id")
    if not isinstance(cluster_id, str):
        raise ZkFormatError(f"{CLUSTER_ID}: no string id in {data[:100]!r}")
    return cluster_id


# ---------------------------------------------------------------------------------- topics

def encode_assignment(assignment: Mapping[int, Sequence[int]]) -> bytes:
    return _dump({
        "version": 1,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
    })


def decode_assignment(topic: str, data: bytes) -> dict[int, tuple[int, ...]]:
    path = topic_path(topic)
    doc = _load(path, data)
    try:
        return {int(p): tuple(int(b) for b in r) for p, r in doc["partitions"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ZkFormatError(f"{path}: {type(exc).__name__}: {exc}") from None


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    path = topic_config_path(topic)
    doc = _load(path, data)
    config = doc.get("config", {})
    if not isinstance(config, dict):
        raise ZkFormatError(f"{path}: config is not an object")
    return {str(k): str(v) for k, v in config.items()}


@dataclass(frozen=True)
class LeaderIsr:
    """A partition's state node: who leads, since which leader epoch, who is in sync, and which
    controller epoch wrote it. ``zk_version`` is the node's version, for conditional writes."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def encode(self) -> bytes:
        return _dump({
            "version": 1,
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        })

    @classmethod
    def decode(cls, topic: str, partition: int, data: bytes, zk_version: int) -> LeaderIsr:
        path = state_path(topic, partition)
        doc = _load(path, data)
        try:
            return cls(int(doc["leader"]), int(doc["leader_epoch"]),
                       tuple(int(b) for b in doc["isr"]), int(doc["controller_epoch"]),
                       zk_version)
        except (KeyError, TypeError, ValueError) as exc:
            raise ZkFormatError(f"{path}: {type(exc).__name__}: {exc}") from None


#: ``leader`` of a partition with no live replica to lead it
NO_LEADER = -1


def decode_isr_change(path: str, data: bytes) -> list[tuple[str, int]]:
    doc = _load(path, data)
    try:
        return [(str(p["topic"]), int(p["partition"])) for p in doc["partitions"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkFormatError(f"{path}: {type(exc).__name__}: {exc}") from None


def encode_config_change(topics: Sequence[str]) -> bytes:
    return _dump({"version": 1, "topics": list(topics)})


def decode_config_change(path: str, data: bytes) -> list[str]:
    doc = _load(path, data)
    topics = doc.get("topics")
    if not isinstance(topics, list):
        raise ZkFormatError(f"{path}: topics is not a list")
    return [str(t) for t in topics]


def encode_reassignments(moves: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())
    ]})


def decode_reassignments(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    doc = _load(REASSIGN_PARTITIONS, data)
    try:
        return {(str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
                for e in doc["partitions"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkFormatError(f"{REASSIGN_PARTITIONS}: {type(exc).__name__}: {exc}") from None


# ----------------------------------------------------------------------------- producer ids

def encode_producer_id_block(broker_id: int, first: int, last: int) -> bytes:
    """Kafka's ``ProducerIdBlockZNode`` JSON, its keys in Kafka's order and the ids as
    strings (a 64-bit id does not survive every JSON reader as a number)."""
    return json.dumps({"version": 1, "broker": broker_id, "block_start": str(first),
                       "block_end": str(last)}, separators=(",", ":")).encode("utf-8")


def decode_producer_id_block(data: bytes, path: str = LATEST_PRODUCER_ID_BLOCK
                             ) -> tuple[int, int, int]:
    """(broker id, first id, last id) of a block written by ``encode_producer_id_block`` or
    by a Kafka broker; ``path`` names where it was read in the error."""
    doc = _load(path, data)
    try:
        return int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkFormatError(f"{path}: {type(exc).__name__}: {exc}") from None
