"""Target topics that follow the source's: created with the same partition count, replication
factor (at most the target's brokers) and topic configs; grown when the source's grows. A
message keeps its partition number, so this must run before a set is sent: a target topic
with fewer partitions than its source would have nowhere to put the extra ones.

Partitions are never removed (Kafka has no way to), and configs are copied when the target
topic is created, not kept in step afterwards: the target's operators may tune it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from client.admin import Admin
from tooling.mirror.naming import Renaming, TopicSelection

log = logging.getLogger("odradek.mirror")

#: topic configs that say how a log is kept, copied to a new target topic when the source
#: overrides them; the rest (e.g. message_timestamp_type: the target stamps its own appends)
#: are the target's to choose
COPIED_CONFIGS = frozenset({
    "cleanup_policy", "retention_ms", "retention_bytes", "segment_bytes", "segment_ms",
    "max_message_bytes", "min_cleanable_dirty_ratio", "delete_retention_ms",
    "min_insync_replicas", "unclean_leader_election_enable",
})


@dataclass(frozen=True)
class MirroredTopic:
    source: str
    target: str
    partitions: int


class TopicSync:
    def __init__(self, source: Admin, target: Admin, selection: TopicSelection,
                 renaming: Renaming, note: Callable[[str], None] = log.info) -> None:
        self._source = source
        self._target = target
        self._selection = selection
        self._renaming = renaming
        self._note = note  # what the mirror's user is told: each topic created or grown
        self.topics: dict[str, MirroredTopic] = {}  # by source topic, as of the last sync

    def sync(self) -> dict[str, MirroredTopic]:
        """Create or grow the target topic of every selected source topic; the mirrored
        topics by source name."""
        sources = {t.name: t for t in self._source.describe_topics() if not t.internal}
        selected = self._selection.select(sources)
        targets = {t.name: t for t in self._target.describe_topics(None)}
        brokers = len(self._target.describe_cluster().brokers)
        new = [t for t in selected if self._renaming.target_topic(t) not in targets]
        configs = self._source.describe_configs(new) if new else {}
        out: dict[str, MirroredTopic] = {}
        for name in selected:
            info = sources[name]
            partitions = len(info.partitions)
            target = self._renaming.target_topic(name)
            existing = targets.get(target)
            if existing is None:
                replicas = max((len(p.replicas) for p in info.partitions.values()), default=1)
                copied = {c.name: c.value for c in configs.get(name, ())
                          if c.source == "topic" and c.name in COPIED_CONFIGS
                          and c.value is not None}
                self._create(target, partitions, min(replicas, brokers), copied)
            elif len(existing.partitions) < partitions:
                self._note(f"mirror: target topic {target} grows from "
                           f"{len(existing.partitions)} to {partitions} partitions")
                self._target.create_partitions(target, partitions)
            out[name] = MirroredTopic(name, target, partitions)
        self.topics = out
        return out

    def _create(self, name: str, partitions: int, replicas: int, configs: dict[str, str]
                ) -> None:
        # exist_ok: another mirror process of the group may have created it first
        if self._target.create_topic(name, partitions, replicas, configs, exist_ok=True):
            copied = "".join(f", {k}={v}" for k, v in sorted(configs.items()))
            self._note(f"mirror: created target topic {name} ({partitions} partitions, "
                       f"replication factor {replicas}{copied})")
