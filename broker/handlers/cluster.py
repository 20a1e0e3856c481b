"""The requests brokers send each other in cluster mode -- LeaderAndIsr, UpdateMetadata and
StopReplica from the controller, ControlledShutdown to it -- and the elections and
reassignments an admin asks the controller for.

Each goes to the cluster (``ctx.cluster``); a single broker (no ``zookeeper_connect``) is its
own controller and takes none of the controller's requests: they are answered with
STALE_CONTROLLER_EPOCH, which no controller can get past (``broker.cluster.single``).
"""

from __future__ import annotations

from typing import Any

from broker.cluster import Cluster
from broker.context import BrokerContext
from protocol.errors import ErrorCode
from protocol.partitions import TopicPartition
from protocol.schema import for_version
from protocol.wire import Request


def _check_cluster(ctx: BrokerContext, request: Request) -> None:
    """With an authorizer: what ``API_ACLS`` lists on the cluster (ClusterAction for the
    requests between brokers, Alter for elections and reassignments)."""
    ctx.security.require_cluster(request.api.key)


def _node(ctx: BrokerContext, request: Request) -> Cluster:
    _check_cluster(ctx, request)
    return ctx.cluster


async def leader_and_isr(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    return await _node(ctx, request).leader_and_isr(request.body)


async def update_metadata(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    return await _node(ctx, request).update_metadata(request.body)


async def stop_replica(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    return await _node(ctx, request).stop_replica(request.body)


async def controlled_shutdown(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    decision = await _node(ctx, request).controlled_shutdown(request.body["broker_id"])
    answer = {"error_code": 0, "error_message": None,
              "remaining_partitions": [{"topic": t, "partition": p}
                                       for t, p in decision.remaining],
              "unmovable_partitions": [{"topic": t, "partition": p}
                                       for t, p in decision.unmovable]}
    # v0 has no unmovable_partitions: a broker that asks v0 only sees them not remaining
    return dict(for_version(request.api.response, answer, request.header.api_version))


async def elect_leaders(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    cluster = _node(ctx, request)
    wanted = request.body["topic_partitions"]
    tps = None if wanted is None else [
        TopicPartition(t["topic"], p) for t in wanted for p in t["partitions"]]
    elected = await cluster.preferred_election(tps)
    return {"error_code": 0, "error_message": None,
            "elected": [{"topic": t, "partition": p} for t, p in elected]}


async def offsets_for_leader_epoch(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    return _node(ctx, request).offsets_for_leader_epoch(request.body)


async def alter_partition_reassignments(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    cluster = _node(ctx, request)
    wanted = [(TopicPartition(t["name"], p["partition"]), p["replicas"])
              for t in request.body["topics"] for p in t["partitions"]]
    problems = await cluster.reassign(wanted)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, _ in wanted:
        problem = problems.get(tp)
        topics.setdefault(tp.topic, []).append({
            "partition": tp.partition,
            "error_code": 0 if problem is None else int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
            "error_message": problem,
        })
    return {"error_code": 0, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
