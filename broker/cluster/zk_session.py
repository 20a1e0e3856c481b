"""A broker's ZooKeeper session, before the broker is a cluster member.

The session comes first because the cluster id is ZooKeeper's and the data directory must share
it before the broker's identity is settled; the member (``zk_cluster.ZooKeeperCluster``) is built
on it once the identity is known. The security and credential stores need nothing but the
session, so they are made here.
"""

from __future__ import annotations

import contextlib

import structlog
import trio
from kazoo.exceptions import NodeExistsError

from broker.cluster import zk_layout as zk
from broker.cluster.zookeeper import ZooKeeper, ZooKeeperUnavailableError
from broker.identity import new_cluster_id
from broker.security.credentials import CredentialStore, ZooKeeperCredentialStore
from broker.security.store import SecurityStore
from broker.security.zk_store import ZkSecurityStore
from broker.settings import BrokerSettings

log = structlog.get_logger(__name__)

#: between two attempts to reach ZooKeeper
CONNECT_RETRY_S = 1.0


class ZooKeeperSession:
    """The session ``zookeeper_connect`` names; its owner closes it (``close``)."""

    def __init__(self, settings: BrokerSettings) -> None:
        assert settings.zookeeper_connect is not None
        self.settings = settings
        self.zoo = ZooKeeper(settings.zookeeper_connect,
                             session_timeout_ms=settings.zookeeper_session_timeout_ms,
                             connection_timeout_ms=settings.zookeeper_connection_timeout_ms)

    async def connect(self) -> str:
        """Reach ZooKeeper (retrying, with a clear line each time, until it answers), make the
        cluster's persistent nodes, and return the cluster id (``/cluster/id``, created by the
        first broker)."""
        while True:
            try:
                await self.zoo.start()
                break
            except ZooKeeperUnavailableError as exc:
                # a clear line and another try, not a crash loop
                log.error("zookeeper.unreachable", connect=self.settings.zookeeper_connect,
                          reason=str(exc), retry_in_s=CONNECT_RETRY_S)
                await trio.sleep(CONNECT_RETRY_S)
        return await self.zoo.call(_prepare_cluster, self.zoo)

    def security_store(self) -> SecurityStore:
        """The cluster's ACLs and quotas, shared by every broker."""
        return ZkSecurityStore(self.zoo)

    def credential_store(self) -> CredentialStore:
        """The cluster's SCRAM credentials, shared by every broker."""
        return ZooKeeperCredentialStore(self.zoo)

    async def close(self) -> None:
        """End the session (its ephemeral nodes, the registration among them, go at once);
        shielded, so that a broker being cancelled still leaves cleanly."""
        with trio.CancelScope(shield=True):
            await self.zoo.stop()


def _prepare_cluster(zoo: ZooKeeper) -> str:
    client = zoo.kazoo
    for path in zk.PERSISTENT_PATHS:
        client.ensure_path(path)
    with contextlib.suppress(NodeExistsError):
        client.create(zk.CLUSTER_ID, zk.encode_cluster_id(new_cluster_id()))
    data, _ = client.get(zk.CLUSTER_ID)
    return zk.decode_cluster_id(data)
