"""ACLs enforced by a real broker: for each API the allowed and the denied case, with the error
code and a check on the broker that nothing was written or changed.

Until listeners authenticate, every connection is User:ANONYMOUS; the tests give and take
that principal's ACLs through CreateAcls/DeleteAcls (its Alter on the cluster comes from the
acls.json written into the data directory before the broker starts). Other principals are
covered by the authorizer's own tests (test_authorizer.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.security.store import ACLS_FILE, acl_to_json
from client.consumer import Consumer
from protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.apis import DEBUGGING_REPLICA_ID, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ApiKey
from protocol.errors import (
    BrokerError,
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    StaleControllerEpochError,
)
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

ANONYMOUS = "User:ANONYMOUS"
Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
SECURED = {"authorizer_enabled": True}
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def binding(op: AclOperation, resource_type: ResourceType = TOPIC, name: str = "t", *,
            permission: AclPermissionType = AclPermissionType.ALLOW,
            pattern: PatternType = PatternType.LITERAL, principal: str = ANONYMOUS
            ) -> AclBinding:
    return AclBinding(resource_type=resource_type, resource_name=name, pattern_type=pattern,
                      principal=principal, host="*", operation=op, permission=permission)


def write_acls(data_dir: Path, *acls: AclBinding) -> None:
    """ACLs in place before the broker first starts (as ``acls.json`` holds them)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / ACLS_FILE).write_text(json.dumps(
        {"version": 1, "acls": [acl_to_json(a) for a in acls]}))


class Acls:
    """ACL changes for User:ANONYMOUS through the broker's own API."""

    def __init__(self, raw: RawClient) -> None:
        self.raw = raw

    def grant(self, *acls: AclBinding) -> None:
        answer = self.raw.request(ApiKey.CREATE_ACLS, {"creations": [a.to_wire() for a in acls]})
        assert all(r["error_code"] == 0 for r in answer["results"]), answer

    def revoke(self, *acls: AclBinding) -> None:
        filters = [AclBindingFilter(
            resource_type=a.resource_type, resource_name=a.resource_name,
            pattern_type=a.pattern_type, principal=a.principal, host=a.host,
            operation=a.operation, permission=a.permission).to_wire() for a in acls]
        answer = self.raw.request(ApiKey.DELETE_ACLS, {"filters": filters})
        assert all(r["error_code"] == 0 and r["matching_acls"]
                   for r in answer["filter_results"]), answer

    def listed(self) -> list[AclBinding]:
        answer = self.raw.request(ApiKey.DESCRIBE_ACLS, {"filter": AclBindingFilter().to_wire()})
        return [AclBinding.from_wire(a) for a in answer["acls"]]

    def topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic with Create on the cluster granted only for that."""
        create = binding(Op.CREATE, CLUSTER, CLUSTER_NAME)
        self.grant(create)
        self.raw.create_topic(name, partitions)
        self.revoke(create)


@pytest.fixture
def secured(make_broker: Callable[..., BrokerProcess], tmp_path: Path) -> BrokerProcess:
    """authorizer_enabled, and User:ANONYMOUS may only change ACLs (Alter on the cluster)."""
    write_acls(tmp_path / "secured", binding(Op.ALTER, CLUSTER, CLUSTER_NAME))
    return make_broker("secured", settings=SECURED)


@pytest.fixture
def raw(secured: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(secured.address) as client:
        yield client


@pytest.fixture
def acls(raw: RawClient) -> Acls:
    return Acls(raw)


def only(answer: dict[str, Any]) -> dict[str, Any]:
    (topic,) = answer["topics"]
    (partition,) = topic["partitions"]
    return dict(partition)


def produce_body(topic: str, value: bytes = b"v") -> dict[str, Any]:
    from protocol.messageset import Record, encode_message_set

    records = encode_message_set([Record(None, value, 0)])
    return {"acks": 1, "timeout_ms": 5_000,
            "topics": [{"name": topic, "partitions": [{"partition": 0, "records": records}]}]}


def latest(raw: RawClient, acls: Acls, topic: str, timestamp: int = LATEST_TIMESTAMP) -> int:
    """The partition's latest (or earliest) offset, read with Describe granted for it."""
    describe = binding(Op.DESCRIBE, name=topic)
    acls.grant(describe)
    offset = raw.list_offset(topic, 0, timestamp)["offset"]
    acls.revoke(describe)
    return int(offset)


# ------------------------------------------------------------------------------ data plane


def test_produce_needs_write_on_the_topic(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    denied = only(raw.request(ApiKey.PRODUCE, produce_body("t")))
    assert denied["error_code"] == TOPIC_DENIED and denied["base_offset"] == -1
    assert latest(raw, acls, "t") == 0  # nothing written
    acls.grant(binding(Op.WRITE))
    assert only(raw.request(ApiKey.PRODUCE, produce_body("t")))["error_code"] == 0
    assert latest(raw, acls, "t") == 1


def test_deny_beats_allow_and_prefixed_acls_apply(raw: RawClient, acls: Acls) -> None:
    acls.topic("orders-eu")
    acls.topic("orders-us")
    acls.grant(binding(Op.WRITE, name="orders-", pattern=PatternType.PREFIXED),
               binding(Op.WRITE, name="orders-us", permission=AclPermissionType.DENY))
    assert only(raw.request(ApiKey.PRODUCE, produce_body("orders-eu")))["error_code"] == 0
    assert only(raw.request(ApiKey.PRODUCE, produce_body("orders-us")))["error_code"] == (
        TOPIC_DENIED)
    assert latest(raw, acls, "orders-us") == 0
    assert latest(raw, acls, "orders-eu") == 1


def init_producer_id(raw: RawClient) -> dict[str, Any]:
    return raw.request(ApiKey.INIT_PRODUCER_ID,
                       {"transactional_id": None, "transaction_timeout_ms": 60_000})


def test_init_producer_id_needs_idempotent_write_or_write_on_any_topic(
        raw: RawClient, acls: Acls) -> None:
    """KIP-679: IdempotentWrite on the cluster, or Write on some topic -- one that exists or
    not, literal or prefixed -- unless a Deny covers it."""
    refused = init_producer_id(raw)
    assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert (refused["producer_id"], refused["producer_epoch"]) == (-1, -1)
    assert "IdempotentWrite" in refused["error_message"] and ANONYMOUS in refused["error_message"]
    read = binding(Op.READ, name="orders")
    acls.grant(read)
    assert init_producer_id(raw)["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    acls.revoke(read)
    for allowing in (binding(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME),
                     binding(Op.WRITE, name="orders"),
                     binding(Op.WRITE, name="orders-", pattern=PatternType.PREFIXED)):
        acls.grant(allowing)
        answer = init_producer_id(raw)
        assert (answer["error_code"], answer["producer_epoch"]) == (0, 0), allowing
        assert answer["producer_id"] >= 0
        acls.revoke(allowing)
    acls.grant(binding(Op.WRITE, name="orders-eu"),
               binding(Op.WRITE, name="orders-", pattern=PatternType.PREFIXED,
                       permission=AclPermissionType.DENY))
    assert init_producer_id(raw)["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_fetch_needs_read_on_the_topic(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    acls.grant(binding(Op.WRITE))
    raw.request(ApiKey.PRODUCE, produce_body("t", b"secret"))
    denied = raw.fetch_partition("t", 0, 0)
    assert denied["error_code"] == TOPIC_DENIED and denied["records"] == b""
    acls.grant(binding(Op.READ))
    assert b"secret" in raw.fetch_partition("t", 0, 0)["records"]


def test_replica_fetch_needs_cluster_action(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    body = {"replica_id": 7, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1024, "topics": [
        {"name": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "max_bytes": 1024}]}]}
    acls.grant(binding(Op.READ))  # a consumer's Read is not enough
    with pytest.raises(ClusterAuthorizationFailedError):
        raw.request(ApiKey.FETCH, body, version=1)


def test_a_debugging_fetch_needs_what_a_consumers_does(raw: RawClient, acls: Acls) -> None:
    """replica_id -2 (replica verification) reads like a consumer, as in Kafka: Read on the
    topic, no ClusterAction."""
    acls.topic("t")
    acls.grant(binding(Op.WRITE))
    raw.request(ApiKey.PRODUCE, produce_body("t", b"secret"))
    body = {"replica_id": DEBUGGING_REPLICA_ID, "max_wait_ms": 0, "min_bytes": 0,
            "max_bytes": 1024, "topics": [{"name": "t", "partitions": [
                {"partition": 0, "fetch_offset": 0, "max_bytes": 1024}]}]}
    denied = only(raw.request(ApiKey.FETCH, body))
    assert denied["error_code"] == TOPIC_DENIED and denied["records"] == b""
    acls.grant(binding(Op.READ))
    assert b"secret" in only(raw.request(ApiKey.FETCH, body))["records"]


def test_list_offsets_needs_describe(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    assert raw.list_offset("t", 0, LATEST_TIMESTAMP)["error_code"] == TOPIC_DENIED
    acls.grant(binding(Op.DESCRIBE))
    assert raw.list_offset("t", 0, LATEST_TIMESTAMP) == {
        "partition": 0, "error_code": 0, "timestamp": -1, "offset": 0}


def test_metadata_lists_only_what_may_be_described(raw: RawClient, acls: Acls) -> None:
    acls.topic("visible")
    acls.topic("hidden")
    assert raw.metadata(None)["topics"] == []
    acls.grant(binding(Op.DESCRIBE, name="visible"))
    assert [t["name"] for t in raw.metadata(None)["topics"]] == ["visible"]
    named = {t["name"]: t["error_code"] for t in raw.metadata(["visible", "hidden"])["topics"]}
    assert named == {"visible": 0, "hidden": TOPIC_DENIED}


def test_metadata_auto_creation_needs_create(raw: RawClient, acls: Acls) -> None:
    acls.grant(binding(Op.DESCRIBE, name="*"))
    (topic,) = raw.metadata(["fresh"])["topics"]
    assert topic["error_code"] == TOPIC_DENIED
    assert raw.metadata(None)["topics"] == []  # not created
    acls.grant(binding(Op.CREATE, name="fresh"))
    (topic,) = raw.metadata(["fresh"])["topics"]
    assert topic["error_code"] == 0
    assert [t["name"] for t in raw.metadata(None)["topics"]] == ["fresh"]


# -------------------------------------------------------------------------- topic admin


def create_body(name: str) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                        "configs": {}}], "timeout_ms": 5_000, "validate_only": False}


def exists(raw: RawClient, acls: Acls, name: str) -> bool:
    acls.grant(binding(Op.DESCRIBE, name=name))
    (topic,) = raw.metadata([name], auto_create=False)["topics"]
    acls.revoke(binding(Op.DESCRIBE, name=name))
    return bool(topic["error_code"] == 0)


def test_create_topics_needs_create_on_the_cluster_or_the_topic(raw: RawClient, acls: Acls
                                                                ) -> None:
    (denied,) = raw.request(ApiKey.CREATE_TOPICS, create_body("new"))["topics"]
    assert denied["error_code"] == TOPIC_DENIED
    assert not exists(raw, acls, "new")
    acls.grant(binding(Op.CREATE, name="ne", pattern=PatternType.PREFIXED))
    (allowed,) = raw.request(ApiKey.CREATE_TOPICS, create_body("new"))["topics"]
    assert allowed["error_code"] == 0 and exists(raw, acls, "new")


def test_delete_topics_needs_delete(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    body = {"topic_names": ["t"], "timeout_ms": 5_000}
    (denied,) = raw.request(ApiKey.DELETE_TOPICS, body)["topics"]
    assert denied["error_code"] == TOPIC_DENIED and exists(raw, acls, "t")
    acls.grant(binding(Op.DELETE))
    (allowed,) = raw.request(ApiKey.DELETE_TOPICS, body)["topics"]
    assert allowed["error_code"] == 0 and not exists(raw, acls, "t")


def test_delete_records_needs_delete(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    acls.grant(binding(Op.WRITE))
    raw.request(ApiKey.PRODUCE, produce_body("t"))
    body = {"topics": [{"name": "t", "partitions": [{"partition": 0, "offset": 1}]}],
            "timeout_ms": 5_000}
    assert only(raw.request(ApiKey.DELETE_RECORDS, body))["error_code"] == TOPIC_DENIED
    assert latest(raw, acls, "t", EARLIEST_TIMESTAMP) == 0
    acls.grant(binding(Op.DELETE))
    assert only(raw.request(ApiKey.DELETE_RECORDS, body))["low_watermark"] == 1
    assert latest(raw, acls, "t", EARLIEST_TIMESTAMP) == 1


def test_create_partitions_needs_alter(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    body = {"topics": [{"name": "t", "count": 3, "assignments": None}], "timeout_ms": 5_000,
            "validate_only": False}
    (denied,) = raw.request(ApiKey.CREATE_PARTITIONS, body)["topics"]
    assert denied["error_code"] == TOPIC_DENIED
    acls.grant(binding(Op.DESCRIBE))
    (topic,) = raw.metadata(["t"])["topics"]
    assert len(topic["partitions"]) == 1
    acls.grant(binding(Op.ALTER))
    (allowed,) = raw.request(ApiKey.CREATE_PARTITIONS, body)["topics"]
    assert allowed["error_code"] == 0
    (topic,) = raw.metadata(["t"])["topics"]
    assert len(topic["partitions"]) == 3


def test_configs_need_describe_configs_and_alter_configs(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    describe = {"resources": [{"resource_type": 2, "resource_name": "t",
                               "config_names": ["retention_ms"]}]}
    alter = {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "retention_ms", "config_operation": 0, "value": "1000"}]}],
        "timeout_ms": 5_000, "validate_only": False}
    (denied,) = raw.request(ApiKey.DESCRIBE_CONFIGS, describe)["results"]
    assert denied["error_code"] == TOPIC_DENIED and denied["configs"] == []
    (denied,) = raw.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, alter)["results"]
    assert denied["error_code"] == TOPIC_DENIED
    acls.grant(binding(Op.DESCRIBE_CONFIGS))
    ((config,),) = [r["configs"] for r in raw.request(ApiKey.DESCRIBE_CONFIGS, describe)["results"]]
    assert config["source"] != 1  # no override: the alter changed nothing
    acls.grant(binding(Op.ALTER_CONFIGS))
    (allowed,) = raw.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, alter)["results"]
    assert allowed["error_code"] == 0
    ((config,),) = [r["configs"] for r in raw.request(ApiKey.DESCRIBE_CONFIGS, describe)["results"]]
    assert (config["value"], config["source"]) == ("1000", 1)


def test_cluster_describe_can_be_denied(raw: RawClient, acls: Acls) -> None:
    """Alter on the cluster implies Describe; a Deny on Describe wins over it."""
    raw.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
    deny = binding(Op.DESCRIBE, CLUSTER, CLUSTER_NAME, permission=AclPermissionType.DENY)
    acls.grant(deny)
    with pytest.raises(ClusterAuthorizationFailedError):
        raw.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
    with pytest.raises(ClusterAuthorizationFailedError):
        raw.request(ApiKey.DESCRIBE_ACLS, {"filter": AclBindingFilter().to_wire()})
    acls.revoke(deny)
    assert acls.listed() == [binding(Op.ALTER, CLUSTER, CLUSTER_NAME)]


# ---------------------------------------------------------------------------------- groups


def join_body(group: str) -> dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "topics": ["t"], "member_id": "", "assignment_strategy": "range"}


def error_code(raw: RawClient, api: ApiKey, body: dict[str, Any]) -> int:
    """The answer's error code, whether it came as the API's body or a request error."""
    try:
        return int(raw.request(api, body)["error_code"])
    except BrokerError as exc:
        return int(exc.code)


def test_group_apis_need_read_on_the_group(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    find = raw.request(ApiKey.FIND_COORDINATOR, {"group_id": "g"})
    assert find["error_code"] == GROUP_DENIED and find["node_id"] == -1
    for api, body in ((ApiKey.JOIN_GROUP, join_body("g")),
                      (ApiKey.HEARTBEAT, {"group_id": "g", "generation_id": 1,
                                          "member_id": "m"}),
                      (ApiKey.LEAVE_GROUP, {"group_id": "g", "member_id": "m"}),
                      (ApiKey.SYNC_GROUP, {"group_id": "g", "generation_id": 1,
                                           "member_id": "m", "assignments": []})):
        assert error_code(raw, api, body) == GROUP_DENIED, api
    acls.grant(binding(Op.READ, GROUP, "g"))
    assert raw.request(ApiKey.FIND_COORDINATOR, {"group_id": "g"})["error_code"] == 0
    assert raw.request(ApiKey.JOIN_GROUP, join_body("g"))["error_code"] == 0
    assert raw.request(ApiKey.SYNC_GROUP, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                           "assignments": []})["error_code"] == \
        ErrorCode.UNKNOWN_MEMBER_ID


def commit_body(group: str, topics: list[str]) -> dict[str, Any]:
    return {"group_id": group, "generation_id": -1, "member_id": "", "topics": [
        {"name": t, "partitions": [{"partition": 0, "offset": 5, "metadata": None,
                                    "commit_timestamp": -1}]} for t in topics]}


def committed(raw: RawClient, group: str, topic: str) -> int:
    answer = raw.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": [
        {"name": topic, "partitions": [0]}]})
    return int(only(answer)["offset"])


def test_offset_commit_and_fetch_need_the_group_and_each_topic(raw: RawClient, acls: Acls
                                                               ) -> None:
    acls.topic("a")
    acls.topic("b")
    with pytest.raises(GroupAuthorizationFailedError):
        raw.request(ApiKey.OFFSET_COMMIT, commit_body("g", ["a"]))
    with pytest.raises(GroupAuthorizationFailedError):
        raw.request(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": None})
    acls.grant(binding(Op.READ, GROUP, "g"), binding(Op.READ, name="a"))
    answer = raw.request(ApiKey.OFFSET_COMMIT, commit_body("g", ["a", "b"]))
    codes = {t["name"]: t["partitions"][0]["error_code"] for t in answer["topics"]}
    assert codes == {"a": 0, "b": TOPIC_DENIED}
    assert committed(raw, "g", "a") == 5
    fetched = raw.request(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": [
        {"name": "b", "partitions": [0]}]})
    assert only(fetched)["error_code"] == TOPIC_DENIED
    acls.grant(binding(Op.DESCRIBE, name="b"))
    assert committed(raw, "g", "b") == -1  # the denied commit wrote nothing
    everything = raw.request(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": None})
    assert [t["name"] for t in everything["topics"]] == ["a"]


def test_list_describe_and_delete_groups(raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    acls.grant(binding(Op.READ, GROUP, "mine"), binding(Op.READ, GROUP, "theirs"),
               binding(Op.READ, name="t"))
    for group in ("mine", "theirs"):
        raw.request(ApiKey.OFFSET_COMMIT, commit_body(group, ["t"]))
    acls.revoke(binding(Op.READ, GROUP, "theirs"))
    # Alter on the cluster implies Describe on it: every group is listed
    assert {g["group_id"] for g in raw.request(ApiKey.LIST_GROUPS, {})["groups"]} == {
        "mine", "theirs"}
    acls.grant(binding(Op.DESCRIBE, CLUSTER, CLUSTER_NAME, permission=AclPermissionType.DENY))
    assert [g["group_id"] for g in raw.request(ApiKey.LIST_GROUPS, {})["groups"]] == ["mine"]
    described = raw.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["mine", "theirs"]},
                            version=1)["groups"]
    assert [(g["group_id"], g["error_code"]) for g in described] == [
        ("mine", 0), ("theirs", GROUP_DENIED)]
    results = raw.request(ApiKey.DELETE_GROUPS, {"group_ids": ["mine", "theirs"]})["results"]
    assert [(r["group_id"], r["error_code"]) for r in results] == [
        ("mine", GROUP_DENIED), ("theirs", GROUP_DENIED)]
    acls.grant(binding(Op.DESCRIBE, name="t"))
    assert committed(raw, "mine", "t") == 5  # nothing deleted
    acls.grant(binding(Op.DELETE, GROUP, "mine"))
    results = raw.request(ApiKey.DELETE_GROUPS, {"group_ids": ["mine"]})["results"]
    assert results == [{"group_id": "mine", "error_code": 0}]


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(
        raw: RawClient, acls: Acls) -> None:
    acls.topic("t")
    acls.grant(binding(Op.READ, GROUP, "g"), binding(Op.READ, name="t"))
    raw.request(ApiKey.OFFSET_COMMIT, commit_body("g", ["t"]))
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [0]}]}
    with pytest.raises(GroupAuthorizationFailedError):
        raw.request(ApiKey.OFFSET_DELETE, body)
    assert committed(raw, "g", "t") == 5
    acls.grant(binding(Op.DELETE, GROUP, "g"))
    acls.revoke(binding(Op.READ, name="t"))
    assert only(raw.request(ApiKey.OFFSET_DELETE, body))["error_code"] == TOPIC_DENIED
    acls.grant(binding(Op.READ, name="t"))
    assert committed(raw, "g", "t") == 5
    assert only(raw.request(ApiKey.OFFSET_DELETE, body))["error_code"] == 0
    assert committed(raw, "g", "t") == -1


def test_a_consumer_without_read_on_its_group_cannot_join(secured: BrokerProcess, acls: Acls
                                                          ) -> None:
    acls.topic("t")
    acls.grant(binding(Op.READ, name="t"), binding(Op.DESCRIBE, GROUP, "g"))
    with Consumer(secured.bootstrap, group_id="g", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["t"])
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
        assert consumer.assignment() == set()
    acls.revoke(binding(Op.DESCRIBE, GROUP, "g"))
    assert raw_groups(acls) == []


def raw_groups(acls: Acls) -> list[str]:
    return [g["group_id"] for g in acls.raw.request(ApiKey.LIST_GROUPS, {})["groups"]]


# ------------------------------------------------------------------ cluster-level and setup


def test_a_broker_without_acls_refuses_everything(make_broker: Callable[..., BrokerProcess]
                                                  ) -> None:
    broker = make_broker(settings=SECURED)
    with RawClient(broker.address) as raw:
        assert raw.metadata(None)["topics"] == []
        for api, body in (
            (ApiKey.CREATE_ACLS, {"creations": [binding(Op.ALL, CLUSTER, CLUSTER_NAME)
                                                .to_wire()]}),
            (ApiKey.DESCRIBE_ACLS, {"filter": AclBindingFilter().to_wire()}),
            (ApiKey.DELETE_ACLS, {"filters": [AclBindingFilter().to_wire()]}),
            (ApiKey.ELECT_LEADERS, {"topic_partitions": None, "timeout_ms": 1_000}),
            (ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"topics": [], "timeout_ms": 1_000}),
            (ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}),
            (ApiKey.UPDATE_METADATA, {"controller_id": 1, "controller_epoch": 1,
                                      "partitions": [], "live_brokers": [], "topics": []}),
            (ApiKey.CONTROLLED_SHUTDOWN, {"broker_id": 0}),
            (ApiKey.LEADER_AND_ISR, {"controller_id": 1, "controller_epoch": 1,
                                     "partitions": [], "live_leaders": []}),
            (ApiKey.STOP_REPLICA, {"controller_id": 1, "controller_epoch": 1,
                                   "delete_partitions": False, "partitions": []}),
            (ApiKey.OFFSETS_FOR_LEADER_EPOCH, {"replica_id": 1, "topics": []}),
            (ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False}),
            (ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [], "validate_only": False}),
        ):
            with pytest.raises(ClusterAuthorizationFailedError):
                raw.request(api, body)


def test_super_users_may_do_everything(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(settings={**SECURED, "super_users": f"User:admin;{ANONYMOUS}"})
    with RawClient(broker.address) as raw:
        raw.create_topic("t")
        assert raw.produce("t", [b"x"]) == 0
        assert raw.fetch("t")[0].value == b"x"
        assert raw.request(ApiKey.ELECT_LEADERS, {"topic_partitions": None,
                                                  "timeout_ms": 1_000})["error_code"] == 0
        with pytest.raises(StaleControllerEpochError):  # past the authorizer: no controller
            raw.request(ApiKey.UPDATE_METADATA, {"controller_id": 1, "controller_epoch": 1,
                                                 "partitions": [], "live_brokers": [],
                                                 "topics": []})


def test_allow_everyone_if_no_acl_found(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(settings={**SECURED, "allow_everyone_if_no_acl_found": True})
    with RawClient(broker.address) as raw:
        acls = Acls(raw)
        raw.create_topic("open")
        raw.create_topic("closed")
        acls.grant(binding(Op.WRITE, name="closed", principal="User:alice"))
        assert raw.produce("open", [b"x"]) == 0
        assert only(raw.request(ApiKey.PRODUCE, produce_body("closed")))["error_code"] == (
            TOPIC_DENIED)


def test_acl_apis_without_an_authorizer(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as raw, pytest.raises(SecurityDisabledError):
        raw.request(ApiKey.DESCRIBE_ACLS, {"filter": AclBindingFilter().to_wire()})


def test_acls_survive_a_restart(secured: BrokerProcess, tmp_path: Path) -> None:
    with RawClient(secured.address) as raw:
        acls = Acls(raw)
        acls.grant(binding(Op.READ, GROUP, "g"), binding(Op.WRITE, name="orders-",
                                                         pattern=PatternType.PREFIXED))
        before = set(acls.listed())
    secured.restart()
    with RawClient(secured.address) as raw:
        assert set(Acls(raw).listed()) == before
    assert not list((tmp_path / "secured").glob("acls.json.*"))  # no temporary file left
