"""What a broker knows of the cluster, fed by the controller's UpdateMetadata: live brokers, the
controller, every partition's leader, replicas and ISR, and topic configs.

Metadata requests are answered from here, never from ZooKeeper (Kafka's lesson: no ZooKeeper
reads in hot paths). Each update replaces the whole view; waiters (CreateTopics waiting for
its topic to have leaders) are woken by ``changed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from broker.topics import Topic


@dataclass(frozen=True)
class LiveBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    #: advertised (host, port) by listener name
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address_for(self, listener: str) -> tuple[str, int]:
        """Where a client that came in on ``listener`` reaches this broker (Kafka: the same
        listener's endpoint; the inter-broker address if it has none)."""
        return self.endpoints.get(listener, (self.host, self.port))


@dataclass(frozen=True)
class PartitionView:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


@dataclass
class MetadataCache:
    controller_id: int = -1
    controller_epoch: int = -1
    brokers: dict[int, LiveBroker] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionView]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: called with (topic, partitions) when a topic appears or grows, (topic, None) when it
    #: goes -- the group coordinator rebalances the groups subscribed to it
    listeners: list[Callable[[str, int | None], None]] = field(default_factory=list)
    _changed: trio.Event = field(default_factory=trio.Event)

    def apply(self, body: dict[str, Any]) -> None:
        """Take a whole UpdateMetadata request's view."""
        before = {t: len(ps) for t, ps in self.partitions.items()}
        self.controller_id = body["controller_id"]
        self.controller_epoch = body["controller_epoch"]
        self.brokers = {
            b["node_id"]: LiveBroker(b["node_id"], b["host"], b["port"], b["rack"],
                                     {e["listener"]: (e["host"], e["port"])
                                      for e in b["endpoints"]})
            for b in body["live_brokers"]
        }
        partitions: dict[str, dict[int, PartitionView]] = {}
        for p in body["partitions"]:
            partitions.setdefault(p["topic"], {})[p["partition"]] = PartitionView(
                p["leader"], p["leader_epoch"], tuple(p["isr"]), tuple(p["replicas"]))
        self.partitions = partitions
        self.configs = {t["name"]: dict(t["configs"]) for t in body["topics"]}
        after = {t: len(ps) for t, ps in partitions.items()}
        for topic in sorted(before.keys() | after.keys()):
            if before.get(topic) != after.get(topic):
                for listener in self.listeners:
                    listener(topic, after.get(topic))
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        """Wait for the next update."""
        await self._changed.wait()

    # ------------------------------------------------------------------------- questions

    def get(self, name: str) -> Topic | None:
        """The topic as the coordinator and handlers see it (partition count, configs)."""
        parts = self.partitions.get(name)
        if parts is None:
            return None
        rf = max((len(v.replicas) for v in parts.values()), default=0)
        return Topic(name, len(parts), rf, self.configs.get(name, {}))

    def all(self) -> list[Topic]:
        return [t for t in (self.get(name) for name in sorted(self.partitions)) if t]

    def partition(self, topic: str, partition: int) -> PartitionView | None:
        return self.partitions.get(topic, {}).get(partition)

    def leader(self, topic: str, partition: int) -> LiveBroker | None:
        view = self.partition(topic, partition)
        return None if view is None else self.brokers.get(view.leader)
