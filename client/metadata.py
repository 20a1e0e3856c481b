"""What the clients know about the cluster, and keeping it current.

``ClusterMetadata`` is an immutable snapshot parsed from one Metadata response: brokers, the
controller, the cluster id, each topic's partitions with leader, replicas and ISR.
``MetadataTracker`` decides when to ask again -- when someone reported it stale (a
NOT_LEADER_FOR_PARTITION or UNKNOWN_TOPIC_OR_PARTITION answer, a lost connection), when a topic
of interest is missing or leaderless, or when it is older than ``metadata_max_age_ms`` -- and
asks at most one broker at a time, backing off between failed attempts.

It asks only for what it needs: a new topic, or one reported stale, is asked for alone and the
answer is merged into ``current`` (brokers and controller replaced, the asked topics replaced,
every other topic kept), so learning the N-th topic costs the same as learning the first (Kafka's
KIP-526). Only the periodic refresh, a lost connection or ``refresh()`` ask for every tracked
topic, and their answer replaces the snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from client.durations import seconds_text
from client.errors import ClientTimeoutError
from client.future import Future
from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode, error_for

#: the Metadata version asked for: v1 says each partition's leader epoch
METADATA_VERSION = 1
#: answers in a row naming older leaders for a topic, from different brokers, after which they
#: are believed (the topic was deleted and made again: its epochs started over)
BEHIND_LIMIT = 3

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
    leader_epoch: int = -1  # -1: not said (a v0 answer)


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
                    p.get("leader_epoch", -1),
                )
                for p in t["partitions"]
            }
            topics[t["name"]] = TopicInfo(
                t["name"], _code(t["error_code"]), t["is_internal"], partitions
            )
        return cls(body["cluster_id"], body["controller_id"], brokers, topics)

    def with_newest_leaders(self, known: ClusterMetadata, only: set[str] | None = None
                            ) -> tuple[ClusterMetadata, set[str]]:
        """This answer, with each partition (of the ``only`` topics) whose leader epoch is
        older than ``known``'s kept as ``known`` has it; and the topics where that happened.
        An answer from a broker that has not heard of a newer leader -- cut off from
        ZooKeeper, still believing it leads -- must not send the client back to the old one
        (Kafka's KIP-320)."""
        behind: set[str] = set()
        topics = dict(self.topics)
        for name, info in self.topics.items():
            old = known.topics.get(name)
            if old is None or (only is not None and name not in only):
                continue
            newest = {
                p: old.partitions[p] if p in old.partitions
                and old.partitions[p].leader_epoch > part.leader_epoch >= 0 else part
                for p, part in info.partitions.items()
            }
            if any(newest[p] is not part for p, part in info.partitions.items()):
                behind.add(name)
                topics[name] = TopicInfo(info.name, info.error, info.internal, newest)
        if not behind:
            return self, behind
        return ClusterMetadata(self.cluster_id, self.controller_id, self.brokers, topics), behind

    def merged(self, answer: ClusterMetadata, asked: Iterable[str]) -> ClusterMetadata:
        """This snapshot updated by ``answer``, the response to a request for ``asked`` only:
        brokers, controller and cluster id as answered, each asked topic as answered (gone if
        the answer leaves it out, kept with its error if it reports one), every other topic
        kept as it was. A new snapshot, so one held by a caller never changes under it; the
        C-level copy of the topic map is the only part that grows with the topics known
        (about 2 us per thousand), as in Kafka's ``MetadataCache.mergeWith``."""
        topics = dict(self.topics)
        for name in asked:
            topics.pop(name, None)
        topics.update(answer.topics)
        return ClusterMetadata(answer.cluster_id, answer.controller_id, answer.brokers, topics)

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
        self._stale = True  # ask for every tracked topic at the next poll
        self._stale_topics: set[str] = set()  # tracked topics to ask for alone
        self._updated_at = float("-inf")  # of the last answer about every tracked topic
        self._retry_at = 0.0
        self._in_flight: Future[dict[str, Any]] | None = None
        self.last_error: BaseException | None = None
        #: the broker whose last answer named leaders older than known: asked last next time
        self._behind_node: int | None = None
        #: per topic, answers in a row that named older leaders; after BEHIND_LIMIT of them
        #: (from different brokers) the epochs are taken as they are: the topic was made anew
        self._behind_answers: dict[str, int] = {}

    def track_all_topics(self) -> None:
        """Ask for every topic (the admin client's view)."""
        self._all_topics = True
        self._stale = True

    def add_topics(self, topics: Iterable[str]) -> None:
        """Track ``topics`` too; the new ones are asked for (alone) at the next ``poll``."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._mark_stale(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        """Track exactly ``topics``; the new ones are asked for at the next ``poll``."""
        topics = set(topics)
        new = topics - self._topics
        self._topics = topics
        self._stale_topics &= topics
        self._mark_stale(new)

    def request_update(self, topics: Iterable[str] | None = None) -> None:
        """Refresh ``topics`` (every tracked topic for None: a lost connection may hide any
        change) at the next ``poll`` -- after the backoff, if the last attempt failed. Pass the
        topic of a NOT_LEADER_FOR_PARTITION answer, so its cost does not grow with the number
        of topics tracked."""
        if topics is None:
            self._stale = True
        else:
            self._mark_stale(topics)

    def _mark_stale(self, topics: Iterable[str]) -> None:
        if self._all_topics:
            self._stale = True  # every request asks for all topics anyway
        else:
            self._stale_topics.update(t for t in topics if t in self._topics)

    def poll(self) -> None:
        """Send a Metadata request if one is due and none is in flight."""
        now = self._clock()
        if self._in_flight is not None or now < self._retry_at:
            return
        asked: frozenset[str] | None  # the topics of a partial request; None: all tracked
        if self._stale or now - self._updated_at >= self._max_age:
            topics = None if self._all_topics else sorted(self._topics)
            asked = None
            self._stale = False
            self._stale_topics.clear()
        elif self._stale_topics:
            topics = sorted(self._stale_topics)
            asked = frozenset(topics)
            self._stale_topics.clear()
        else:
            return
        # Flags raised from here on stay raised: the answer may predate what raised them.
        node = self.network.least_loaded_node(avoid=self._behind_node)
        future = self.network.send(
            node,
            ApiKey.METADATA,
            {"topics": topics, "allow_auto_topic_creation": self._auto_create},
            api_version=METADATA_VERSION,
        )
        self._in_flight = future
        future.add_done_callback(partial(self._on_response, asked, node))

    def _on_response(self, asked: frozenset[str] | None, node: int,
                     future: Future[dict[str, Any]]) -> None:
        self._in_flight = None
        now = self._clock()
        error = future.exception()
        if error is not None:
            self.last_error = error
            if asked is None:
                self._stale = True
            else:
                self._mark_stale(asked)
            self._retry_at = now + self._backoff
            return
        previous = self.current
        answer = ClusterMetadata.from_response(future.value)
        _, behind = answer.with_newest_leaders(previous)
        behind = self._still_behind(behind, node)
        if behind:
            answer, _ = answer.with_newest_leaders(previous, only=behind)
        if asked is None:
            metadata = answer
            self._updated_at = now
            check: Iterable[str] = self._topics
        else:
            metadata = previous.merged(answer, asked)
            # Kept topics may have lost their leader only if the brokers changed.
            check = asked if answer.brokers == previous.brokers else self._topics
        self.current = metadata
        self.updates += 1
        self.network.set_brokers({b.node_id: (b.host, b.port) for b in metadata.brokers.values()})
        # A wanted topic that is missing, failing or leaderless, or whose answer was behind,
        # is worth asking about again soon (of another broker, for the latter).
        incomplete = [t for t in check if t in self._topics and not metadata.is_complete_for(t)]
        if incomplete or behind:
            self._mark_stale([*incomplete, *behind])
            self._retry_at = now + self._backoff
        else:
            self._retry_at = 0.0

    def _still_behind(self, behind: set[str], node: int) -> set[str]:
        """The topics of ``behind`` to keep the known leaders of: all of them, until
        BEHIND_LIMIT answers in a row named older leaders for a topic."""
        self._behind_node = node if behind else None
        for topic in list(self._behind_answers):
            if topic not in behind:
                del self._behind_answers[topic]
        kept = set()
        for topic in behind:
            count = self._behind_answers.get(topic, 0) + 1
            if count < BEHIND_LIMIT:
                self._behind_answers[topic] = count
                kept.add(topic)
            else:
                self._behind_answers.pop(topic, None)
        return kept

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
                    f"no metadata within {seconds_text(timeout)}: "
                    f"{self.last_error or 'no response'}"
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
                    raise ClientTimeoutError(
                        f"topic {topic!r}: no leader within {seconds_text(timeout)}"
                    )
                raise ClientTimeoutError(
                    f"no metadata for topic {topic!r} within {seconds_text(timeout)}: "
                    f"{self.last_error or 'no response'}"
                )
            self.network.poll(min(remaining, self._backoff))
        return self.current.topics[topic]
