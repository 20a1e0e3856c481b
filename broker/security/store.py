"""Where ACLs and quotas are kept: a file in the data directory for a broker on its own, in
ZooKeeper for a cluster (``broker.security.zk_store``). Both stores hold every ACL and every
quota; the broker loads them whole at start and after every change.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

from broker.log.layout import write_atomically
from broker.security.quotas import QUOTA_KEYS, QuotaEntity, canonical
from protocol.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)

ACLS_FILE = "acls.json"
QUOTAS_FILE = "quotas.json"


class SecurityStoreError(RuntimeError):
    """A stored ACL or quota cannot be read; the message names the file or znode."""


class SecurityStore(Protocol):
    async def load_acls(self) -> list[AclBinding]: ...

    async def change_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]
                          ) -> None: ...

    async def load_quotas(self) -> dict[QuotaEntity, dict[str, int]]: ...

    async def alter_quota(self, entity: QuotaEntity, set_: Mapping[str, int],
                          remove: Iterable[str]) -> None: ...

    async def watch(self, reload: Callable[[], Awaitable[None]]) -> None:
        """Call ``reload`` whenever another broker changed something (never returns)."""
        ...


def acl_entry(acl: AclBinding) -> dict[str, Any]:
    """What an ACL says of its resource, in the form Kafka keeps in ZooKeeper's ``/kafka-acl``
    nodes (the node names the resource); the data directory's file adds the resource."""
    return {"principal": acl.principal, "permissionType": acl.permission.title,
            "operation": acl.operation.title, "host": acl.host}


def acl_from_entry(resource_type: ResourceType, pattern: PatternType, name: str,
                   entry: dict[str, Any]) -> AclBinding:
    """KeyError, TypeError or ValueError if ``entry`` is not one."""
    return AclBinding(
        resource_type=resource_type, resource_name=name, pattern_type=pattern,
        principal=str(entry["principal"]), host=str(entry["host"]),
        operation=parse_enum(AclOperation, entry["operation"]),
        permission=parse_enum(AclPermissionType, entry["permissionType"]),
    )


def acl_to_json(acl: AclBinding) -> dict[str, Any]:
    return {"resource_type": acl.resource_type.title, "pattern_type": acl.pattern_type.title,
            "name": acl.resource_name, **acl_entry(acl)}


def acl_from_json(entry: dict[str, Any]) -> AclBinding:
    return acl_from_entry(parse_enum(ResourceType, entry["resource_type"]),
                          parse_enum(PatternType, entry["pattern_type"]), str(entry["name"]),
                          entry)


def quota_values(where: str, values: Any) -> dict[str, int]:
    """The quota keys of a config map (other keys -- SCRAM credentials -- are not ours)."""
    if not isinstance(values, dict):
        raise SecurityStoreError(f"{where}: quotas are not an object")
    try:
        return {k: int(v) for k, v in values.items() if k in QUOTA_KEYS}
    except (TypeError, ValueError) as exc:
        raise SecurityStoreError(f"{where}: {exc}") from None


class FileSecurityStore:
    """``acls.json`` and ``quotas.json`` in the data directory, each replaced atomically (a
    temporary file, fsynced, renamed over the old one): a crash leaves the old or the new."""

    def __init__(self, data_dir: Path) -> None:
        self._acls_path = data_dir / ACLS_FILE
        self._quotas_path = data_dir / QUOTAS_FILE
        self._acls: list[AclBinding] = []
        self._quotas: dict[QuotaEntity, dict[str, int]] = {}

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            doc = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise SecurityStoreError(f"cannot read {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise SecurityStoreError(f"{path} is not a version 1 document")
        return doc

    async def load_acls(self) -> list[AclBinding]:
        doc = self._read(self._acls_path)
        try:
            self._acls = [] if doc is None else [acl_from_json(a) for a in doc["acls"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SecurityStoreError(f"{self._acls_path}: {type(exc).__name__}: {exc}") from None
        return list(self._acls)

    async def change_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]
                          ) -> None:
        gone = set(remove)
        acls = list(dict.fromkeys([*(a for a in self._acls if a not in gone), *add]))
        doc = {"version": 1, "acls": [acl_to_json(a) for a in acls]}
        write_atomically(self._acls_path, json.dumps(doc, indent=1).encode(), durable=True)
        self._acls = acls

    async def load_quotas(self) -> dict[QuotaEntity, dict[str, int]]:
        doc = self._read(self._quotas_path)
        quotas: dict[QuotaEntity, dict[str, int]] = {}
        try:
            for entry in [] if doc is None else doc["quotas"]:
                quotas[canonical(entry["entity"])] = quota_values(
                    str(self._quotas_path), entry["values"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SecurityStoreError(
                f"{self._quotas_path}: {type(exc).__name__}: {exc}") from None
        self._quotas = quotas
        return {e: dict(v) for e, v in quotas.items()}

    async def alter_quota(self, entity: QuotaEntity, set_: Mapping[str, int],
                          remove: Iterable[str]) -> None:
        quotas = {e: dict(v) for e, v in self._quotas.items()}
        values = quotas.setdefault(entity, {})
        values.update(set_)
        for key in remove:
            values.pop(key, None)
        quotas = {e: v for e, v in quotas.items() if v}
        doc = {"version": 1, "quotas": [
            {"entity": dict(e), "values": v} for e, v in quotas.items()]}
        write_atomically(self._quotas_path, json.dumps(doc, indent=1).encode(), durable=True)
        self._quotas = quotas

    async def watch(self, reload: Callable[[], Awaitable[None]]) -> None:
        """One broker is the only writer: nothing to watch."""
        await trio.sleep_forever()

