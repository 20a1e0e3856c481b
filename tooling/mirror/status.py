"""``odradek mirror status``: where a mirror stands, per source partition -- the group's
committed source offset, the source's log end, the target topic's log end and the lag (source
end minus committed: what a mirror started now would still copy). Offsets differ between the
clusters (the target assigns its own), so the two log ends are not compared with each other."""

from __future__ import annotations

from dataclasses import dataclass

from client.admin import Admin
from client.group_admin import GroupAdmin
from client.offsets import LATEST
from client.records import TopicPartition
from tooling.mirror.naming import Renaming


@dataclass(frozen=True)
class PartitionStatus:
    source: TopicPartition
    committed: int
    source_end: int | None  # None: the source partition is gone
    target: TopicPartition
    target_end: int | None  # None: no such target partition (not mirrored yet)

    @property
    def lag(self) -> int | None:
        return None if self.source_end is None else max(self.source_end - self.committed, 0)


def mirror_status(source: GroupAdmin, target: Admin, group: str, renaming: Renaming
                  ) -> list[PartitionStatus]:
    """Every partition the mirror's group has committed, sorted."""
    committed = source.committed_offsets(group)
    partitions = sorted(committed)
    source_topics = {t.name: t for t in source.describe_topics()}
    target_topics = {t.name: t for t in target.describe_topics()}
    in_source = [tp for tp in partitions if tp.topic in source_topics
                 and tp.partition in source_topics[tp.topic].partitions]
    targets = {tp: TopicPartition(renaming.target_topic(tp.topic), tp.partition)
               for tp in partitions}
    in_target = [t for t in targets.values() if t.topic in target_topics
                 and t.partition in target_topics[t.topic].partitions]
    source_ends = source.list_offsets(dict.fromkeys(in_source, LATEST)) if in_source else {}
    target_ends = target.list_offsets(dict.fromkeys(in_target, LATEST)) if in_target else {}
    return [
        PartitionStatus(
            tp, committed[tp].offset,
            source_ends[tp].offset if tp in source_ends else None,
            targets[tp],
            target_ends[targets[tp]].offset if targets[tp] in target_ends else None,
        )
        for tp in partitions
    ]
