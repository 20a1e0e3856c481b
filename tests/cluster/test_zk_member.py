"""A cluster member in-process, on the session's ZooKeeper: the session reads the cluster id
before the broker has an identity, the member is built once with that identity and registers
the addresses it is given, and each kind of cluster keeps the ACLs, quotas and credentials where
its brokers share them (ZooKeeper, or a single broker's data directory)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.cluster import Cluster
from broker.cluster import zk_layout as zk
from broker.cluster.membership import ClusterStartError
from broker.cluster.single import SingleBroker
from broker.cluster.zk_cluster import ZooKeeperCluster
from broker.cluster.zk_session import ZooKeeperSession
from broker.group_driver import GroupDriver
from broker.identity import BrokerIdentity, load_or_create
from broker.purgatory import FetchPurgatory
from broker.security.credentials import FileCredentialStore
from broker.security.store import FileSecurityStore
from broker.settings import BrokerSettings
from broker.topics import Topics
from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.scram import ScramCredential

ACL = AclBinding(resource_type=ResourceType.TOPIC, resource_name="t",
                 pattern_type=PatternType.LITERAL, principal="User:alice", host="*",
                 operation=AclOperation.READ, permission=AclPermissionType.ALLOW)
CREDENTIAL = ScramCredential.derive("SCRAM-SHA-256", "s3cret")


def _settings(data_dir: Path, zk_connect: str | None, broker_id: int = 1) -> BrokerSettings:
    return BrokerSettings(data_dir=str(data_dir), zookeeper_connect=zk_connect,
                          broker_id=broker_id, offsets_topic_partitions=1,
                          zookeeper_session_timeout_ms=4000,
                          zookeeper_connection_timeout_ms=3000)


class Member:
    """A session, connected, and the member built on it once the identity is known."""

    def __init__(self, settings: BrokerSettings, session: ZooKeeperSession,
                 identity: BrokerIdentity) -> None:
        self.session = session
        self.identity = identity
        self.topics = Topics(settings)
        self.cluster = ZooKeeperCluster(session, identity, self.topics, FetchPurgatory())

    async def close(self) -> None:
        self.cluster.stop()
        await self.session.close()
        self.topics.close()


async def _member(data_dir: Path, zk_connect: str, broker_id: int = 1) -> Member:
    settings = _settings(data_dir, zk_connect, broker_id)
    session = ZooKeeperSession(settings)
    cluster_id = await session.connect()
    return Member(settings, session,
                  load_or_create(settings.data_path, broker_id, cluster_id=cluster_id))


@pytest.fixture
async def member(tmp_path: Path, zk_connect: str) -> AsyncIterator[Member]:
    made = await _member(tmp_path / "a", zk_connect)
    yield made
    await made.close()


async def test_sessions_read_one_cluster_id_which_a_new_directory_takes(
        member: Member, tmp_path: Path, zk_connect: str):
    other = ZooKeeperSession(_settings(tmp_path / "b", zk_connect, broker_id=2))
    try:
        assert await other.connect() == member.identity.cluster_id
    finally:
        await other.close()


async def test_the_member_registers_the_addresses_it_is_given(member: Member):
    endpoints = (("PLAINTEXT", "127.0.0.1", 9100), ("KAFKA_PLAINTEXT", "127.0.0.1", 9101))
    await member.cluster.register(host="127.0.0.1", port=9100, endpoints=endpoints)
    zoo = member.session.zoo
    data, stat = await zoo.call(zoo.kazoo.get, zk.broker_path(1))
    registered = zk.BrokerRegistration.decode(1, data)
    assert (registered.host, registered.port) == ("127.0.0.1", 9100)
    assert registered.listeners == endpoints
    assert registered.directory_id == member.identity.directory_id
    assert stat.ephemeralOwner == zoo.session_id
    assert member.cluster.broker_id == 1


async def test_its_id_registered_from_another_directory_is_refused(
        member: Member, tmp_path: Path, zk_connect: str):
    await member.cluster.register(host="127.0.0.1", port=9100)
    clash = await _member(tmp_path / "b", zk_connect, broker_id=1)
    try:
        with pytest.raises(ClusterStartError, match="already registered"):
            await clash.cluster.register(host="127.0.0.1", port=9200)
    finally:
        await clash.close()


async def test_a_registration_goes_with_its_session(
        tmp_path: Path, zk_connect: str):
    gone = await _member(tmp_path / "a", zk_connect)
    await gone.cluster.register(host="127.0.0.1", port=9100)
    await gone.close()
    watcher = ZooKeeperSession(_settings(tmp_path / "b", zk_connect, broker_id=2))
    try:
        await watcher.connect()
        assert await watcher.zoo.call(watcher.zoo.kazoo.exists, zk.broker_path(1)) is None
    finally:
        await watcher.close()


async def test_a_members_stores_are_the_clusters(member: Member, tmp_path: Path,
                                                 zk_connect: str):
    """What one broker writes through its member, another broker's session reads."""
    cluster: Cluster = member.cluster
    await cluster.security_store().change_acls([ACL], [])
    await cluster.credential_store().alter("alice", lambda current: {"SCRAM-SHA-256": CREDENTIAL})
    other = ZooKeeperSession(_settings(tmp_path / "b", zk_connect, broker_id=2))
    try:
        await other.connect()
        assert await other.security_store().load_acls() == [ACL]
        assert await other.credential_store().user("alice") == {"SCRAM-SHA-256": CREDENTIAL}
    finally:
        await other.close()
    assert not list((tmp_path / "a").glob("*acl*"))  # nothing in the data directory


async def test_a_single_brokers_stores_are_its_data_directory(tmp_path: Path):
    settings = _settings(tmp_path, None)
    topics = Topics(settings)
    try:
        purgatory = FetchPurgatory()
        groups = GroupDriver(settings.coordinator_config(), topics, purgatory)
        cluster: Cluster = SingleBroker(settings, 1, topics, purgatory, groups,
                                        listener_ports={})
        await cluster.security_store().change_acls([ACL], [])
        await cluster.credential_store().alter("alice",
                                               lambda current: {"SCRAM-SHA-256": CREDENTIAL})
    finally:
        topics.close()
    assert await FileSecurityStore(tmp_path).load_acls() == [ACL]
    assert await FileCredentialStore(tmp_path).user("alice") == {"SCRAM-SHA-256": CREDENTIAL}
