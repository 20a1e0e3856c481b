"""The state of a cluster as an operator reads it, from one Metadata snapshot.

``cluster_health`` is a pure function of a ``ClusterMetadata``, so ``odradek cluster status``
and anything else that shows the cluster (tests, a console) count the same way. The counts are
the ones Kafka operators watch (Kafka's controller metrics of the same names):

- offline partitions: no leader (-1), or a leader that is not among the live brokers;
- under-replicated partitions: fewer in-sync replicas than replicas;
- preferred-leader imbalance: the leader is not the first replica. As in Kafka's
  ``PreferredReplicaImbalanceCount``, an offline partition counts here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from client.metadata import BrokerInfo, ClusterMetadata


@dataclass(frozen=True)
class PartitionHealth:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: bool
    under_replicated: bool
    preferred_leader: bool  # the leader is the first replica


@dataclass(frozen=True)
class ClusterHealth:
    cluster_id: str | None
    controller_id: int  # -1 when no broker is controller
    brokers: tuple[BrokerInfo, ...]  # live brokers, by id
    partitions: tuple[PartitionHealth, ...]  # by topic, then partition
    offline_partitions: int
    under_replicated_partitions: int
    preferred_leader_imbalance: int
    absent_replicas: tuple[int, ...]  # broker ids named as replicas but not live

    @property
    def healthy(self) -> bool:
        return not (self.offline_partitions or self.under_replicated_partitions)


def cluster_health(metadata: ClusterMetadata) -> ClusterHealth:
    """Per-partition flags and the cluster-wide counts, internal topics included (an
    under-replicated ``__consumer_offsets`` matters as much as any topic)."""
    live = set(metadata.brokers)
    partitions = []
    absent: set[int] = set()
    for name in sorted(metadata.topics):
        topic = metadata.topics[name]
        for number in sorted(topic.partitions):
            p = topic.partitions[number]
            absent.update(r for r in p.replicas if r not in live)
            partitions.append(
                PartitionHealth(
                    topic=name,
                    partition=number,
                    leader=p.leader,
                    replicas=p.replicas,
                    isr=p.isr,
                    offline=p.leader < 0 or p.leader not in live,
                    under_replicated=len(p.isr) < len(p.replicas),
                    preferred_leader=bool(p.replicas) and p.leader == p.replicas[0],
                )
            )
    return ClusterHealth(
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        brokers=tuple(sorted(metadata.brokers.values(), key=lambda b: b.node_id)),
        partitions=tuple(partitions),
        offline_partitions=sum(p.offline for p in partitions),
        under_replicated_partitions=sum(p.under_replicated for p in partitions),
        preferred_leader_imbalance=sum(not p.preferred_leader for p in partitions),
        absent_replicas=tuple(sorted(absent)),
    )
