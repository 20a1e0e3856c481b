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
    PatternType,
    ResourceType,
)

_DESCRIBE_IMPLIED_BY = {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                        AclOperation.ALTER, AclOperation.DESCRIBE}
_DESCRIBE_CONFIGS_IMPLIED_BY = {AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS}
#: a resource name for "one that no ACL names": only ``*`` ACLs (and prefixes it starts with,
#: which none does) apply to it, as Kafka's authorizeByResourceType asks of a made-up name
_NAMED_BY_NO_ACL = "\x00"


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
        mine = self._mine(applying, principal, host)
        if any(self._denies(acl, operation) for acl in mine):
            return False
        return any(self._allows(acl, operation) for acl in mine)

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type
        (Kafka's authorizeByResourceType, KIP-679): on one that no ACL names, or on one an
        Allow names -- literally, or by a prefix -- that no Deny covers (a Deny of ``*``
        covers all, a prefixed Deny every name it starts)."""
        if self.authorize(principal, host, operation, resource_type, _NAMED_BY_NO_ACL):
            return True
        mine = self._mine(self._acls.get(resource_type, ()), principal, host)
        denied = [acl for acl in mine if self._denies(acl, operation)]
        if any(acl.resource_name == WILDCARD and acl.pattern_type == PatternType.LITERAL
               for acl in denied):
            return False
        denied_names = {acl.resource_name for acl in denied
                        if acl.pattern_type == PatternType.LITERAL}
        denied_prefixes = [acl.resource_name for acl in denied
                           if acl.pattern_type == PatternType.PREFIXED]
        for acl in mine:
            if not self._allows(acl, operation):
                continue
            name = acl.resource_name
            if any(name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if acl.pattern_type == PatternType.PREFIXED or name not in denied_names:
                return True
        return False

    @staticmethod
    def _mine(acls: Iterable[AclBinding], principal: str, host: str) -> list[AclBinding]:
        return [acl for acl in acls if acl.principal in (principal, WILDCARD_PRINCIPAL)
                and acl.host in (host, WILDCARD)]

    @staticmethod
    def _denies(acl: AclBinding, operation: AclOperation) -> bool:
        return (acl.permission == AclPermissionType.DENY
                and acl.operation in (operation, AclOperation.ALL))

    @staticmethod
    def _allows(acl: AclBinding, operation: AclOperation) -> bool:
        return (acl.permission == AclPermissionType.ALLOW
                and acl.operation in _allow_operations(operation))
