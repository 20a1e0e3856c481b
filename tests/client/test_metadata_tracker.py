"""``MetadataTracker`` with a stub network and a fake clock: which topics each Metadata request
names, and how each answer is merged into ``current``. No sockets, no sleeps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from client.errors import BrokerConnectionError
from client.future import Future
from client.metadata import BEHIND_LIMIT, MetadataTracker
from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

BACKOFF_MS = 100
MAX_AGE_MS = 60_000


class StubNetwork:
    """Records each Metadata request; the test answers it by hand, as the broker would."""

    def __init__(self) -> None:
        self.asked: list[list[str] | None] = []
        self.nodes: list[int] = []  # the broker each request went to
        self.avoided: list[int | None] = []
        self.futures: list[Future[dict[str, Any]]] = []
        self.brokers: dict[int, tuple[str, int]] = {}

    def least_loaded_node(self, avoid: int | None = None) -> int:
        self.avoided.append(avoid)
        return 1 if avoid == 0 else 0

    def send(
        self, node_id: int, api_key: ApiKey, body: dict[str, Any], **_: Any
    ) -> Future[dict[str, Any]]:
        assert api_key is ApiKey.METADATA
        future: Future[dict[str, Any]] = Future()
        self.nodes.append(node_id)
        self.asked.append(body["topics"])
        self.futures.append(future)
        return future

    def set_brokers(self, brokers: dict[int, tuple[str, int]]) -> None:
        self.brokers = dict(brokers)

    def poll(self, timeout: float = 0.0) -> None:
        """Nothing to drive: answers come from the test."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def answer(
    topics: Mapping[str, int | ErrorCode], *, leader: int = 0, brokers: tuple[int, ...] = (0,),
    epoch: int = 0,
) -> dict[str, Any]:
    """A Metadata response: ``name -> partition count`` (leader ``leader`` at ``epoch``) or a
    topic error."""
    described = []
    for name, spec in topics.items():
        if isinstance(spec, ErrorCode):
            described.append(
                {"error_code": int(spec), "name": name, "is_internal": False, "partitions": []}
            )
            continue
        described.append({
            "error_code": 0, "name": name, "is_internal": False,
            "partitions": [
                {"error_code": 0, "partition": p, "leader": leader, "replicas": [leader],
                 "isr": [leader], "leader_epoch": epoch}
                for p in range(spec)
            ],
        })
    return {
        "brokers": [{"node_id": b, "host": "127.0.0.1", "port": 9000 + b} for b in brokers],
        "cluster_id": "A" * 22,
        "controller_id": brokers[0],
        "topics": described,
    }


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def network() -> StubNetwork:
    return StubNetwork()


@pytest.fixture
def tracker(network: StubNetwork, clock: Clock) -> MetadataTracker:
    return MetadataTracker(
        cast(NetworkClient, network),
        metadata_max_age_ms=MAX_AGE_MS,
        retry_backoff_ms=BACKOFF_MS,
        clock=clock,
    )


def learn(tracker: MetadataTracker, network: StubNetwork, topics: Mapping[str, int]) -> None:
    """Track ``topics`` and answer the request that asks for them."""
    tracker.add_topics(topics)
    tracker.poll()
    network.futures[-1].succeed(answer(topics))


def test_each_new_topic_is_asked_for_alone_whatever_the_number_known(
    tracker: MetadataTracker, network: StubNetwork
) -> None:
    learn(tracker, network, {"a": 1, "b": 2})
    for i in range(200):
        name = f"topic-{i}"
        tracker.add_topics([name])
        tracker.poll()
        assert network.asked[-1] == [name]  # not every topic known so far
        network.futures[-1].succeed(answer({name: 1}))
    assert len(network.asked) == 201
    assert set(tracker.current.topics) == {"a", "b"} | {f"topic-{i}" for i in range(200)}
    assert all(tracker.current.is_complete_for(t) for t in tracker.current.topics)


def test_a_partial_answer_replaces_brokers_and_the_asked_topics_and_keeps_the_others(
    tracker: MetadataTracker, network: StubNetwork
) -> None:
    learn(tracker, network, {"a": 1, "b": 1})
    kept = tracker.current.topics["b"]
    tracker.request_update(["a"])  # e.g. NOT_LEADER_FOR_PARTITION for a-0: its leader moved
    tracker.poll()
    assert network.asked[-1] == ["a"]
    network.futures[-1].succeed(answer({"a": 1}, leader=1, brokers=(1, 2)))
    current = tracker.current
    assert current.leader_for("a", 0) == 1
    assert current.topics["b"] is kept  # not asked: kept as it was
    assert sorted(current.brokers) == [1, 2] and current.controller_id == 1
    assert current.leader_for("b", 0) is None  # its leader, 0, is no longer a broker


def test_a_topic_whose_leader_is_gone_after_a_merge_is_asked_for_again(
    tracker: MetadataTracker, network: StubNetwork, clock: Clock
) -> None:
    learn(tracker, network, {"a": 1, "b": 1})
    tracker.request_update(["a"])
    tracker.poll()
    network.futures[-1].succeed(answer({"a": 1}, leader=1, brokers=(1,)))
    assert tracker.current.leader_for("b", 0) is None  # broker 0 left the cluster
    clock.now += BACKOFF_MS / 1000
    tracker.poll()
    assert network.asked[-1] == ["b"]
    network.futures[-1].succeed(answer({"b": 1}, leader=1, brokers=(1,)))
    assert tracker.current.leader_for("b", 0) == 1


@pytest.mark.parametrize("topics", [["a"], None], ids=["that-topic", "all"])
def test_staleness_reported_while_a_request_is_in_flight_is_not_lost(
    tracker: MetadataTracker, network: StubNetwork, topics: list[str] | None
) -> None:
    """The answer in flight may predate the leader change that made someone report the topic
    stale (seed of many "producer retries to the old leader" loops): ask again after it."""
    learn(tracker, network, {"a": 1, "b": 1})
    tracker.add_topics(["c"])
    tracker.poll()
    assert network.asked[-1] == ["c"]
    # NOT_LEADER_FOR_PARTITION for a-0 (or a lost connection) meanwhile
    if topics is None:
        tracker.request_update()
    else:
        tracker.request_update(topics)
    tracker.poll()
    assert len(network.asked) == 2  # one request at a time
    network.futures[-1].succeed(answer({"c": 1}))
    tracker.poll()
    assert len(network.asked) == 3
    assert network.asked[-1] == (["a"] if topics else ["a", "b", "c"])


def test_a_topic_reported_with_an_error_is_kept_with_it_and_asked_for_again(
    tracker: MetadataTracker, network: StubNetwork, clock: Clock
) -> None:
    learn(tracker, network, {"a": 1})
    tracker.add_topics(["new"])
    tracker.poll()
    network.futures[-1].succeed(answer({"new": ErrorCode.LEADER_NOT_AVAILABLE}))
    assert tracker.current.topics["new"].error is ErrorCode.LEADER_NOT_AVAILABLE
    assert tracker.current.is_complete_for("a")
    tracker.poll()
    assert len(network.asked) == 2  # backing off
    clock.now += BACKOFF_MS / 1000
    tracker.poll()
    assert network.asked[-1] == ["new"]
    network.futures[-1].succeed(answer({"new": 2}))
    assert tracker.current.partitions_for("new") == [0, 1]


def test_a_failed_request_asks_for_the_same_topics_after_the_backoff(
    tracker: MetadataTracker, network: StubNetwork, clock: Clock
) -> None:
    learn(tracker, network, {"a": 1})
    tracker.add_topics(["b"])
    tracker.poll()
    network.futures[-1].fail(BrokerConnectionError("lost"))
    tracker.poll()
    assert len(network.asked) == 2
    clock.now += BACKOFF_MS / 1000
    tracker.poll()
    assert network.asked[-1] == ["b"]


def test_the_periodic_refresh_asks_for_every_tracked_topic(
    tracker: MetadataTracker, network: StubNetwork, clock: Clock
) -> None:
    learn(tracker, network, {"a": 1})
    learn(tracker, network, {"b": 1})
    tracker.set_topics(["b", "c"])  # "a" no longer wanted; "c" new
    tracker.poll()
    assert network.asked[-1] == ["c"]
    network.futures[-1].succeed(answer({"c": 1}))
    tracker.poll()
    assert len(network.asked) == 3  # nothing due
    clock.now += MAX_AGE_MS / 1000
    tracker.poll()
    assert network.asked[-1] == ["b", "c"]
    network.futures[-1].succeed(answer({"b": 1, "c": 1}))
    assert set(tracker.current.topics) == {"b", "c"}  # a full answer replaces the cache


def test_tracking_all_topics_asks_for_all_and_replaces_the_cache(
    tracker: MetadataTracker, network: StubNetwork
) -> None:
    learn(tracker, network, {"a": 1})
    tracker.track_all_topics()
    tracker.poll()
    assert network.asked[-1] is None
    network.futures[-1].succeed(answer({"x": 1}))
    assert set(tracker.current.topics) == {"x"}


def test_an_answer_naming_an_older_leader_keeps_the_newer_one_and_asks_another_broker(
    tracker: MetadataTracker, network: StubNetwork, clock: Clock
) -> None:
    """KIP-320: broker 0, cut off from ZooKeeper, still believes it leads at epoch 4; the
    client already knows broker 1 leads at epoch 5. It keeps broker 1 and asks broker 1."""
    learn(tracker, network, {"a": 2})
    tracker.request_update(["a"])
    tracker.poll()
    network.futures[-1].succeed(answer({"a": 2}, leader=1, brokers=(0, 1), epoch=5))
    known = tracker.current.topics["a"]
    tracker.request_update(["a"])
    tracker.poll()
    assert network.nodes[-1] == 0
    network.futures[-1].succeed(answer({"a": 2}, leader=0, brokers=(0, 1), epoch=4))
    assert tracker.current.topics["a"].partitions == known.partitions  # not the old leader
    assert tracker.current.leader_for("a", 0) == 1
    clock.now += BACKOFF_MS / 1000
    tracker.poll()  # asked again, of another broker than the one that was behind
    assert network.asked[-1] == ["a"] and network.avoided[-1] == 0 and network.nodes[-1] == 1
    network.futures[-1].succeed(answer({"a": 2}, leader=1, brokers=(0, 1), epoch=5))
    assert tracker.current.leader_for("a", 0) == 1
    tracker.request_update(["a"])
    tracker.poll()
    assert network.avoided[-1] is None  # an answer that was not behind: any broker again


def test_older_epochs_answered_again_and_again_are_believed_in_the_end(
    tracker: MetadataTracker, network: StubNetwork, clock: Clock
) -> None:
    """A topic deleted and made again starts its epochs over: after BEHIND_LIMIT answers in
    a row, the client takes them."""
    learn(tracker, network, {"a": 1})
    tracker.request_update(["a"])
    tracker.poll()
    network.futures[-1].succeed(answer({"a": 1}, leader=1, brokers=(0, 1), epoch=7))
    for _ in range(BEHIND_LIMIT - 1):
        tracker.request_update(["a"])
        clock.now += BACKOFF_MS / 1000
        tracker.poll()
        network.futures[-1].succeed(answer({"a": 1}, leader=0, brokers=(0, 1), epoch=0))
        assert tracker.current.leader_for("a", 0) == 1
    clock.now += BACKOFF_MS / 1000
    tracker.poll()
    network.futures[-1].succeed(answer({"a": 1}, leader=0, brokers=(0, 1), epoch=0))
    assert tracker.current.leader_for("a", 0) == 0
    assert tracker.current.topics["a"].partitions[0].leader_epoch == 0
