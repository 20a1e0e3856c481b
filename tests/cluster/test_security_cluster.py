"""Cluster mode with security: brokers replicate and take the controller's requests over a
SASL_SSL inter-broker listener, logging in as their own user, whose credential was put in
ZooKeeper before the cluster started (``odradek users add --zookeeper``); clients are given
the brokers' addresses on the listener they came in on. With the authorizer on, the brokers'
user needs to be a super user or hold ClusterAction on the cluster; without, the controller's
requests and the followers' fetches are refused, and the logs say so."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from broker.log import layout
from client.admin import Admin, NewTopic
from client.metadata import ClusterMetadata
from client.network import NetworkClient
from client.producer import Producer
from client.security import SecurityConfig, SecurityOptions
from protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.apis import ApiKey
from protocol.errors import ClusterAuthorizationFailedError, StaleControllerEpochError
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.cluster.conftest import Cluster, replica_log, until
from tests.security.support import PASSWORD, TlsFiles, make_tls_files


def sasl_ssl_cluster(make_cluster: Callable[..., Cluster], zk_connect: str, tmp_path: Path,
                     users: tuple[str, ...], **settings: object) -> tuple[Cluster, TlsFiles]:
    """Two brokers (not started) with a PLAINTEXT listener and a SASL_SSL one that is also the
    inter-broker listener, where they log in as ``broker``; ``users`` (SCRAM-SHA-512, all with
    PASSWORD) added to ZooKeeper first, offline, as docs/security.md's path does."""
    tls = make_tls_files(tmp_path / "tls")
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD)
    for user in users:
        added = subprocess.run(
            [sys.executable, "-m", "tooling.cli", "users", "add", user, "--mechanism",
             "SCRAM-SHA-512", "--password-file", str(password_file), "--zookeeper", zk_connect],
            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
        assert added.returncode == 0, added.stderr
    cluster = make_cluster(2, start=False, settings=tls.broker_settings(
        listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        inter_broker_listener_name="SASL_SSL",
        sasl_mechanism_inter_broker_protocol="SCRAM-SHA-512",
        inter_broker_sasl_username="broker", inter_broker_sasl_password=PASSWORD, **settings))
    return cluster, tls


def test_replication_over_a_sasl_ssl_inter_broker_listener(
        make_cluster: Callable[..., Cluster], zk_connect: str, tmp_path: Path):
    cluster, tls = sasl_ssl_cluster(make_cluster, zk_connect, tmp_path, ("broker", "alice"))
    cluster.start()

    registration = cluster.json("/brokers/ids/1")
    sasl_port = cluster.brokers[1].listener_ports["SASL_SSL"]
    assert registration["endpoints"] == [
        f"PLAINTEXT://127.0.0.1:{cluster.brokers[1].port}", f"SASL_SSL://127.0.0.1:{sasl_port}"]
    assert registration["port"] == sasl_port  # the inter-broker listener's

    cluster.create_topic("secure", partitions=2, replication_factor=2)
    with Producer(cluster.brokers[0].bootstrap, acks=-1) as producer:
        for i in range(50):
            producer.send("secure", b"m%d" % i, partition=i % 2)
        producer.flush(30)

    def replicated() -> bool:
        return all(len(replica_log(process, "secure", p)) == 25
                   for process in cluster.brokers.values() for p in (0, 1))

    until(replicated, 30, "both replicas of both partitions hold all 25 messages")
    for process in cluster.brokers.values():
        assert PASSWORD not in process.log_text()

    # a client on the SASL_SSL listener is told every broker's SASL_SSL address
    security = SecurityConfig(security_protocol="SASL_SSL", ssl_cafile=str(tls.ca),
                              sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                              sasl_plain_password=PASSWORD)
    network = NetworkClient(f"127.0.0.1:{sasl_port}", security=security)
    try:
        body = network.send(-1, ApiKey.METADATA, {"topics": None,
                                                  "allow_auto_topic_creation": False}).result(10)
    finally:
        network.close()
    view = ClusterMetadata.from_response(body)
    assert {b.node_id: b.port for b in view.brokers.values()} == {
        i: p.listener_ports["SASL_SSL"] for i, p in cluster.brokers.items()}

    # users added over the wire through one broker log in at another (ZooKeeper's store)
    with Admin(f"127.0.0.1:{cluster.brokers[0].listener_ports['SASL_SSL']}",
               **security.options()) as admin:
        admin.upsert_user_scram_credential("carol", "SCRAM-SHA-256", "Zq9-carol")
        assert admin.describe_user_scram_credentials(["carol"]) == {
            "carol": {"SCRAM-SHA-256": 4096}}
    assert "Zq9-carol" not in cluster.zk.get("/config/users/carol")[0].decode()
    carol = SecurityConfig(security_protocol="SASL_SSL", ssl_cafile=str(tls.ca),
                           sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="carol",
                           sasl_plain_password="Zq9-carol")
    network = NetworkClient(f"127.0.0.1:{sasl_port}", security=carol)
    try:
        assert network.send(-1, ApiKey.API_VERSIONS, {}).result(10)["apis"]
    finally:
        network.close()


# ---------------------------------------------------------------- with the ACL authorizer

def authorizing_cluster(make_cluster: Callable[..., Cluster], zk_connect: str, tmp_path: Path,
                        super_users: str) -> tuple[Cluster, TlsFiles]:
    """Two brokers (not started) with the authorizer on and a SASL_SSL inter-broker listener
    on which they log in as ``broker``; users broker, admin and alice in ZooKeeper. Their
    PLAINTEXT listener serves the harness's metadata (User:ANONYMOUS may describe brokers)."""
    return sasl_ssl_cluster(make_cluster, zk_connect, tmp_path, ("broker", "admin", "alice"),
                            authorizer_enabled=True, super_users=super_users)


def login(tls: TlsFiles, user: str) -> SecurityOptions:
    return SecurityConfig(security_protocol="SASL_SSL", ssl_cafile=str(tls.ca),
                          sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user,
                          sasl_plain_password=PASSWORD).options()


def sasl_bootstrap(process: BrokerProcess) -> str:
    return f"127.0.0.1:{process.listener_ports['SASL_SSL']}"


def test_an_authorizing_cluster_replicates_as_its_super_user_broker(
        make_cluster: Callable[..., Cluster], zk_connect: str, tmp_path: Path) -> None:
    cluster, tls = authorizing_cluster(make_cluster, zk_connect, tmp_path,
                                       super_users="User:broker;User:admin")
    cluster.start()
    bootstrap = sasl_bootstrap(cluster.brokers[0])
    with Admin(bootstrap, **login(tls, "admin")) as admin:
        admin.create_topic("secure", 1, replication_factor=2)
        admin.create_acls([AclBinding(
            resource_type=ResourceType.TOPIC, resource_name="secure",
            pattern_type=PatternType.LITERAL, principal="User:alice", host="*",
            operation=AclOperation.WRITE, permission=AclPermissionType.ALLOW)])
    with Producer(bootstrap, acks=-1, **login(tls, "alice")) as producer:
        for i in range(20):
            producer.send("secure", b"m%d" % i)
        producer.flush(30)  # acks=-1: the follower has fetched them, as User:broker

    until(lambda: all(len(replica_log(p, "secure", 0)) == 20 for p in cluster.brokers.values()),
          30, "both replicas hold all 20 messages")

    # a quota on alice shares her ZooKeeper node with her credential: both are kept, she
    # still logs in, and the partition's leader (whichever broker) holds her back
    with Admin(bootstrap, **login(tls, "admin")) as admin:
        admin.alter_client_quotas({"user": "alice"}, {"producer_byte_rate": 10_000})
    node = cluster.json("/config/users/alice")["config"]
    assert node["producer_byte_rate"] == "10000" and "SCRAM-SHA-512" in node

    def throttled() -> bool:
        with Producer(bootstrap, **login(tls, "alice")) as producer:
            producer.send("secure", b"x" * 30_000).result(30)
            return producer.throttle_stats.throttled > 0

    until(throttled, 30, "alice's producer held back by her quota")
    for process in cluster.brokers.values():
        assert "CLUSTER_AUTHORIZATION_FAILED" not in process.log_text()
        assert PASSWORD not in process.log_text()


def test_a_broker_user_without_cluster_action_is_refused(
        make_cluster: Callable[..., Cluster], zk_connect: str, tmp_path: Path) -> None:
    """The brokers' user is no super user: ClusterAction on the cluster lets it replicate;
    once that ACL is gone, the followers' fetches and the controller's next requests are
    refused, and both say so in their logs."""
    cluster, tls = authorizing_cluster(make_cluster, zk_connect, tmp_path,
                                       super_users="User:admin")
    cluster_action = AclBinding(
        resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL, principal="User:broker", host="*",
        operation=AclOperation.CLUSTER_ACTION, permission=AclPermissionType.ALLOW)
    cluster.zk.create("/kafka-acl/Cluster/kafka-cluster", json.dumps({"version": 1, "acls": [
        {"principal": "User:broker", "permissionType": "Allow", "operation": "ClusterAction",
         "host": "*"}]}).encode(), makepath=True)
    cluster.start()
    bootstrap = sasl_bootstrap(cluster.brokers[0])
    with Admin(bootstrap, **login(tls, "admin")) as admin:
        admin.create_topic("secure", 1, replication_factor=2)
        with Producer(bootstrap, acks=-1, **login(tls, "admin")) as producer:
            producer.send("secure", b"replicated").result(30)  # the follower fetched it

        assert admin.delete_acls([AclBindingFilter(
            resource_type=ResourceType.CLUSTER, principal="User:broker")]) == [cluster_action]
        follower = next(b for b in cluster.state("secure", 0)["isr"]
                        if b != cluster.state("secure", 0)["leader"])
        cluster.brokers[follower].wait_for_log(
            r"replica\.fetch_refused.*CLUSTER_AUTHORIZATION_FAILED.*User:broker")
    with Admin(bootstrap, timeout_ms=2_000, **login(tls, "admin")) as admin:
        # placed in ZooKeeper; its leaders never reach the brokers (not waited for)
        admin.create_topics([NewTopic("later", 1, 2)])

    controller = cluster.controller_id()
    assert controller is not None
    line = cluster.brokers[controller].wait_for_log(
        r"controller\.request_refused.*CLUSTER_AUTHORIZATION_FAILED")
    assert "LEADER_AND_ISR" in line or "UPDATE_METADATA" in line
    assert "ClusterAction" in line and "User:broker" in line
    for process in cluster.brokers.values():
        assert len(re.findall("replica.fetch_refused", process.log_text())) <= 1
        assert PASSWORD not in process.log_text()


def test_a_controller_request_refused_for_lack_of_cluster_action_is_sent_again_once_granted(
        make_cluster: Callable[..., Cluster], zk_connect: str, tmp_path: Path) -> None:
    """The controller asks again, with backoff, as it does a broker it cannot reach: once the
    ACL is back, the brokers take the leadership of a topic created while it was missing --
    with no other controller event to send it again."""
    cluster, tls = authorizing_cluster(make_cluster, zk_connect, tmp_path,
                                       super_users="User:admin")
    cluster_action = AclBinding(
        resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL, principal="User:broker", host="*",
        operation=AclOperation.CLUSTER_ACTION, permission=AclPermissionType.ALLOW)
    cluster.zk.create("/kafka-acl/Cluster/kafka-cluster", json.dumps({"version": 1, "acls": [
        {"principal": "User:broker", "permissionType": "Allow", "operation": "ClusterAction",
         "host": "*"}]}).encode(), makepath=True)
    cluster.start()
    controller = cluster.controller_id()
    assert controller is not None
    bootstrap = sasl_bootstrap(cluster.brokers[0])
    with Admin(bootstrap, timeout_ms=2_000, **login(tls, "admin")) as admin:
        assert admin.delete_acls([AclBindingFilter(
            resource_type=ResourceType.CLUSTER, principal="User:broker")]) == [cluster_action]
        until(lambda: all(_refuses_cluster_action(tls, p) for p in cluster.brokers.values()),
              30, "both brokers refuse User:broker's ClusterAction")
        # placed in ZooKeeper; the controller's LeaderAndIsr for it is refused
        admin.create_topics([NewTopic("later", 1, 2)])
        cluster.brokers[controller].wait_for_log(
            r"controller\.request_refused.*LEADER_AND_ISR.*CLUSTER_AUTHORIZATION_FAILED")
        assert not any(replica_dir(p, "later", 0).exists() for p in cluster.brokers.values())
        admin.create_acls([cluster_action])

    with Producer(bootstrap, acks=-1, max_block_ms=30_000, **login(tls, "admin")) as producer:
        producer.send("later", b"after the grant").result(30)
    until(lambda: all(len(replica_log(p, "later", 0)) == 1 for p in cluster.brokers.values()),
          30, "both replicas of later-0 hold the message")
    assert cluster.controller_id() == controller
    controller_log = cluster.brokers[controller].log_text()
    assert controller_log.index("controller.request_refused") < controller_log.index(
        "controller.request_accepted")
    for process in cluster.brokers.values():
        assert PASSWORD not in process.log_text()


def replica_dir(process: BrokerProcess, topic: str, partition: int) -> Path:
    return process.data_dir / layout.partition_dir_name(topic, partition)


def _refuses_cluster_action(tls: TlsFiles, process: BrokerProcess) -> bool:
    """Whether ``process`` refuses User:broker's ClusterAction now: asked with a LeaderAndIsr
    of controller epoch 0, which it refuses as stale (changing nothing) when it is allowed."""
    security = SecurityConfig(security_protocol="SASL_SSL", ssl_cafile=str(tls.ca),
                              sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="broker",
                              sasl_plain_password=PASSWORD)
    network = NetworkClient(sasl_bootstrap(process), security=security)
    try:
        network.send(-1, ApiKey.LEADER_AND_ISR, {
            "controller_id": 0, "controller_epoch": 0, "partitions": [],
            "live_leaders": []}).result(10)
    except ClusterAuthorizationFailedError:
        return True
    except StaleControllerEpochError:
        return False
    finally:
        network.close()
    raise AssertionError(f"broker at {process.bootstrap} took a LeaderAndIsr of epoch 0")
