"""ACLs and quotas in ZooKeeper, where every broker of a cluster reads them, laid out as Kafka
lays them out::

    /kafka-acl/<Topic|Group|Cluster>/<name>                  {"version":1,"acls":[{"principal":
    /kafka-acl-extended/prefixed/<Topic|Group>/<prefix>        "User:alice","permissionType":
                                                               "Allow","operation":"Read",
                                                               "host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                     {"version":1} (ACLs changed)
    /config/users/<user>                                     {"version":1,"config":
    /config/users/<user>/clients/<client-id>                   {"producer_byte_rate":"1048576",
    /config/clients/<client-id>                                 "consumer_byte_rate":..}}
    /config/quota_changes/quota_change_<seq>                 {"version":1} (quotas changed)

``<default>`` names the default user or client id. A user's node may hold other configs
(SCRAM credentials): quota changes keep them. A broker that changes ACLs or quotas drops a
sequential node in the change path; every broker watches it and loads them all again.
Names are escaped only where ZooKeeper would misread them (protocol/zk_names.py).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog
import trio
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.cluster.zookeeper import ZooKeeper, update_znode
from broker.security.quotas import CLIENT_ID, USER, QuotaEntity
from broker.security.store import SecurityStoreError, acl_entry, acl_from_entry, quota_values
from protocol.acls import (
    AclBinding,
    PatternType,
    ResourceType,
)
from protocol.zk_names import USERS_ZNODE, escape, unescape

log = structlog.get_logger(__name__)

ACL_LITERAL = "/kafka-acl"
ACL_PREFIXED = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CLIENTS = "/config/clients"
QUOTA_CHANGES = "/config/quota_changes"
QUOTA_CHANGE_PREFIX = "quota_change_"
DEFAULT = "<default>"
#: change notifications kept (older ones are deleted: every broker reloads everything anyway)
CHANGES_KEPT = 100
_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER)


def acl_path(resource_type: ResourceType, pattern: PatternType, name: str) -> str:
    root = ACL_PREFIXED if pattern == PatternType.PREFIXED else ACL_LITERAL
    return f"{root}/{resource_type.title}/{escape(name)}"


def quota_path(entity: QuotaEntity) -> str:
    names = {t: DEFAULT if n is None else escape(n) for t, n in entity}
    if USER in names:
        path = f"{USERS_ZNODE}/{names[USER]}"
        return path + (f"/clients/{names[CLIENT_ID]}" if CLIENT_ID in names else "")
    return f"{CLIENTS}/{names[CLIENT_ID]}"


def _load(path: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8")) if data else {"version": 1}
    except (UnicodeDecodeError, ValueError) as exc:
        raise SecurityStoreError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SecurityStoreError(f"{path}: not a JSON object")
    return doc


def _decode_acls(path: str, data: bytes, resource_type: ResourceType, pattern: PatternType,
                 name: str) -> list[AclBinding]:
    try:
        return [acl_from_entry(resource_type, pattern, name, a)
                for a in _load(path, data).get("acls", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise SecurityStoreError(f"{path}: {type(exc).__name__}: {exc}") from None


def _encode_acls(acls: Iterable[AclBinding]) -> bytes:
    return json.dumps({"version": 1, "acls": [acl_entry(a) for a in acls]}).encode()


class ZkSecurityStore:
    def __init__(self, zoo: ZooKeeper) -> None:
        self._zoo = zoo

    # ------------------------------------------------------------------------------ ACLs

    async def load_acls(self) -> list[AclBinding]:
        return await self._zoo.call(self._load_acls)

    def _load_acls(self) -> list[AclBinding]:
        client = self._zoo.kazoo
        acls: list[AclBinding] = []
        for pattern, root in ((PatternType.LITERAL, ACL_LITERAL),
                              (PatternType.PREFIXED, ACL_PREFIXED)):
            for resource_type in _TYPES:
                parent = f"{root}/{resource_type.title}"
                try:
                    names = client.get_children(parent)
                except NoNodeError:
                    continue
                for escaped in names:
                    path = f"{parent}/{escaped}"
                    try:
                        data, _ = client.get(path)
                    except NoNodeError:
                        continue
                    acls += _decode_acls(path, data, resource_type, pattern, unescape(escaped))
        return acls

    async def change_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]
                          ) -> None:
        await self._zoo.call(self._change_acls, add, remove)

    def _change_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]) -> None:
        client = self._zoo.kazoo
        removing = set(remove)
        resources = dict.fromkeys(
            (a.resource_type, a.pattern_type, a.resource_name) for a in [*add, *remove])
        for resource in resources:
            adding = [a for a in add
                      if (a.resource_type, a.pattern_type, a.resource_name) == resource]
            _change_resource_acls(client, *resource, adding, removing)
        _notify(client, ACL_CHANGES, ACL_CHANGE_PREFIX)

    # ---------------------------------------------------------------------------- quotas

    async def load_quotas(self) -> dict[QuotaEntity, dict[str, int]]:
        return await self._zoo.call(self._load_quotas)

    def _load_quotas(self) -> dict[QuotaEntity, dict[str, int]]:
        client = self._zoo.kazoo
        quotas: dict[QuotaEntity, dict[str, int]] = {}

        def read(path: str, entity: QuotaEntity) -> None:
            try:
                data, _ = client.get(path)
            except NoNodeError:
                return
            values = quota_values(path, _load(path, data).get("config", {}))
            if values:
                quotas[entity] = values

        def name(escaped: str) -> str | None:
            return None if escaped == DEFAULT else unescape(escaped)

        for user in _children(client, USERS_ZNODE):
            node = f"{USERS_ZNODE}/{user}"
            read(node, ((USER, name(user)),))
            for cid in _children(client, f"{node}/clients"):
                read(f"{node}/clients/{cid}", ((USER, name(user)), (CLIENT_ID, name(cid))))
        for cid in _children(client, CLIENTS):
            read(f"{CLIENTS}/{cid}", ((CLIENT_ID, name(cid)),))
        return quotas

    async def alter_quota(self, entity: QuotaEntity, set_: Mapping[str, int],
                          remove: Iterable[str]) -> None:
        await self._zoo.call(self._alter_quota, entity, dict(set_), list(remove))

    def _alter_quota(self, entity: QuotaEntity, set_: dict[str, int], remove: list[str]
                     ) -> None:
        client = self._zoo.kazoo
        path = quota_path(entity)

        def change(data: bytes | None) -> bytes:
            doc = {"version": 1} if data is None else _load(path, data)
            config = doc.get("config")
            config = dict(config) if isinstance(config, dict) else {}
            config.update({k: str(v) for k, v in set_.items()})
            for key in remove:
                config.pop(key, None)
            return json.dumps({**doc, "version": 1, "config": config}).encode()

        update_znode(client, path, change)
        _notify(client, QUOTA_CHANGES, QUOTA_CHANGE_PREFIX)

    # ---------------------------------------------------------------------------- changes

    async def watch(self, reload: Callable[[], Awaitable[None]]) -> None:
        changed = trio.Event()

        def on_children(children: list[str]) -> None:
            changed.set()

        client = self._zoo.kazoo
        for path in (ACL_CHANGES, QUOTA_CHANGES):
            await self._zoo.call(client.ensure_path, path)
            await self._zoo.call(client.ChildrenWatch, path, self._zoo.forward(on_children))
        while True:
            await changed.wait()
            changed = trio.Event()
            try:
                await reload()
            except Exception as exc:  # ZooKeeper unreachable meanwhile: the next change retries
                log.warning("security.reload_failed", reason=f"{type(exc).__name__}: {exc}")


def _change_resource_acls(client: KazooClient, resource_type: ResourceType, pattern: PatternType,
                          name: str, adding: list[AclBinding], removing: set[AclBinding]
                          ) -> None:
    """One resource's node: its ACLs less ``removing``, plus ``adding``; gone when none are
    left."""
    path = acl_path(resource_type, pattern, name)

    def change(data: bytes | None) -> bytes | None:
        current = [] if data is None else _decode_acls(path, data, resource_type, pattern, name)
        acls = list(dict.fromkeys([*(a for a in current if a not in removing), *adding]))
        return _encode_acls(acls) if acls else None

    update_znode(client, path, change)


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def _notify(client: KazooClient, parent: str, prefix: str) -> None:
    client.create(f"{parent}/{prefix}", b'{"version":1}', sequence=True, makepath=True)
    for old in sorted(_children(client, parent))[:-CHANGES_KEPT]:
        with contextlib.suppress(NoNodeError):
            client.delete(f"{parent}/{old}")
