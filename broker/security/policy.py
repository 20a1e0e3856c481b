"""The broker's security policy: its authorizer (when ``authorizer_enabled``), its client
quotas, and the store both are kept in. Handlers ask it, for the connection the request came
on (``CLIENT_CONNECTION``): may this principal do what this API needs (``API_ACLS``)? How long
must its response wait for its quota?
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

import structlog

from broker.client_connection import ANONYMOUS, CLIENT_CONNECTION, ClientConnection
from broker.security.authorizer import AclAuthorizer
from broker.security.quotas import ClientQuotas, QuotaEntity, describe
from broker.security.store import SecurityStore
from protocol.acls import CLUSTER_NAME, AclBinding, AclOperation, ResourceType, operation_for
from protocol.apis import ApiKey
from protocol.errors import ClusterAuthorizationFailedError

log = structlog.get_logger(__name__)

#: who a request is from when it came on no client connection (the broker itself)
_NO_CONNECTION = ClientConnection(0, "", principal=ANONYMOUS)


def current_connection() -> ClientConnection:
    return CLIENT_CONNECTION.get() or _NO_CONNECTION


class SecurityPolicy:
    def __init__(self, store: SecurityStore, *, authorizer_enabled: bool,
                 super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
                 ) -> None:
        self.store = store
        self.authorizer = AclAuthorizer(
            super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
        ) if authorizer_enabled else None
        self.quotas = ClientQuotas()

    async def load(self) -> None:
        """Load ACLs and quotas from the store (at start and after another broker's change)."""
        if self.authorizer is not None:
            self.authorizer.replace(await self.store.load_acls())
        self.quotas.replace(await self.store.load_quotas())

    async def watch(self) -> None:
        await self.store.watch(self.load)

    # ------------------------------------------------------------------------- ACLs

    def allowed(self, api: ApiKey, resource_type: ResourceType, name: str,
                operation: AclOperation | None = None) -> bool:
        """Whether the current connection's principal may do what ``api`` needs on the
        resource (``API_ACLS``; ``operation`` picks one where the table lists several for the
        resource type); always, without an authorizer."""
        if self.authorizer is None:
            return True
        operation = operation_for(api, resource_type, operation)
        connection = current_connection()
        ok = self.authorizer.authorize(connection.principal, connection.host, operation,
                                       resource_type, name)
        if not ok:
            log.debug("request.denied", api=api.name, principal=connection.principal,
                      host=connection.host, operation=operation.title,
                      resource=f"{resource_type.title}:{name}")
        return ok

    def allowed_on_any(self, api: ApiKey, resource_type: ResourceType,
                       operation: AclOperation | None = None) -> bool:
        """Whether the current principal may do what ``api`` needs on at least one resource
        of ``resource_type`` (KIP-679's check by resource type); always, without an
        authorizer."""
        if self.authorizer is None:
            return True
        operation = operation_for(api, resource_type, operation)
        connection = current_connection()
        return self.authorizer.authorize_any(connection.principal, connection.host, operation,
                                             resource_type)

    def require_cluster(self, api: ApiKey, what: str | None = None) -> None:
        """ClusterAuthorizationFailedError unless the current principal may do what ``api``
        needs on the cluster; the message names the operation and the principal (a broker
        refused the controller's requests says which user lacks ClusterAction). Clients put
        the API's name before it; ``what`` says more where the API does several things."""
        if self.allowed(api, ResourceType.CLUSTER, CLUSTER_NAME):
            return
        operation = operation_for(api, ResourceType.CLUSTER).title
        raise ClusterAuthorizationFailedError(
            f"{what + ' ' if what else ''}needs {operation} on the cluster, which "
            f"{current_connection().principal} does not have (super_users or an ACL)")

    def may_create_topic(self, api: ApiKey, name: str) -> bool:
        """Create on the cluster, or on the topic (Kafka's CreateTopics and auto-creation)."""
        return (self.allowed(api, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE)
                or self.allowed(api, ResourceType.TOPIC, name, AclOperation.CREATE))

    async def change_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]
                          ) -> None:
        await self.store.change_acls(add, remove)
        assert self.authorizer is not None
        self.authorizer.replace(await self.store.load_acls())
        for acl in add:
            log.info("acl.added", acl=str(acl))
        for acl in remove:
            log.info("acl.removed", acl=str(acl))

    # ----------------------------------------------------------------------- quotas

    def record_bytes(self, key: str, size: int) -> int:
        """Count ``size`` bytes of the current connection against its quota ``key``; the
        milliseconds its response is to be held back."""
        if not self.quotas.quotas:
            return 0
        connection = current_connection()
        throttle = self.quotas.record(key, connection.principal, connection.client_id or "",
                                      size, time.monotonic())
        if throttle.throttle_ms and throttle.entity is not None:
            log.debug("quota.throttled", quota=key, entity=describe(throttle.entity),
                      throttle_time_ms=throttle.throttle_ms)
        return throttle.throttle_ms

    async def alter_quota(self, entity: QuotaEntity, set_: Mapping[str, int],
                          remove: Sequence[str]) -> None:
        await self.store.alter_quota(entity, set_, remove)
        self.quotas.replace(await self.store.load_quotas())
        log.info("quota.altered", entity=describe(entity), set=dict(set_), removed=list(remove))
