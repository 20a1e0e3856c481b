"""ACL bindings and filters survive their wire form (CreateAcls, DescribeAcls, DeleteAcls)."""

from __future__ import annotations

from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def test_a_binding_and_a_filter_come_back_from_the_wire_as_they_were() -> None:
    binding = AclBinding(resource_type=ResourceType.TOPIC, resource_name="orders-",
                         pattern_type=PatternType.PREFIXED, principal="User:alice",
                         host="10.0.0.7", operation=AclOperation.WRITE,
                         permission=AclPermissionType.DENY)
    assert AclBinding.from_wire(binding.to_wire()) == binding
    assert binding.to_wire()["permission_type"] == 2  # Kafka's Deny
    anything = AclBindingFilter()
    assert AclBindingFilter.from_wire(anything.to_wire()) == anything
    assert anything.to_wire()["resource_name"] is None
    some = AclBindingFilter(resource_type=ResourceType.GROUP, resource_name="billing",
                            pattern_type=PatternType.MATCH, principal="User:bob",
                            operation=AclOperation.READ)
    assert AclBindingFilter.from_wire(some.to_wire()) == some
