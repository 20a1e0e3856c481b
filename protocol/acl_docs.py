"""The tables of docs/security.md that say which ACL each API and each ``odradek`` command
needs, made from ``protocol.acls.API_ACLS`` (a test checks the doc holds them as made here)."""

from __future__ import annotations

from protocol.acls import API_ACLS, AclCheck
from protocol.apis import REGISTRY, ApiKey

K = ApiKey
_GROUP_MEMBER = (K.FIND_COORDINATOR, K.JOIN_GROUP, K.HEARTBEAT, K.OFFSET_COMMIT,
                 K.OFFSET_FETCH, K.LEAVE_GROUP)

#: The APIs each ``odradek`` command sends, besides ApiVersions and Metadata (which every
#: client sends; Metadata shows only the topics the principal may Describe). Local commands
#: send none.
CLI_APIS: dict[str, tuple[ApiKey, ...]] = {
    "broker": (), "log": (), "demo": (), "cluster up": (), "cluster down": (),
    "topics create": (K.CREATE_TOPICS,),
    "topics list": (K.METADATA,),
    "topics describe": (K.METADATA, K.LIST_OFFSETS, K.DESCRIBE_CONFIGS),
    "topics alter": (K.INCREMENTAL_ALTER_CONFIGS, K.CREATE_PARTITIONS),
    "topics reassign": (K.ALTER_PARTITION_REASSIGNMENTS,),
    "topics delete": (K.DELETE_TOPICS,),
    "produce": (K.PRODUCE,),
    "consume": (K.LIST_OFFSETS, K.FETCH),
    "consume --group": (K.LIST_OFFSETS, K.FETCH, *_GROUP_MEMBER),
    "groups list": (K.LIST_GROUPS,),
    "users add": (K.ALTER_USER_SCRAM_CREDENTIALS,),
    "users delete": (K.ALTER_USER_SCRAM_CREDENTIALS,),
    "users list": (K.DESCRIBE_USER_SCRAM_CREDENTIALS,),
    "groups watch": (K.FIND_COORDINATOR, K.DESCRIBE_GROUPS, K.OFFSET_FETCH, K.METADATA,
                     K.LIST_OFFSETS),
    "console": (K.METADATA, K.LIST_OFFSETS, K.LIST_GROUPS, K.FIND_COORDINATOR,
                K.DESCRIBE_GROUPS, K.OFFSET_FETCH),
    "groups describe": (K.LIST_GROUPS, K.FIND_COORDINATOR, K.DESCRIBE_GROUPS, K.OFFSET_FETCH,
                        K.LIST_OFFSETS),
    "groups reset-offsets": (K.FIND_COORDINATOR, K.DESCRIBE_GROUPS, K.OFFSET_FETCH,
                             K.LIST_OFFSETS, K.OFFSET_COMMIT),
    "groups delete": (K.FIND_COORDINATOR, K.DELETE_GROUPS),
    "groups delete-offsets": (K.FIND_COORDINATOR, K.OFFSET_DELETE),
    "groups remove-members": (K.FIND_COORDINATOR, K.LEAVE_GROUP),
    "cluster status": (K.METADATA, K.LIST_GROUPS, K.DESCRIBE_GROUPS),
    "cluster elect-leaders": (K.ELECT_LEADERS,),
    "cluster verify-replicas": (K.FETCH,),
    "records delete": (K.DELETE_RECORDS,),
    "log-dirs": (K.DESCRIBE_LOG_DIRS,),
    "acls add": (K.CREATE_ACLS,),
    "acls remove": (K.DELETE_ACLS,),
    "acls list": (K.DESCRIBE_ACLS,),
    "quotas set": (K.ALTER_CLIENT_QUOTAS,),
    "quotas describe": (K.DESCRIBE_CLIENT_QUOTAS,),
    "quotas delete": (K.ALTER_CLIENT_QUOTAS,),
    # on the source: a group member reading, and the topics' configs; on the target: topics
    # created and grown, and written to
    "mirror": (K.LIST_OFFSETS, K.FETCH, *_GROUP_MEMBER, K.DESCRIBE_CONFIGS, K.CREATE_TOPICS,
               K.CREATE_PARTITIONS, K.PRODUCE),
}


def _check(check: AclCheck) -> str:
    text = f"{check.operation.title} on {check.resource_type.title}"
    return f"{text} ({check.when})" if check.when else text


def api_acl_table() -> str:
    lines = ["| API | key | needs |", "|---|---|---|"]
    for key in sorted(API_ACLS):
        checks = API_ACLS[key]
        needed = "; ".join(_check(c) for c in checks) if checks else "nothing"
        lines.append(f"| {REGISTRY[key].name} | {int(key)} | {needed} |")
    return "\n".join(lines) + "\n"


def _for_users(api: ApiKey) -> list[str]:
    """What a command's request of ``api`` needs, in short: the checks that apply to clients
    (not brokers, not auto-creation), Create on the cluster or the topic as one."""
    checks = [c for c in API_ACLS[api] if "brokers" not in c.when
              and "auto-create" not in c.when]
    if api == ApiKey.CREATE_TOPICS:
        return ["Create on the cluster or the topic"]
    if api == ApiKey.LIST_GROUPS:
        return ["Describe on Cluster, or on each Group listed"]
    return [f"{c.operation.title} on {c.resource_type.title}" for c in checks]


def cli_acl_table() -> str:
    lines = ["| command | APIs | needs |", "|---|---|---|"]
    for command, apis in CLI_APIS.items():
        names = ", ".join(REGISTRY[a].name for a in apis) or "-"
        needs = "; ".join(dict.fromkeys(n for a in apis for n in _for_users(a)))
        lines.append(f"| `odradek {command}` | {names} | {needs or 'nothing (runs locally)'} |")
    return "\n".join(lines) + "\n"
