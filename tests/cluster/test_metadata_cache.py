"""A broker's metadata cache (``broker.cluster.metadata_cache``), fed with the UpdateMetadata
bodies the controller model builds: the view it keeps, the topics it reports, and the listeners
told when topics appear, grow or go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import trio
import trio.testing

from broker.cluster.controller_model import ControllerModel
from broker.cluster.metadata_cache import LiveBroker, MetadataCache, PartitionView
from broker.cluster.zk_layout import NO_LEADER, BrokerRegistration
from broker.topics import Topic


class Controller:
    """Just enough of a controller to make UpdateMetadata bodies."""

    def __init__(self, live: Sequence[int]) -> None:
        self.model = ControllerModel(0, 3)
        self.model.live = {b: BrokerRegistration(b, "127.0.0.1", 9092 + b, timestamp="1")
                           for b in live}

    def create(self, topic: str, assignment: Mapping[int, Sequence[int]],
               configs: Mapping[str, str] | None = None) -> None:
        new = self.model.add_topic(topic, assignment, configs or {})
        for change in self.model.elect_new(new):
            self.model.written(change, 0)

    def kill(self, broker_id: int) -> None:
        self.model.brokers_gone([broker_id])
        for change in self.model.elect_after_broker_change():
            self.model.written(change, change.state.zk_version + 1)


def listening(cache: MetadataCache) -> list[tuple[str, int | None]]:
    calls: list[tuple[str, int | None]] = []
    cache.listeners.append(lambda topic, count: calls.append((topic, count)))
    return calls


def test_an_empty_cache_knows_nothing():
    cache = MetadataCache()
    assert (cache.controller_id, cache.controller_epoch) == (-1, -1)
    assert cache.get("t") is None and cache.all() == []
    assert cache.partition("t", 0) is None and cache.leader("t", 0) is None


def test_apply_takes_the_whole_view():
    controller = Controller(live=[0, 1, 2])
    controller.create("t", {0: (0, 1, 2), 1: (1, 2, 0)}, {"cleanup_policy": "compact"})
    controller.create("u", {0: (2,)})
    cache = MetadataCache()
    cache.apply(controller.model.update_metadata())
    assert (cache.controller_id, cache.controller_epoch) == (0, 3)
    assert cache.brokers == {
        b: LiveBroker(b, "127.0.0.1", 9092 + b, None, {"PLAINTEXT": ("127.0.0.1", 9092 + b)})
        for b in (0, 1, 2)
    }
    assert cache.partition("t", 1) == PartitionView(1, 0, (1, 2, 0), (1, 2, 0))
    assert cache.leader("t", 1) == LiveBroker(
        1, "127.0.0.1", 9093, None, {"PLAINTEXT": ("127.0.0.1", 9093)}
    )
    assert cache.get("t") == Topic("t", 2, 3, {"cleanup_policy": "compact"})
    assert cache.get("u") == Topic("u", 1, 1, {})
    assert cache.get("v") is None
    assert [t.name for t in cache.all()] == ["t", "u"]


def test_a_dead_leader_is_no_leader_in_the_cache():
    controller = Controller(live=[0, 1])
    controller.create("t", {0: (0,), 1: (1, 0)})
    cache = MetadataCache()
    controller.kill(0)
    cache.apply(controller.model.update_metadata())
    assert cache.partition("t", 0) == PartitionView(NO_LEADER, 1, (0,), (0,))
    assert cache.leader("t", 0) is None
    assert cache.leader("t", 1) == LiveBroker(
        1, "127.0.0.1", 9093, None, {"PLAINTEXT": ("127.0.0.1", 9093)}
    )
    assert sorted(cache.brokers) == [1]


def test_listeners_hear_of_topics_appearing_growing_and_going():
    controller = Controller(live=[0, 1])
    cache = MetadataCache()
    calls = listening(cache)
    controller.create("b", {0: (0, 1)})
    controller.create("a", {0: (1, 0), 1: (0, 1)})
    cache.apply(controller.model.update_metadata())
    assert calls == [("a", 2), ("b", 1)]  # appeared, in name order
    calls.clear()
    cache.apply(controller.model.update_metadata())
    controller.kill(1)  # leaders and ISRs change; partition counts do not
    cache.apply(controller.model.update_metadata())
    assert calls == []
    controller.create("b", {0: (0, 1), 1: (0,), 2: (0,)})  # grew
    cache.apply(controller.model.update_metadata())
    assert calls == [("b", 3)]
    calls.clear()
    controller.model.begin_deletion("a")  # deleted
    cache.apply(controller.model.update_metadata())
    assert calls == [("a", None)]
    assert cache.get("a") is None and cache.partition("a", 0) is None


def test_every_listener_is_called():
    controller = Controller(live=[0])
    controller.create("t", {0: (0,)})
    cache = MetadataCache()
    first, second = listening(cache), listening(cache)
    cache.apply(controller.model.update_metadata())
    assert first == second == [("t", 1)]


async def test_changed_wakes_waiters_on_the_next_update():
    controller = Controller(live=[0])
    cache = MetadataCache()
    woken: list[int] = []

    async def wait(n: int) -> None:
        await cache.changed()
        woken.append(n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, 1)
        nursery.start_soon(wait, 2)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == []
        controller.create("t", {0: (0,)})
        cache.apply(controller.model.update_metadata())
    assert sorted(woken) == [1, 2]
    # a later waiter waits for the update after that one
    with trio.move_on_after(0.05) as scope:
        await cache.changed()
    assert scope.cancelled_caught
