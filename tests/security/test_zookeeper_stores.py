"""The ZooKeeper stores of credentials, ACLs and quotas: every read-modify-write is conditional
on the version read (a change made meanwhile is kept, not overwritten), and a user's credentials
live in the same ``/config/users/<name>`` node as their quotas, whatever the name holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from kazoo.client import KazooClient

from broker.cluster.zookeeper import ZooKeeper, update_znode
from broker.security.credentials import ZooKeeperCredentialStore
from broker.security.zk_store import ZkSecurityStore, quota_path
from protocol.scram import ScramCredential, encode_user
from protocol.zk_names import user_znode


@pytest.fixture
async def zoo(zk_connect: str) -> AsyncIterator[ZooKeeper]:
    zoo = ZooKeeper(zk_connect, session_timeout_ms=10_000, connection_timeout_ms=10_000)
    await zoo.start()
    yield zoo
    await zoo.stop()


def _append(kazoo: KazooClient, path: str, item: str, *, meanwhile: str | None = None) -> None:
    """Add ``item`` to the JSON list at ``path``; ``meanwhile`` is written by another writer
    after the first read, as if it had got in between."""
    reads = 0

    def change(data: bytes | None) -> bytes:
        nonlocal reads
        reads += 1
        if meanwhile is not None and reads == 1:
            _append(kazoo, path, meanwhile)
        return json.dumps([*(json.loads(data) if data else []), item]).encode()

    update_znode(kazoo, path, change)


async def test_a_change_made_between_the_read_and_the_write_is_kept(zoo: ZooKeeper):
    kazoo = zoo.kazoo
    await zoo.call(_append, kazoo, "/list", "first")
    await zoo.call(_append, kazoo, "/list", "mine", meanwhile="theirs")
    assert json.loads((await zoo.call(kazoo.get, "/list"))[0]) == ["first", "theirs", "mine"]
    await zoo.call(_append, kazoo, "/new", "mine", meanwhile="theirs")  # created meanwhile
    assert json.loads((await zoo.call(kazoo.get, "/new"))[0]) == ["theirs", "mine"]


async def test_none_deletes_the_node_and_creates_nothing(zoo: ZooKeeper):
    kazoo = zoo.kazoo
    await zoo.call(update_znode, kazoo, "/gone", lambda data: None)
    assert await zoo.call(kazoo.exists, "/gone") is None
    await zoo.call(kazoo.create, "/gone", b"x")
    await zoo.call(update_znode, kazoo, "/gone", lambda data: None)
    assert await zoo.call(kazoo.exists, "/gone") is None


@pytest.mark.parametrize("name", ["alice", "team/alice", "100%"])
async def test_a_users_credentials_share_the_node_of_their_quotas(zoo: ZooKeeper, name: str):
    credentials = ZooKeeperCredentialStore(zoo)
    quotas = ZkSecurityStore(zoo)
    entity = (("user", name),)
    await quotas.alter_quota(entity, {"producer_byte_rate": 1024}, [])
    credential = ScramCredential.derive("SCRAM-SHA-256", "s3cret")
    await credentials.alter(name, lambda current: {"SCRAM-SHA-256": credential})
    assert await credentials.user(name) == {"SCRAM-SHA-256": credential}
    assert await credentials.users() == {name: {"SCRAM-SHA-256": credential}}
    assert (await quotas.load_quotas())[entity] == {"producer_byte_rate": 1024}
    node = json.loads((await zoo.call(zoo.kazoo.get, quota_path(entity)))[0])
    assert set(node["config"]) == {"producer_byte_rate", "SCRAM-SHA-256"}
    await credentials.alter(name, lambda current: {})
    assert await credentials.users() == {}
    assert (await quotas.load_quotas())[entity] == {"producer_byte_rate": 1024}


async def test_a_user_node_made_for_a_client_quota_holds_no_credentials(zoo: ZooKeeper):
    """A quota on alice's client id creates /config/users/alice/clients/<id>, and with it an
    empty /config/users/alice: no credential, not an unreadable one."""
    credentials = ZooKeeperCredentialStore(zoo)
    await ZkSecurityStore(zoo).alter_quota((("user", "alice"), ("client-id", "etl")),
                                           {"consumer_byte_rate": 1024}, [])
    assert await credentials.user("alice") == {}
    assert await credentials.users() == {}


async def test_a_credential_added_meanwhile_by_another_broker_is_kept(zoo: ZooKeeper):
    """Two brokers add alice's two mechanisms at once: the second write, conditional on the
    version it read, reads again and keeps the first."""
    store = ZooKeeperCredentialStore(zoo)
    sha256 = ScramCredential.derive("SCRAM-SHA-256", "s3cret")
    sha512 = ScramCredential.derive("SCRAM-SHA-512", "s3cret")
    calls = 0

    def add_sha256(current: dict[str, ScramCredential]) -> dict[str, ScramCredential]:
        nonlocal calls
        calls += 1
        if calls == 1:  # the other broker writes between this read and this write
            zoo.kazoo.create(user_znode("alice"), encode_user({"SCRAM-SHA-512": sha512}),
                             makepath=True)
        return {**current, "SCRAM-SHA-256": sha256}

    await store.alter("alice", add_sha256)
    assert await store.user("alice") == {"SCRAM-SHA-256": sha256, "SCRAM-SHA-512": sha512}
