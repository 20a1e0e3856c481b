"""What the clients know about the cluster, and keeping it current.

``ClusterMetadata`` is an immutable snapshot parsed from one Metadata response: brokers, the
controller, the cluster id, each topic's partitions with leader, replicas and ISR.
``MetadataTracker`` decides when to ask again -- when someone reported it stale (a
NOT_LEADER_FOR_PARTITION or UNKNOWN_TOPIC_OR_PARTITION answer, a lost connection), when a topic
of interest is missing or leaderless, or when it is older than ``metadata_max_age_ms`` -- and
asks at most one broker at a time, backing off between failed attempts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from client.errors import ClientTimeoutError
from client.future import Future
from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode, error_for

# Answers that mean the client's metadata is out of date: refresh before retrying.
STALE_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_FOR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class TopicInfo:
    name: str
    error: ErrorCode
    internal: bool
    partitions: dict[int, PartitionInfo]

    def error_for_topic(self) -> BrokerError:
        return error_for(self.error, f"topic {self.name!r}: {self.error.info.meaning}")


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)

    @classmethod
    def from_response(cls, body: dict[str, Any]) -> ClusterMetadata:
        brokers = {
            b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"]) for b in body["brokers"]
        }
        topics = {}
        for t in body["topics"]:
            partitions = {
                p["partition"]: PartitionInfo(
                    t["name"],
                    p["partition"],
                    p["leader"],
                    tuple(p["replicas"]),
                    tuple(p["isr"]),
                    _code(p["error_code"]),
                )
                for p in t["partitions"]
            }
            topics[t["name"]] = TopicInfo(
                t["name"], _code(t["error_code"]), t["is_internal"], partitions
            )
        return cls(body["cluster_id"], body["controller_id"], brokers, topics)

    def partitions_for(self, topic: str) -> list[int] | None:
        """The topic's partition numbers, sorted; None while the topic is not known."""
        info = self.topics.get(topic)
        if info is None or info.error is not ErrorCode.NONE or not info.partitions:
            return None
        return sorted(info.partitions)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The node id leading the partition, or None when there is no usable leader."""
        info = self.topics.get(topic)
        p = None if info is None else info.partitions.get(partition)
        if p is None or p.leader < 0 or p.leader not in self.brokers:
            return None
        return p.leader

    def is_complete_for(self, topic: str) -> bool:
        """The topic is known and every partition has a leader."""
        partitions = self.partitions_for(topic)
        return partitions is not None and all(
            self.leader_for(topic, p) is not None for p in partitions
        )


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class MetadataTracker:
    def __init__(
        self,
        network: NetworkClient,
        *,
        allow_auto_topic_creation: bool = False,
        metadata_max_age_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.network = network
        self.current = ClusterMetadata()
        self.updates = 0  # how many responses have been applied
        self._auto_create = allow_auto_topic_creation
        self._max_age = metadata_max_age_ms / 1000
        self._backoff = retry_backoff_ms / 1000
        self._clock = clock
        self._topics: set[str] = set()
        self._all_topics = False
        self._stale = True
        self._updated_at = float("-inf")
        self._retry_at = 0.0
        self._in_flight: Future[dict[str, Any]] | None = None
        self.last_error: BaseException | None = None

    def track_all_topics(self) -> None:
        """Ask for every topic (the admin client's view)."""
        self._all_topics = True
        self._stale = True

    def add_topics(self, topics: Iterable[str]) -> None:
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._stale = True

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if not topics <= self._topics:
            self._stale = True
        self._topics = topics

    def request_update(self) -> None:
        """Refresh at the next ``poll`` (after the backoff, if the last attempt failed)."""
        self._stale = True

    def poll(self) -> None:
        """Send a Metadata request if one is due and none is in flight."""
        now = self._clock()
        if self._in_flight is not None or now < self._retry_at:
            return
        if not self._stale and now - self._updated_at < self._max_age:
            return
        topics = None if self._all_topics else sorted(self._topics)
        future = self.network.send(
            self.network.least_loaded_node(),
            ApiKey.METADATA,
            {"topics": topics, "allow_auto_topic_creation": self._auto_create},
        )
        self._in_flight = future
        future.add_done_callback(self._on_response)

    def _on_response(self, future: Future[dict[str, Any]]) -> None:
        self._in_flight = None
        now = self._clock()
        error = future.exception()
        if error is not None:
            self.last_error = error
            self._stale = True
            self._retry_at = now + self._backoff
            return
        metadata = ClusterMetadata.from_response(future.value)
        self.current = metadata
        self.updates += 1
        self._updated_at = now
        self.network.set_brokers({b.node_id: (b.host, b.port) for b in metadata.brokers.values()})
        # A wanted topic that is missing, failing or leaderless is worth asking about again soon.
        incomplete = any(not metadata.is_complete_for(t) for t in self._topics)
        self._stale = incomplete
        self._retry_at = now + self._backoff if incomplete else 0.0

    def refresh(self, timeout: float) -> ClusterMetadata:
        """Fetch metadata now and wait for it (blocking, driving I/O)."""
        seen = self.updates
        deadline = self._clock() + timeout
        self._stale = True
        self._retry_at = min(self._retry_at, self._clock())
        while self.updates == seen:
            self.poll()
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise ClientTimeoutError(
                    f"no metadata within {timeout:g} s: {self.last_error or 'no response'}"
                )
            self.network.poll(min(remaining, self._backoff))
        return self.current

    def wait_for_topic(self, topic: str, timeout: float) -> TopicInfo:
        """Block until ``topic`` is known with a leader for every partition. A topic error that
        retrying cannot fix raises at once; otherwise the last error is raised at the timeout."""
        self.add_topics([topic])
        deadline = self._clock() + timeout
        while not self.current.is_complete_for(topic):
            info = self.current.topics.get(topic)
            if info is not None and info.error is not ErrorCode.NONE and not info.error.retriable:
                raise info.error_for_topic()
            self.poll()
            remaining = deadline - self._clock()
            if remaining <= 0:
                if info is not None and info.error is not ErrorCode.NONE:
                    raise info.error_for_topic()
                if info is not None:
                    raise ClientTimeoutError(f"topic {topic!r}: no leader within {timeout:g} s")
                raise ClientTimeoutError(
                    f"no metadata for topic {topic!r} within {timeout:g} s: "
                    f"{self.last_error or 'no response'}"
                )
            self.network.poll(min(remaining, self._backoff))
        return self.current.topics[topic]
