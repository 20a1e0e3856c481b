"""DeleteRecords in a cluster: answered by the partition's leader (NOT_LEADER_FOR_PARTITION
elsewhere), and followed by the followers, whose fetch responses carry the leader's log start
(Kafka's kafka-delete-records; DescribeLogDirs of each broker shows it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client import cli
from client.admin import Admin
from client.network import NetworkClient
from client.producer import Producer
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


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

        assert cli.main(["records", "delete", "--topic", "trim", "--partition", "0",
                         "--before", "11", "--bootstrap", bootstrap]) == 0
        assert starts(admin)[leader] == (11, 20)
        until(lambda: starts(admin) == {0: (11, 20), 1: (11, 20), 2: (11, 20)}, 20,
              "the followers follow the leader's log start")
        segments = {r.broker_id: r.segments for r in admin.describe_log_dirs(["trim"])}
        assert all(n < 8 for n in segments.values()), segments
        tp = TopicPartition("trim", 0)
        assert admin.list_offsets({tp: -2})[tp].offset == 11
