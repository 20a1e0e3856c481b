"""ACLs and quotas in a cluster: kept in ZooKeeper as Kafka keeps them, and an ACL or quota
changed through one broker is enforced by the others."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from broker.cluster.zookeeper import split_connect
from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType
from protocol.acls import ResourceType as R
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messageset import Record, encode_message_set
from tests.broker.raw import RawClient
from tests.cluster.conftest import Cluster, until

pytestmark = pytest.mark.integration

ANONYMOUS = "User:ANONYMOUS"


def seed_acls(zk_connect: str, acls: dict[str, list[tuple[str, str]]]) -> None:
    """ACL znodes in place before the brokers start: path -> [(operation, permission)]."""
    hosts, chroot = split_connect(zk_connect)
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=10)
    try:
        for path, entries in acls.items():
            client.create(chroot + path, json.dumps({"version": 1, "acls": [
                {"principal": ANONYMOUS, "permissionType": permission, "operation": op,
                 "host": "*"} for op, permission in entries]}).encode(), makepath=True)
    finally:
        client.stop()
        client.close()


def produce(raw: RawClient, topic: str) -> int:
    records = encode_message_set([Record(None, b"v", 0)])
    answer = raw.request(ApiKey.PRODUCE, {"acks": 1, "timeout_ms": 5_000, "topics": [
        {"name": topic, "partitions": [{"partition": 0, "records": records}]}]})
    return int(answer["topics"][0]["partitions"][0]["error_code"])


def test_an_acl_added_through_one_broker_is_enforced_by_another(
        make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2, settings={"authorizer_enabled": True}, start=False)
    # brokers talk to each other as User:ANONYMOUS too: ClusterAction on the cluster
    seed_acls(cluster.zk_connect, {
        "/kafka-acl/Cluster/kafka-cluster": [("ClusterAction", "Allow"), ("Alter", "Allow"),
                                             ("Create", "Allow")],
        "/kafka-acl/Topic/*": [("Describe", "Allow")],
    })
    cluster.start()
    cluster.create_topic("orders", 1, 2)
    leader = cluster.leaders("orders")[0]
    other = 1 - leader
    with RawClient(cluster.brokers[leader].address) as at_leader:
        assert produce(at_leader, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        write = AclBinding(resource_type=R.TOPIC, resource_name="orders",
                           pattern_type=PatternType.LITERAL, principal=ANONYMOUS, host="*",
                           operation=AclOperation.WRITE, permission=AclPermissionType.ALLOW)
        with RawClient(cluster.brokers[other].address) as at_other:
            answer = at_other.request(ApiKey.CREATE_ACLS, {"creations": [write.to_wire()]})
            assert answer["results"][0]["error_code"] == 0
        until(lambda: produce(at_leader, "orders") == 0, 10,
              "the leader lets the new ACL's produce through")
    stored = cluster.json("/kafka-acl/Topic/orders")
    assert stored == {"version": 1, "acls": [{"principal": ANONYMOUS, "permissionType": "Allow",
                                              "operation": "Write", "host": "*"}]}
    assert cluster.zk.get_children("/kafka-acl-changes")


def test_a_quota_set_through_one_broker_is_seen_by_another(
        make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2)
    entity = [{"entity_type": "user", "entity_name": "alice"},
              {"entity_type": "client-id", "entity_name": None}]
    with RawClient(cluster.brokers[0].address) as raw:
        answer = raw.request(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{"entity": entity, "ops": [
            {"key": "producer_byte_rate", "value": 1024, "remove": False}]}],
            "validate_only": False})
        assert answer["entries"][0]["error_code"] == 0

    def described() -> list[dict[str, Any]]:
        with RawClient(cluster.brokers[1].address) as raw:
            return list(raw.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {
                "components": [], "strict": False})["entries"])

    assert until(described, 10, "broker 1 knows the quota") == [
        {"entity": entity, "values": [{"key": "producer_byte_rate", "value": 1024}]}]
    assert cluster.json("/config/users/alice/clients/<default>") == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}
