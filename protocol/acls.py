"""ACLs as Kafka defines them: bindings, filters, and which ACL each API needs.

An ACL binding says that a principal (``User:alice``, ``User:*`` for everyone) connecting from a
host (``*`` for any) is allowed or denied an operation on a resource: a topic, a group or the
cluster, named literally (``orders``; ``*`` is every resource of the type) or by a prefix
(``orders-`` matches ``orders-eu``). The enums keep Kafka's wire numbers, so the CreateAcls,
DescribeAcls and DeleteAcls bodies read as Kafka's do.

``API_ACLS`` is the one table of what each API checks; the broker's handlers look their
operations up in it and docs/security.md's table is tested against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

from protocol.apis import ApiKey

WILDCARD = "*"  # a literal resource name, principal name or host that matches every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name, as Kafka names it

E = TypeVar("E", bound=IntEnum)


class ResourceType(IntEnum):
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4

    @property
    def title(self) -> str:
        return self.name.title()


class AclOperation(IntEnum):
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    @property
    def title(self) -> str:
        return self.name.title().replace("_", "")


class AclPermissionType(IntEnum):
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3

    @property
    def title(self) -> str:
        return self.name.title()


class PatternType(IntEnum):
    ANY = 1  # filters only: literal or prefixed
    MATCH = 2  # filters only: every binding that applies to the filter's name
    LITERAL = 3
    PREFIXED = 4

    @property
    def title(self) -> str:
        return self.name.title()


def parse_enum(cls: type[E], text: str) -> E:
    """``Read``, ``READ``, ``ClusterAction``, ``cluster_action`` -> the member; ValueError
    naming the allowed values otherwise."""
    key = text.strip().replace("-", "").replace("_", "").upper()
    for member in cls:
        if member.name.replace("_", "") == key:
            return member
    names = ", ".join(m.title for m in cls if m.name != "ANY")  # type: ignore[attr-defined]
    raise ValueError(f"{text!r} is not one of {names}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """One ACL: ``principal`` from ``host`` is ``permission`` ``operation`` on the resource."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(problem)

    def problem(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "an ACL needs a resource type: Topic, Group or Cluster"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "an ACL's pattern type is Literal or Prefixed"
        if self.operation == AclOperation.ANY:
            return "an ACL needs an operation"
        if self.permission == AclPermissionType.ANY:
            return "an ACL is Allow or Deny"
        if not self.resource_name:
            return "an ACL needs a resource name"
        if self.resource_type == ResourceType.CLUSTER and (
                self.resource_name != CLUSTER_NAME or self.pattern_type != PatternType.LITERAL):
            return f"the Cluster resource is named {CLUSTER_NAME!r}, literally"
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "a prefixed ACL cannot use the wildcard name '*'"
        kind, colon, name = self.principal.partition(":")
        if not colon or not kind or not name:
            return f"principal {self.principal!r} is not TYPE:NAME (User:alice, User:*)"
        if not self.host:
            return "an ACL needs a host ('*' for any)"
        return None

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL governs the resource ``name`` of ``resource_type``."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)

    def to_wire(self) -> dict[str, Any]:
        return _to_wire(self)

    @classmethod
    def from_wire(cls, entry: dict[str, Any]) -> AclBinding:
        """From a CreateAcls creation or a DescribeAcls entry (ValueError if it is not one)."""
        return cls(**_from_wire(entry))

    def __str__(self) -> str:
        pattern = "" if self.pattern_type == PatternType.LITERAL else " (prefixed)"
        return (f"{self.permission.title} {self.principal} from {self.host} "
                f"{self.operation.title} on {self.resource_type.title} "
                f"{self.resource_name!r}{pattern}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBindingFilter:
    """Which bindings DescribeAcls lists and DeleteAcls removes: None and ANY match anything.
    ``pattern_type`` MATCH selects every binding that applies to ``resource_name`` (literal,
    wildcard or prefix), as Kafka's does."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not acl.applies_to(
                    acl.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
                return False
            if self.resource_name not in (None, acl.resource_name):
                return False
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission in (AclPermissionType.ANY, acl.permission)
        )

    def to_wire(self) -> dict[str, Any]:
        return _to_wire(self)

    @classmethod
    def from_wire(cls, entry: dict[str, Any]) -> AclBindingFilter:
        return cls(**_from_wire(entry))


def _to_wire(acl: AclBinding | AclBindingFilter) -> dict[str, Any]:
    """The fields of a binding or a filter as CreateAcls, DescribeAcls and DeleteAcls carry them
    (Kafka's names and wire numbers)."""
    return {
        "resource_type": int(acl.resource_type), "resource_name": acl.resource_name,
        "pattern_type": int(acl.pattern_type), "principal": acl.principal, "host": acl.host,
        "operation": int(acl.operation), "permission_type": int(acl.permission),
    }


def _from_wire(entry: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a binding or a filter from its wire form (ValueError for an
    unknown number); a filter's None names stay None."""
    def text(key: str) -> str | None:
        return None if entry[key] is None else str(entry[key])

    return {
        "resource_type": ResourceType(entry["resource_type"]),
        "resource_name": text("resource_name"),
        "pattern_type": PatternType(entry["pattern_type"]),
        "principal": text("principal"), "host": text("host"),
        "operation": AclOperation(entry["operation"]),
        "permission": AclPermissionType(entry["permission_type"]),
    }


# ------------------------------------------------------------------ what each API checks

@dataclass(frozen=True, slots=True)
class AclCheck:
    """An API needs ``operation`` on a resource of ``resource_type``; ``when`` says in which
    case, if not always (shown in the docs)."""

    operation: AclOperation
    resource_type: ResourceType
    when: str = ""


def _c(operation: AclOperation, resource_type: ResourceType, when: str = "") -> AclCheck:
    return AclCheck(operation, resource_type, when)


_R, _W, _C, _D, _A = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                      AclOperation.DELETE, AclOperation.ALTER)
_DESC, _CA = AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION
_DC, _AC = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
_TOPIC, _GROUP, _CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
_BROKERS = "sent by brokers"

#: What the broker checks for each API (Kafka's KafkaApis): a request is allowed only if the
#: principal holds every listed ACL that applies; the order is the order of the checks.
API_ACLS: dict[ApiKey, tuple[AclCheck, ...]] = {
    ApiKey.API_VERSIONS: (),
    ApiKey.SASL_HANDSHAKE: (),  # before authentication: there is no principal to check yet
    ApiKey.SASL_AUTHENTICATE: (),
    ApiKey.METADATA: (
        _c(_DESC, _TOPIC, "only the topics the principal may describe are listed"),
        _c(_C, _CLUSTER, "to auto-create a missing topic (or Create on the topic)"),
        _c(_C, _TOPIC, "to auto-create a missing topic (or Create on the cluster)"),
    ),
    ApiKey.PRODUCE: (
        _c(_W, _TOPIC),
        _c(_C, _CLUSTER, "to auto-create a missing topic (or Create on the topic)"),
        _c(_C, _TOPIC, "to auto-create a missing topic (or Create on the cluster)"),
    ),
    ApiKey.FETCH: (
        _c(_R, _TOPIC, "consumers, and debugging reads of any replica (replica_id -2)"),
        _c(_CA, _CLUSTER, "replica fetches (replica_id >= 0), " + _BROKERS),
    ),
    ApiKey.LIST_OFFSETS: (_c(_DESC, _TOPIC),),
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: (_c(_CA, _CLUSTER, _BROKERS),),
    ApiKey.LEADER_AND_ISR: (_c(_CA, _CLUSTER, _BROKERS),),
    ApiKey.STOP_REPLICA: (_c(_CA, _CLUSTER, _BROKERS),),
    ApiKey.UPDATE_METADATA: (_c(_CA, _CLUSTER, _BROKERS),),
    ApiKey.CONTROLLED_SHUTDOWN: (_c(_CA, _CLUSTER, _BROKERS),),
    ApiKey.FIND_COORDINATOR: (_c(_DESC, _GROUP),),
    ApiKey.JOIN_GROUP: (_c(_R, _GROUP),),
    ApiKey.SYNC_GROUP: (_c(_R, _GROUP),),
    ApiKey.HEARTBEAT: (_c(_R, _GROUP),),
    ApiKey.LEAVE_GROUP: (_c(_R, _GROUP),),
    ApiKey.OFFSET_COMMIT: (_c(_R, _GROUP), _c(_R, _TOPIC, "each committed partition's topic")),
    ApiKey.OFFSET_FETCH: (_c(_DESC, _GROUP), _c(_DESC, _TOPIC, "each partition's topic")),
    ApiKey.LIST_GROUPS: (
        _c(_DESC, _CLUSTER, "to list every group; without it, only the groups the principal "
           "may describe are listed"),
        _c(_DESC, _GROUP, "without Describe on the cluster"),
    ),
    ApiKey.DESCRIBE_GROUPS: (_c(_DESC, _GROUP),),
    ApiKey.DELETE_GROUPS: (_c(_D, _GROUP),),
    ApiKey.OFFSET_DELETE: (_c(_D, _GROUP), _c(_R, _TOPIC, "each partition's topic")),
    ApiKey.CREATE_TOPICS: (
        _c(_C, _CLUSTER, "or Create on the topic"),
        _c(_C, _TOPIC, "or Create on the cluster"),
    ),
    ApiKey.DELETE_TOPICS: (_c(_D, _TOPIC),),
    ApiKey.DELETE_RECORDS: (_c(_D, _TOPIC),),
    ApiKey.CREATE_PARTITIONS: (_c(_A, _TOPIC),),
    ApiKey.DESCRIBE_CONFIGS: (_c(_DC, _TOPIC),),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (_c(_AC, _TOPIC),),
    ApiKey.DESCRIBE_LOG_DIRS: (_c(_DESC, _CLUSTER),),
    ApiKey.ELECT_LEADERS: (_c(_A, _CLUSTER),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (_c(_A, _CLUSTER),),
    ApiKey.DESCRIBE_ACLS: (_c(_DESC, _CLUSTER),),
    ApiKey.CREATE_ACLS: (_c(_A, _CLUSTER),),
    ApiKey.DELETE_ACLS: (_c(_A, _CLUSTER),),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (_c(_DC, _CLUSTER),),
    ApiKey.ALTER_CLIENT_QUOTAS: (_c(_AC, _CLUSTER),),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (_c(_DESC, _CLUSTER),),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (_c(_A, _CLUSTER),),
    # KIP-679 (Kafka 2.8+): IdempotentWrite on the cluster, or Write on any topic
    ApiKey.INIT_PRODUCER_ID: (
        _c(AclOperation.IDEMPOTENT_WRITE, _CLUSTER, "or Write on any topic"),
        _c(_W, _TOPIC, "any one topic, or IdempotentWrite on the cluster"),
    ),
}
assert set(API_ACLS) == set(ApiKey), "every API needs a row in API_ACLS"


def operation_for(api: ApiKey, resource_type: ResourceType,
                  operation: AclOperation | None = None) -> AclOperation:
    """The operation ``api`` needs on a resource of ``resource_type`` (from ``API_ACLS``): the
    first listed, or ``operation`` if the table lists it (KeyError if it does not)."""
    for check in API_ACLS[api]:
        if check.resource_type == resource_type and operation in (None, check.operation):
            return check.operation
    wanted = f"{operation.title} " if operation is not None else ""
    raise KeyError(f"API_ACLS lists no {wanted}{resource_type.title} check for {api.name}")
