"""The ACL authorizer's decisions (sans-IO), for any principal: Kafka's AclAuthorizer rules."""

from __future__ import annotations

import pytest

from broker.security.authorizer import AclAuthorizer
from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(principal: str, op: AclOperation, name: str = "orders", *,
        resource_type: ResourceType = TOPIC, permission: AclPermissionType = ALLOW,
        pattern: PatternType = PatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(resource_type=resource_type, resource_name=name, pattern_type=pattern,
                      principal=principal, host=host, operation=op, permission=permission)


def authorizer(*acls: AclBinding, **kwargs: object) -> AclAuthorizer:
    a = AclAuthorizer(**kwargs)  # type: ignore[arg-type]
    a.replace(acls)
    return a


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found() -> None:
    assert not authorizer().authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "orders")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(
        "User:alice", "1.2.3.4", Op.READ, TOPIC, "orders")
    # an ACL on the resource for someone else: no longer "no ACL found"
    other = authorizer(acl("User:bob", Op.READ), allow_everyone_if_no_acl_found=True)
    assert not other.authorize("User:alice", "h", Op.READ, TOPIC, "orders")
    assert other.authorize("User:alice", "h", Op.READ, TOPIC, "payments")


def test_allow_matches_principal_operation_and_resource_only() -> None:
    a = authorizer(acl("User:alice", Op.READ))
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "orders")
    assert not a.authorize("User:bob", "h", Op.READ, TOPIC, "orders")
    assert not a.authorize("User:alice", "h", Op.WRITE, TOPIC, "orders")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "orders2")
    assert not a.authorize("User:alice", "h", Op.READ, GROUP, "orders")


def test_deny_beats_allow() -> None:
    a = authorizer(acl("User:*", Op.ALL), acl("User:mallory", Op.WRITE, permission=DENY))
    assert a.authorize("User:alice", "h", Op.WRITE, TOPIC, "orders")
    assert not a.authorize("User:mallory", "h", Op.WRITE, TOPIC, "orders")
    assert a.authorize("User:mallory", "h", Op.READ, TOPIC, "orders")
    deny_all = authorizer(acl("User:alice", Op.READ), acl("User:alice", Op.ALL, permission=DENY))
    assert not deny_all.authorize("User:alice", "h", Op.READ, TOPIC, "orders")


def test_all_implies_every_operation_and_describe_is_implied() -> None:
    a = authorizer(acl("User:alice", Op.ALL))
    assert all(a.authorize("User:alice", "h", op, TOPIC, "orders")
               for op in Op if op not in (Op.ANY, Op.ALL))
    for implying in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert authorizer(acl("User:alice", implying)).authorize(
            "User:alice", "h", Op.DESCRIBE, TOPIC, "orders"), implying
    assert not authorizer(acl("User:alice", Op.CREATE)).authorize(
        "User:alice", "h", Op.DESCRIBE, TOPIC, "orders")
    assert authorizer(acl("User:alice", Op.ALTER_CONFIGS)).authorize(
        "User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "orders")
    # implication is for allowing only: denying Read does not deny Describe
    a = authorizer(acl("User:alice", Op.DESCRIBE), acl("User:alice", Op.READ, permission=DENY))
    assert a.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "orders")


def test_prefixed_and_wildcard_resources() -> None:
    a = authorizer(acl("User:alice", Op.READ, "orders-", pattern=PatternType.PREFIXED),
                   acl("User:bob", Op.READ, "*"))
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "orders-eu")
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "orders-")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "orders")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "payments")
    assert a.authorize("User:bob", "h", Op.READ, TOPIC, "anything")
    prefixed_deny = authorizer(acl("User:*", Op.READ, "*"),
                               acl("User:*", Op.READ, "secret-", permission=DENY,
                                   pattern=PatternType.PREFIXED))
    assert not prefixed_deny.authorize("User:alice", "h", Op.READ, TOPIC, "secret-plans")
    assert prefixed_deny.authorize("User:alice", "h", Op.READ, TOPIC, "public")


def test_host_must_match_unless_wildcard() -> None:
    a = authorizer(acl("User:alice", Op.READ, host="10.0.0.1"))
    assert a.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "orders")
    assert not a.authorize("User:alice", "10.0.0.2", Op.READ, TOPIC, "orders")


def test_super_users_bypass_every_acl() -> None:
    a = authorizer(acl("User:admin", Op.ALL, permission=DENY), super_users=["User:admin"])
    assert a.authorize("User:admin", "h", Op.ALTER, CLUSTER, "kafka-cluster")
    assert a.authorize("User:admin", "h", Op.READ, TOPIC, "orders")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "orders")


def test_filters_select_as_kafka_does() -> None:
    literal = acl("User:alice", Op.READ, "orders")
    prefixed = acl("User:alice", Op.READ, "ord", pattern=PatternType.PREFIXED)
    wildcard = acl("User:bob", Op.WRITE, "*", permission=DENY)
    group = acl("User:alice", Op.READ, "g", resource_type=GROUP)
    a = authorizer(literal, prefixed, wildcard, group)
    assert set(a.matching(AclBindingFilter())) == {literal, prefixed, wildcard, group}
    assert set(a.matching(AclBindingFilter(resource_type=TOPIC, resource_name="orders",
                                           pattern_type=PatternType.MATCH))) == {
        literal, prefixed, wildcard}
    assert a.matching(AclBindingFilter(resource_name="orders",
                                       pattern_type=PatternType.LITERAL)) == [literal]
    assert a.matching(AclBindingFilter(principal="User:bob")) == [wildcard]
    assert a.matching(AclBindingFilter(permission=DENY)) == [wildcard]
    assert set(a.matching(AclBindingFilter(operation=Op.READ, resource_type=TOPIC))) == {
        literal, prefixed}


@pytest.mark.parametrize("bad", [
    {"principal": "alice"},
    {"principal": "User:"},
    {"resource_name": ""},
    {"resource_type": ResourceType.ANY},
    {"operation": Op.ANY},
    {"permission": AclPermissionType.ANY},
    {"pattern_type": PatternType.MATCH},
    {"resource_name": "*", "pattern_type": PatternType.PREFIXED},
    {"resource_type": CLUSTER, "resource_name": "other"},
    {"host": ""},
])
def test_invalid_bindings_are_refused_with_a_reason(bad: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "resource_type": TOPIC, "resource_name": "orders", "pattern_type": PatternType.LITERAL,
        "principal": "User:alice", "host": "*", "operation": Op.READ, "permission": ALLOW}
    with pytest.raises(ValueError, match=r"\w"):
        AclBinding(**{**fields, **bad})  # type: ignore[arg-type]


def test_bindings_round_trip_the_wire() -> None:
    binding = acl("User:alice", Op.CLUSTER_ACTION, "kafka-cluster", resource_type=CLUSTER)
    assert AclBinding.from_wire(binding.to_wire()) == binding
    f = AclBindingFilter(resource_type=TOPIC, principal="User:x", operation=Op.READ)
    assert AclBindingFilter.from_wire(f.to_wire()) == f


# --------------------------------------------------- authorize_any: on any resource (KIP-679)

def test_any_topic_is_allowed_by_one_allow_the_denies_do_not_cover() -> None:
    write = authorizer(acl("User:alice", Op.WRITE, "orders"))
    assert write.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not write.authorize_any("User:bob", "h", Op.WRITE, TOPIC)
    assert not write.authorize_any("User:alice", "h", Op.WRITE, GROUP)
    # Read on a topic is not Write on one; All is
    assert not authorizer(acl("User:alice", Op.READ)).authorize_any(
        "User:alice", "h", Op.WRITE, TOPIC)
    assert authorizer(acl("User:alice", Op.ALL)).authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    prefixed = authorizer(acl("User:alice", Op.WRITE, "orders-", pattern=PatternType.PREFIXED))
    assert prefixed.authorize_any("User:alice", "h", Op.WRITE, TOPIC)


def test_any_topic_is_refused_when_denies_cover_every_allow() -> None:
    literal = authorizer(acl("User:alice", Op.WRITE, "orders"),
                         acl("User:alice", Op.WRITE, "orders", permission=DENY))
    assert not literal.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    by_prefix = authorizer(acl("User:alice", Op.WRITE, "orders-eu"),
                           acl("User:alice", Op.WRITE, "orders-eu-", pattern=PatternType.PREFIXED),
                           acl("User:*", Op.ALL, "orders", pattern=PatternType.PREFIXED,
                               permission=DENY))
    assert not by_prefix.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    everything = authorizer(acl("User:alice", Op.WRITE, "orders"),
                            acl("User:alice", Op.WRITE, "*", permission=DENY))
    assert not everything.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    # a Deny on another topic leaves the allowed one
    other = authorizer(acl("User:alice", Op.WRITE, "orders"),
                       acl("User:alice", Op.WRITE, "payments", permission=DENY))
    assert other.authorize_any("User:alice", "h", Op.WRITE, TOPIC)


def test_any_topic_for_super_users_and_where_no_acl_is_found() -> None:
    assert authorizer(super_users=["User:admin"]).authorize_any("User:admin", "h", Op.WRITE,
                                                                TOPIC)
    assert not authorizer().authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    # ACLs on named topics only: a topic no ACL names is allowed to everyone
    named = authorizer(acl("User:bob", Op.READ), allow_everyone_if_no_acl_found=True)
    assert named.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    wildcard = authorizer(acl("User:bob", Op.READ, "*"), allow_everyone_if_no_acl_found=True)
    assert not wildcard.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
