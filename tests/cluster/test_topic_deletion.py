"""Topic deletion in a cluster (Kafka's TopicDeletionManager in ZooKeeper mode): the topic leaves
every broker's metadata at once, each replica deletes its log on StopReplica, and the topic's
znodes go -- freeing the name -- only once every replica has deleted its log. A replica whose
broker is down waits for it: when it comes back it deletes the old log before anything else
can see it, also when the controller changed meanwhile. Without that wait a topic created
again under the same name met the old log on that broker, which led it with the old messages
at the new offsets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from broker.cluster import zk_layout as zk
from broker.cluster.controller import (
    Controller,
)
from broker.cluster.controller_events import ReplicaDeleted
from broker.cluster.zookeeper import ZooKeeper
from broker.log import layout
from broker.settings import BrokerSettings
from client.admin import Admin
from protocol.errors import TopicAlreadyExistsError
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, read_partitions, until
from tests.cluster.lone_controller import fenced_write
from tests.cluster.test_replication import _send_all, _values

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _has_log(process: BrokerProcess, topic: str, partition: int) -> bool:
    return any(process.data_dir.rglob(layout.partition_dir_name(topic, partition)))


def _listed(cluster: Cluster, topic: str) -> list[int]:
    """The running brokers whose Metadata still names ``topic``."""
    return [i for i in cluster.running() if topic in cluster.metadata(i).topics]


@pytest.mark.timeout(60)
def test_a_deleted_topic_leaves_every_broker_and_its_name_is_free_again(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    topic = "short-lived"
    cluster.create_topic(topic, 2, 3)
    bootstrap = cluster.brokers[0].bootstrap
    _send_all(bootstrap, topic, 0, _values("old", 10))
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.delete_topic(topic)
    until(lambda: _listed(cluster, topic) == [], 10, "the topic gone from every broker's metadata")
    until(lambda: cluster.zk.exists(f"/brokers/topics/{topic}") is None, 20,
          "the topic's znodes removed")
    assert cluster.zk.exists(f"/admin/delete_topics/{topic}") is None
    until(lambda: not any(_has_log(p, topic, q) for p in cluster.brokers.values()
                          for q in (0, 1)), 20, "every replica's log deleted")
    cluster.create_topic(topic, 1, 3)
    acked = _send_all(bootstrap, topic, 0, _values("new", 5))
    assert [v for _, v in read_partitions(bootstrap, topic, [0])[0]] == list(acked)


@pytest.mark.timeout(120)
def test_a_replica_down_during_a_deletion_deletes_its_log_when_it_returns(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    topic = "renamed-twice"
    cluster.create_topic(topic, 1, 3, replica_assignment={0: [2, 0, 1]})
    bootstrap = cluster.brokers[0].bootstrap
    _send_all(bootstrap, topic, 0, _values("old", 20))
    down = cluster.brokers[2]
    port = down.port
    down.kill()
    until(lambda: 2 not in cluster.registered(), cluster.failover_bound,
          "broker 2's registration gone")
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.delete_topic(topic)  # answered once the topic has left the controller's metadata
        until(lambda: _listed(cluster, topic) == [], 10,
              "the topic gone from every live broker's metadata")
        # the name stays taken until broker 2 has deleted its replica
        with pytest.raises(TopicAlreadyExistsError, match="marked for deletion"):
            admin.create_topic(topic, 1, 2)
    assert cluster.zk.exists(f"/brokers/topics/{topic}") is not None
    assert _has_log(down, topic, 0)
    # a new controller carries the deletion on from ZooKeeper
    old_controller = cluster.controller_id()
    assert old_controller in (0, 1)
    controller = cluster.brokers[old_controller]
    controller_port = controller.port
    controller.kill()
    until(lambda: cluster.controller_id() not in (None, old_controller),
          cluster.failover_bound, "a new controller")

    # it does not know which replicas the last one saw deleted: it waits for all of them
    down.start(port=port, timeout=cluster.failover_bound + 10)
    assert cluster.zk.exists(f"/brokers/topics/{topic}") is not None
    controller.start(port=controller_port, timeout=cluster.failover_bound + 10)
    until(lambda: cluster.zk.exists(f"/brokers/topics/{topic}") is None, 30,
          "the deletion finished once both brokers were back")
    assert not _has_log(down, topic, 0)
    cluster.wait_ready()
    # the same name again, led by the broker that was down: nothing of the old topic in it
    cluster.create_topic(topic, 1, 3, replica_assignment={0: [2, 0, 1]})
    acked = _send_all(bootstrap, topic, 0, _values("new", 5))
    assert [v for _, v in read_partitions(bootstrap, topic, [0])[0]] == list(acked)


# --------------------------------------------------------------- fencing, one controller alone

def _lay_out_deletion(client: KazooClient, topic: str) -> list[str]:
    """A topic with one partition on broker 1 (which is not registered), marked for deletion;
    its znodes."""
    for path in zk.PERSISTENT_PATHS:
        client.ensure_path(path)
    nodes = [zk.topic_path(topic), zk.state_path(topic, 0), zk.topic_config_path(topic),
             zk.delete_topic_path(topic)]
    client.create(nodes[0], zk.encode_assignment({0: [1]}))
    client.create(nodes[1], zk.LeaderIsr(1, 0, (1,), 1).encode(), makepath=True)
    client.create(nodes[2], zk.encode_topic_config({}))
    client.create(nodes[3], b"")
    return nodes


@pytest.mark.timeout(60)
@pytest.mark.parametrize("replaced", [False, True], ids=["current", "replaced"])
def test_only_the_current_controller_deletes_a_topics_znodes(
    zk_connect: str, tmp_path: Path, replaced: bool,
) -> None:
    """The last replica confirms its deletion; the controller then deletes the topic's znodes
    -- unless another controller was elected meanwhile (the epoch moved on): then it deletes
    nothing, fails with NotControllerAnyMore as its other writes do, and steps down."""
    topic = "fenced"
    settings = BrokerSettings(data_dir=str(tmp_path), zookeeper_connect=zk_connect,
                              auto_leader_rebalance_enable=False)

    async def write(controller: Controller) -> None:
        await controller.ask(ReplicaDeleted(1, ((topic, 0),)))

    async def check(zoo: ZooKeeper, nodes: list[str]) -> None:
        left = [n for n in nodes if await zoo.call(zoo.kazoo.exists, n)]
        assert left == (nodes if replaced else [])

    fenced_write(settings, lambda client: _lay_out_deletion(client, topic), write, check,
                 replaced=replaced)
