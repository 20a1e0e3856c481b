"""DeleteRecords in a cluster: answered by the partition's leader (NOT_LEADER_FOR_PARTITION
elsewhere), and followed by the followers, whose fetch responses carry the leader's log start
(Kafka's kafka-delete-records; DescribeLogDirs of each broker shows it).

As Kafka's DelayedDeleteRecords, the answer waits for the low watermark: the lowest log start
among the leader and the replicas on live brokers, in the ISR or not (Kafka's
``Partition.lowWatermarkIfLeader``). So every live follower has moved its log start by the
time the answer comes, and a follower that leads next serves nothing below it; a paused
follower, still registered, holds the answer until the request's timeout (REQUEST_TIMED_OUT),
out of the ISR or not; a dead one, gone from the live brokers, does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from client.admin import Admin
from client.network import NetworkClient
from client.producer import Producer
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, paused, read_partitions, until
from tooling.cli import main as cli

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: the lag bound of the paused-follower test: it leaves the ISR within seconds
LAG_MS = 2000
#: a session that outlives that test's pause: the paused follower stays a live broker
LONG_SESSION_MS = 30_000


def _trimmed_cluster(make_cluster: Callable[..., Cluster], **settings: Any) -> Cluster:
    """Three brokers and topic ``trim`` (one partition, RF 3, small segments) holding 20
    messages on every replica."""
    cluster = make_cluster(3, settings=settings)
    bootstrap = cluster.brokers[0].bootstrap
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic("trim", 1, 3, configs={"segment_bytes": "120"})
    cluster.wait_for_leaders("trim", 1)
    with Producer(bootstrap, acks="all") as producer:
        for i in range(20):
            producer.send("trim", b"message %02d" % i, partition=0).result(timeout=20)
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        until(lambda: _starts(admin) == {0: (0, 20), 1: (0, 20), 2: (0, 20)}, 20,
              "every replica has the 20 messages")
    return cluster


def _starts(admin: Admin, brokers: list[int] | None = None) -> dict[int, tuple[int, int]]:
    """(log start, log end) of each broker's own replica of ``trim-0``, as it reports it."""
    return {r.broker_id: (r.log_start_offset, r.log_end_offset)
            for r in admin.describe_log_dirs(["trim"], brokers=brokers)}


def _delete_on(process: BrokerProcess, offset: int, timeout_ms: int) -> dict[str, Any]:
    """DeleteRecords of ``trim-0`` below ``offset``, answered by exactly this broker."""
    network = NetworkClient(process.bootstrap, request_timeout_ms=timeout_ms + 20_000)
    try:
        answer = network.send(-1, ApiKey.DELETE_RECORDS, {
            "topics": [{"name": "trim", "partitions": [{"partition": 0, "offset": offset}]}],
            "timeout_ms": timeout_ms}).result(timeout_ms / 1000 + 20)
    finally:
        network.close()
    [result] = answer["topics"][0]["partitions"]
    return dict(result)


@pytest.mark.timeout(120)
def test_records_delete_on_the_leader_is_followed_by_the_followers(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    bootstrap = cluster.brokers[0].bootstrap
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic("trim", 1, 3, configs={"segment_bytes": "120"})
    cluster.wait_for_leaders("trim", 1)
    with Producer(bootstrap, acks="all") as producer:
        for i in range(20):
            producer.send("trim", b"message %02d" % i, partition=0).result(timeout=20)

    def starts(admin: Admin) -> dict[int, tuple[int, int]]:
        return {r.broker_id: (r.log_start_offset, r.log_end_offset)
                for r in admin.describe_log_dirs(["trim"])}

    with Admin(bootstrap, timeout_ms=20_000) as admin:
        until(lambda: starts(admin) == {0: (0, 20), 1: (0, 20), 2: (0, 20)}, 20,
              "every replica has the 20 messages")
        leader = cluster.leaders("trim")[0]
        follower = next(b for b in (0, 1, 2) if b != leader)
        # a follower refuses: the leader answers
        network = NetworkClient(cluster.brokers[follower].bootstrap)
        try:
            answer = network.send(-1, ApiKey.DELETE_RECORDS, {
                "topics": [{"name": "trim", "partitions": [{"partition": 0, "offset": 5}]}],
                "timeout_ms": 1000}).result(20)
        finally:
            network.close()
        [result] = answer["topics"][0]["partitions"]
        assert result["error_code"] == ErrorCode.NOT_LEADER_FOR_PARTITION
        assert starts(admin) == {0: (0, 20), 1: (0, 20), 2: (0, 20)}
        before = {r.broker_id: r.segments for r in admin.describe_log_dirs(["trim"])}

        assert cli.main(["records", "delete", "--topic", "trim", "--partition", "0",
                         "--before", "11", "--bootstrap", bootstrap]) == 0
        # answered once the followers followed the leader's log start
        assert starts(admin) == {0: (11, 20), 1: (11, 20), 2: (11, 20)}
        segments = {r.broker_id: r.segments for r in admin.describe_log_dirs(["trim"])}
        # the segments wholly below 11 went at once (segment_bytes=120: a message or two each)
        assert all(segments[b] < before[b] for b in before), (before, segments)
        tp = TopicPartition("trim", 0)
        assert admin.list_offsets({tp: -2})[tp].offset == 11


@pytest.mark.timeout(150)
def test_a_follower_that_leads_right_after_the_answer_serves_nothing_below_the_offset(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = _trimmed_cluster(make_cluster)
    leader = cluster.leaders("trim")[0]
    with Admin(cluster.brokers[leader].bootstrap, timeout_ms=20_000) as admin:
        tp = TopicPartition("trim", 0)
        assert admin.delete_records({tp: 11}) == {tp: 11}
        # right after the answer, every follower has moved its log start, on its own disk
        assert _starts(admin) == {0: (11, 20), 1: (11, 20), 2: (11, 20)}
    cluster.brokers[leader].kill()
    survivor = cluster.any_running()
    until(lambda: cluster.leaders("trim")[0] not in (leader, -1), cluster.failover_bound,
          f"a new leader of trim-0 after broker {leader} was killed")
    cluster.wait_for_leaders("trim", 1)
    with Admin(survivor.bootstrap, timeout_ms=20_000) as admin:
        assert admin.list_offsets({tp: -2})[tp].offset == 11
    read = read_partitions(survivor.bootstrap, "trim", [0])[0]
    assert read == [(i, b"message %02d" % i) for i in range(11, 20)]


@pytest.mark.timeout(150)
def test_a_paused_follower_holds_the_answer_until_the_timeout_in_the_isr_or_not(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Kafka counts every assigned replica on a live broker: one paused (SIGSTOP) past
    replica_lag_time_max_ms has left the ISR but is still registered, so DeleteRecords
    answers REQUEST_TIMED_OUT after its timeout_ms, the leader's log start moved. Once the
    follower runs again, the request asked again is answered, its log start moved too."""
    cluster = _trimmed_cluster(make_cluster, replica_lag_time_max_ms=LAG_MS,
                               zookeeper_session_timeout_ms=LONG_SESSION_MS)
    leader = cluster.leaders("trim")[0]
    follower = next(b for b in sorted(cluster.brokers) if b != leader)
    with paused(cluster.brokers[follower]):
        until(lambda: follower not in cluster.state("trim", 0)["isr"], 20,
              f"the paused follower {follower} out of the ISR of trim-0")
        timed_out = _delete_on(cluster.brokers[leader], 11, timeout_ms=1000)
        assert follower in cluster.registered()  # still a live broker all along
    assert timed_out["error_code"] == ErrorCode.REQUEST_TIMED_OUT, timed_out
    assert timed_out["low_watermark"] == -1
    assert f"{follower} (at 0)" in timed_out["error_message"]
    with Admin(cluster.brokers[leader].bootstrap, timeout_ms=20_000) as admin:
        assert _starts(admin, [leader]) == {leader: (11, 20)}
        answered = _delete_on(cluster.brokers[leader], 11, timeout_ms=30_000)
        assert answered["error_code"] == ErrorCode.NONE, answered
        assert answered["low_watermark"] == 11
        assert _starts(admin) == {0: (11, 20), 1: (11, 20), 2: (11, 20)}


@pytest.mark.timeout(150)
def test_a_dead_follower_does_not_hold_the_answer_and_follows_once_back(
    make_cluster: Callable[..., Cluster],
) -> None:
    """A follower killed and gone from the live brokers (its session expired) is not waited
    for; restarted, it moves its log start from its leader's fetch answers."""
    cluster = _trimmed_cluster(make_cluster)
    leader = cluster.leaders("trim")[0]
    follower = next(b for b in sorted(cluster.brokers) if b != leader)
    cluster.brokers[follower].kill()
    until(lambda: follower not in cluster.metadata(leader).brokers, cluster.failover_bound,
          f"broker {follower} gone from the leader's live brokers")
    answered = _delete_on(cluster.brokers[leader], 11, timeout_ms=30_000)
    assert answered["error_code"] == ErrorCode.NONE, answered
    assert answered["low_watermark"] == 11
    cluster.brokers[follower].start()
    with Admin(cluster.brokers[leader].bootstrap, timeout_ms=20_000) as admin:
        until(lambda: _starts(admin, [follower]) == {follower: (11, 20)}, 30,
              f"the restarted follower {follower} at the leader's log start")
