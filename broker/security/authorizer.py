"""The ACL authorizer's decision, sans-IO: given the ACLs, may this principal from this host do
this operation on this resource? Kafka's AclAuthorizer rules:

- super users may do everything;
- a Deny ACL that applies (its operation or All) wins over any Allow;
- an Allow ACL applies when its operation is the one asked, All, or one that implies it:
  Describe is implied by Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs;
- no ACL at all on the resource: ``allow_everyone_if_no_acl_found`` decides (default: deny).

An ACL applies to a resource by literal name, the wildcard name ``*``, or a prefix; to a
principal by name or ``User:*``; to a host by address or ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourceType,
)

_DESCRIBE_IMPLIED_BY = {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                        AclOperation.ALTER, AclOperation.DESCRIBE}
_DESCRIBE_CONFIGS_IMPLIED_BY = {AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS}


def _allow_operations(operation: AclOperation) -> set[AclOperation]:
    """The operations an Allow ACL may name to allow ``operation``."""
    if operation == AclOperation.DESCRIBE:
        return {AclOperation.ALL, *_DESCRIBE_IMPLIED_BY}
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return {AclOperation.ALL, *_DESCRIBE_CONFIGS_IMPLIED_BY}
    return {AclOperation.ALL, operation}


class AclAuthorizer:
    """The ACLs a broker enforces, and its decisions. ``replace`` installs a new set (loaded
    from the data directory or ZooKeeper)."""

    def __init__(self, *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourceType, list[AclBinding]] = {}

    @property
    def acls(self) -> list[AclBinding]:
        return [acl for acls in self._acls.values() for acl in acls]

    def replace(self, acls: Iterable[AclBinding]) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for acl in dict.fromkeys(acls):
            by_type.setdefault(acl.resource_type, []).append(acl)
        self._acls = by_type

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if acl_filter.matches(acl)]

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        applying = [acl for acl in self._acls.get(resource_type, ())
                    if acl.applies_to(resource_type, name)]
        if not applying:
            return self.allow_everyone_if_no_acl_found
        mine = [acl for acl in applying if acl.principal in (principal, WILDCARD_PRINCIPAL)
                and acl.host in (host, WILDCARD)]
        if any(acl.permission == AclPermissionType.DENY
               and acl.operation in (operation, AclOperation.ALL) for acl in mine):
            return False
        allowing = _allow_operations(operation)
        return any(acl.permission == AclPermissionType.ALLOW and acl.operation in allowing
                   for acl in mine)
