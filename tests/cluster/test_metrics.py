"""Cluster metrics on two brokers: leader, partition and active-controller counts; a paused
follower shrinks the ISR of the partitions it follows (under-replicated) and expands it again
when it is back; a dead broker's only replica is an offline partition on the controller; a
deleted topic's series go from the brokers that had its replicas; a group's series (lag
included) come from its coordinator alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client.admin import Admin, NewTopic
from client.group_admin import GroupAdmin
from client.producer import Producer
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, paused, until
from tests.coordinator_broker.members import Member, wait_for
from tests.observability.support import QUICK_GROUPS, labelled, metrics_port, sample, scrape

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def metrics_url(broker: BrokerProcess) -> str:
    port = wait_for(lambda: metrics_port(broker.log_text()), timeout=10,
                    what="the metrics.listening log line")
    return f"http://127.0.0.1:{port}/metrics"


def value(url: str, name: str, **labels: str) -> float | None:
    return sample(scrape(url), name, **labels)


def test_replica_and_controller_counts(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2, settings={
        "metrics_listener": "127.0.0.1:0", "replica_lag_time_max_ms": 1000,
        "zookeeper_session_timeout_ms": 15_000})
    with Admin(cluster.brokers[0].bootstrap, timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic("r", replica_assignment={0: [0, 1], 1: [0, 1]}),
                             NewTopic("solo", replica_assignment={0: [1]})])
    cluster.wait_for_leaders("r", 2)
    cluster.wait_for_leaders("solo", 1)
    urls = {i: metrics_url(b) for i, b in cluster.brokers.items()}
    controller = cluster.controller_id()
    assert controller is not None
    for broker_id, url in urls.items():
        assert value(url, "odradek_controller_activecontrollercount") == int(
            broker_id == controller)
    until(lambda: value(urls[0], "odradek_replicamanager_partitioncount") == 2
          and value(urls[1], "odradek_replicamanager_partitioncount") == 3, 20,
          "every replica hosted")
    assert value(urls[0], "odradek_replicamanager_leadercount") == 2
    assert value(urls[1], "odradek_replicamanager_leadercount") == 1
    until(lambda: value(urls[0], "odradek_replicamanager_underreplicatedpartitions") == 0,
          20, "r fully replicated")

    with paused(cluster.brokers[1]):  # broker 0 leads r and stops hearing from its follower
        until(lambda: value(urls[0], "odradek_replicamanager_isrshrinks_total") == 2, 10,
              "both partitions of r shrink their ISR")
        assert value(urls[0], "odradek_replicamanager_underreplicatedpartitions") == 2
    until(lambda: value(urls[0], "odradek_replicamanager_isrexpands_total") == 2, 20,
          "the follower back in both ISRs")
    until(lambda: value(urls[0], "odradek_replicamanager_underreplicatedpartitions") == 0, 10,
          "r fully replicated again")

    cluster.brokers[1].kill()  # solo's only replica: offline, as the controller (0) sees it
    until(lambda: value(urls[0], "odradek_controller_offlinepartitionscount") == 1,
          cluster.failover_bound, "solo-0 offline")
    assert value(urls[0], "odradek_controller_activecontrollercount") == 1


def test_a_deleted_topics_series_are_removed(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2, settings={"metrics_listener": "127.0.0.1:0"})
    bootstrap = cluster.brokers[0].bootstrap
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic(name, replica_assignment={0: [0, 1]})
                             for name in ("gone", "kept")])
    for name in ("gone", "kept"):
        cluster.wait_for_leaders(name, 1)
    with Producer(bootstrap, acks="all") as producer:
        for name in ("gone", "kept"):
            producer.send(name, b"m", partition=0).result(timeout=20)
    url = metrics_url(cluster.brokers[0])  # the leader of both
    for name in ("gone", "kept"):
        assert value(url, "odradek_brokertopicmetrics_messagesin_total", topic=name) == 1
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.delete_topic("gone")
    until(lambda: not labelled(scrape(url), topic="gone"), 20, "gone's series removed")
    assert value(url, "odradek_brokertopicmetrics_messagesin_total", topic="kept") == 1


def test_a_groups_series_come_from_its_coordinator(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2, settings={
        "metrics_listener": "127.0.0.1:0", "offsets_topic_replication_factor": 2,
        "offsets_topic_partitions": 2, **QUICK_GROUPS})
    bootstrap = cluster.brokers[0].bootstrap
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic("t", replica_assignment={0: [0, 1]})])
    cluster.wait_for_leaders("t", 1)
    with Producer(bootstrap, acks="all") as producer:
        for _ in range(3):
            producer.send("t", b"m", partition=0).result(timeout=20)
    with GroupAdmin(bootstrap, timeout_ms=20_000) as admin:
        coordinator = admin.find_coordinator("g")
    urls = {i: metrics_url(b) for i, b in cluster.brokers.items()}
    other = 1 - coordinator.node_id
    with Member((coordinator.host, coordinator.port), "g", ["t"]) as member:
        member.join()
        member.commit({("t", 0): 1})
        # the coordinator's replica of t-0 may be the follower's: its high watermark follows
        until(lambda: value(urls[coordinator.node_id], "odradek_consumergroup_lag", group="g",
                            topic="t", partition="0") == 2, 20, "g's lag on its coordinator")
        coordinator_samples = scrape(urls[coordinator.node_id])
        assert sample(coordinator_samples, "odradek_group_members", group="g") == 1
        assert sample(coordinator_samples, "odradek_consumergroup_lag_sum", group="g") == 2
        assert not labelled(scrape(urls[other]), group="g")
