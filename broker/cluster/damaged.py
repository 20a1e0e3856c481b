"""A restarted broker whose logs were damaged steps out of the ISRs before it registers.

Opening a log checks every entry and cuts the log at the first bad one (``PartitionLog.open``),
so a replica can come back short of what it had acknowledged. Kafka's rule is that a replica
whose log end is below the partition's high watermark is not in sync and may not lead. While
the broker was down, the controller normally took it out of the ISRs (its death, or its
controlled shutdown) and a live leader lets it back only once it has caught up. The ISR in
ZooKeeper is stale only when nobody could update it: the partition's leader is down too (the
whole cluster stopped, or this broker was the last leader). Then the first broker to come back
would be elected from that ISR, and with a hole it would lead the others into truncating the
acknowledged messages away. So, before registering, for each damaged replica whose partition
has no live leader, this broker writes the state znode without itself in the ISR (and without
itself as leader), conditional on its version, and tells the controller as a leader does:
the partition waits for an in-sync replica that has the data, and this one fetches it again
once that replica leads. A replica that is the ISR's only member is the only copy: what it lost
is gone, which is logged as an error naming the offsets, and it goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import structlog
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError

from broker.cluster import zk_layout as zk
from broker.cluster.zookeeper import ZooKeeper
from broker.log.partition_log import RecoveryLoss

log = structlog.get_logger(__name__)

_ATTEMPTS = 3  # a state znode changed between the read and the write is read again

Damaged = Mapping[tuple[str, int], tuple[RecoveryLoss, int]]


async def leave_isrs(zoo: ZooKeeper, broker_id: int, damaged: Damaged) -> list[tuple[str, int]]:
    """Take ``broker_id`` out of the ISR of each ``damaged`` partition that has no live leader
    and another in-sync replica. Returns the partitions it left."""
    if not damaged:
        return []
    left = await zoo.call(_leave, zoo.kazoo, broker_id, dict(damaged))
    if left:
        body = json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p} for t, p in left]}).encode()
        await zoo.call(zoo.kazoo.create, f"{zk.ISR_CHANGES}/{zk.ISR_CHANGE_PREFIX}", body,
                       sequence=True, makepath=True)
    return left


def _leave(client: KazooClient, broker_id: int, damaged: Damaged) -> list[tuple[str, int]]:
    left = []
    for (topic, partition), (loss, high_watermark) in sorted(damaged.items()):
        for _ in range(_ATTEMPTS):
            try:
                if _leave_one(client, broker_id, topic, partition, loss, high_watermark):
                    left.append((topic, partition))
                break
            except BadVersionError:
                continue
            except NoNodeError:
                break  # no state (yet, or any more): nothing to leave
    return left


def _leave_one(client: KazooClient, broker_id: int, topic: str, partition: int,
               loss: RecoveryLoss, high_watermark: int) -> bool:
    data, stat = client.get(zk.state_path(topic, partition))
    state = zk.LeaderIsr.decode(topic, partition, data, stat.version)
    if broker_id not in state.isr:
        return False  # out of sync already: a leader takes it back once it has caught up
    live = {int(b) for b in client.get_children(zk.BROKER_IDS) if b.isdigit()}
    if state.leader != broker_id and state.leader in live:
        return False  # a live leader keeps the ISR: this replica counts once caught up
    others = tuple(b for b in state.isr if b != broker_id)
    if not others:
        log.error("replica.damaged_only_copy", topic=topic, partition=partition,
                  first_offset_dropped=loss.first_offset, old_log_end_offset=loss.old_end,
                  high_watermark=high_watermark, reason=loss.reason,
                  detail="the only in-sync replica lost these offsets: they are gone")
        return False
    leader = zk.NO_LEADER if state.leader == broker_id else state.leader
    new = zk.LeaderIsr(leader, state.leader_epoch, others, state.controller_epoch)
    client.set(zk.state_path(topic, partition), new.encode(), version=stat.version)
    log.warning("replica.damaged_left_isr", topic=topic, partition=partition,
                first_offset_dropped=loss.first_offset, old_log_end_offset=loss.old_end,
                high_watermark=high_watermark, isr=list(others), was_leader=leader != state.leader)
    return True
