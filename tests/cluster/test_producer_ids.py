"""Producer ids (``broker.cluster.producer_ids``): blocks of 1000 claimed in a single broker's
data directory or in ZooKeeper's ``/latest_producer_id_block``, so that no id is handed out
twice -- not after a restart, not by two brokers claiming at once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from kazoo.client import KazooClient

from broker.cluster import zk_layout as zk
from broker.cluster.producer_ids import (
    BLOCK_FILE,
    BLOCK_SIZE,
    MAX_PRODUCER_ID,
    ProducerIdBlock,
    ProducerIds,
    ProducerIdsExhaustedError,
    block_after,
    claim_zk_block,
    file_producer_ids,
    zookeeper_producer_ids,
)
from broker.cluster.zookeeper import ZooKeeper
from client.network import NetworkClient
from client.producer_ids import init_producer_id
from tests.cluster.conftest import Cluster, until

# ------------------------------------------------------------------------- the data directory


async def take(ids: ProducerIds, count: int) -> list[int]:
    return [await ids.next_id() for _ in range(count)]


async def test_ids_follow_one_another_across_blocks(tmp_path: Path) -> None:
    ids = file_producer_ids(tmp_path, 3)
    assert await take(ids, 2 * BLOCK_SIZE + 1) == list(range(2 * BLOCK_SIZE + 1))


async def test_the_block_is_on_disk_before_its_first_id_is_handed_out(tmp_path: Path) -> None:
    ids = file_producer_ids(tmp_path, 3)
    assert await ids.next_id() == 0
    written = json.loads((tmp_path / BLOCK_FILE).read_bytes())
    assert written == {"version": 1, "broker": 3, "block_start": "0", "block_end": "999"}


async def test_a_restart_never_hands_out_an_id_again(tmp_path: Path) -> None:
    first = await take(file_producer_ids(tmp_path, 0), 5)  # a block barely used, then a stop
    second = await take(file_producer_ids(tmp_path, 0), BLOCK_SIZE + 5)  # two blocks
    third = await take(file_producer_ids(tmp_path, 0), 1)
    assert first == [0, 1, 2, 3, 4]
    assert second[0] == BLOCK_SIZE and second[-1] == 2 * BLOCK_SIZE + 4
    assert third == [3 * BLOCK_SIZE]
    assert len(set(first + second + third)) == len(first + second + third)


async def test_a_damaged_block_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / BLOCK_FILE).write_bytes(b"not json")
    with pytest.raises(zk.ZkFormatError, match=BLOCK_FILE):
        await file_producer_ids(tmp_path, 0).next_id()


async def test_a_spare_block_is_claimed_ahead_and_claiming_retried_until_it_can() -> None:
    """The spare lets a broker cut from ZooKeeper hand out ids: next_id takes it without a
    claim of its own, and the spare is claimed again at once; a failing claim is retried."""
    claimed: list[ProducerIdBlock] = []
    failures = [RuntimeError("ZooKeeper away")]

    async def claim() -> ProducerIdBlock:
        if failures:
            raise failures.pop()
        claimed.append(block_after(claimed[-1] if claimed else None, 0))
        return claimed[-1]

    ids = ProducerIds(claim)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ids.keep_a_block_ready, 0.01)
            while not claimed:
                await trio.sleep(0.01)
            assert not failures and len(claimed) == 1
            claim_count_before = len(claimed)
            failures.append(RuntimeError("cut"))  # next_id must not need a claim now
            assert await ids.next_id() == 0
            assert [await ids.next_id() for _ in range(2)] == [1, 2]
            while len(claimed) < claim_count_before + 1:  # the spare again, once retried
                await trio.sleep(0.01)
            assert claimed[-1].first == 1000
            nursery.cancel_scope.cancel()


def test_no_block_is_claimed_past_the_largest_id() -> None:
    last = ProducerIdBlock(0, MAX_PRODUCER_ID - BLOCK_SIZE + 1, MAX_PRODUCER_ID)
    with pytest.raises(ProducerIdsExhaustedError):
        block_after(last, 0)
    assert block_after(None, 7) == ProducerIdBlock(7, 0, BLOCK_SIZE - 1)


# ------------------------------------------------------------------------------- ZooKeeper

def kazoo(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=10)
    client.start(timeout=10)
    return client


def close(*clients: KazooClient) -> None:
    for client in clients:
        client.stop()
        client.close()


def chrooted(zk_connect: str, *paths: str) -> KazooClient:
    """A session on the test's chroot, made first with ``paths`` in it (empty nodes)."""
    hosts, _, chroot = zk_connect.partition("/")
    root = kazoo(hosts)
    try:
        root.ensure_path("/" + chroot)
        for path in paths:
            root.ensure_path("/" + chroot + path)
    finally:
        close(root)
    return kazoo(zk_connect)


@pytest.mark.cluster
def test_the_znode_holds_kafkas_json(zk_connect: str) -> None:
    client = chrooted(zk_connect)
    try:
        assert claim_zk_block(client, 1) == ProducerIdBlock(1, 0, 999)
        assert claim_zk_block(client, 2) == ProducerIdBlock(2, 1000, 1999)
        data, _ = client.get(zk.LATEST_PRODUCER_ID_BLOCK)
        assert data == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    finally:
        close(client)


@pytest.mark.cluster
def test_an_empty_node_as_kafka_creates_it_starts_at_zero(zk_connect: str) -> None:
    client = chrooted(zk_connect, zk.LATEST_PRODUCER_ID_BLOCK)
    try:
        assert client.get(zk.LATEST_PRODUCER_ID_BLOCK)[0] == b""
        assert claim_zk_block(client, 4) == ProducerIdBlock(4, 0, 999)
    finally:
        close(client)


@pytest.mark.cluster
def test_brokers_claiming_at_once_never_get_the_same_block(zk_connect: str) -> None:
    """Threads with sessions of their own claim blocks as fast as they can: every claim wins
    a block of its own (the conditional write makes the losers read again)."""
    clients = [chrooted(zk_connect) for _ in range(4)]
    claimed: list[list[ProducerIdBlock]] = [[] for _ in clients]
    start = threading.Barrier(len(clients))

    def claim(n: int) -> None:
        start.wait(timeout=30)
        for _ in range(25):
            claimed[n].append(claim_zk_block(clients[n], n))

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(len(clients))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    finally:
        close(*clients)
    blocks = sorted((b for mine in claimed for b in mine), key=lambda b: b.first)
    assert [b.first for b in blocks] == [n * BLOCK_SIZE for n in range(100)]
    assert all(b.last == b.first + BLOCK_SIZE - 1 for b in blocks)
    assert all(b.broker_id == n for n, mine in enumerate(claimed) for b in mine)


@pytest.mark.cluster
async def test_two_brokers_handing_out_ids_at_once_never_share_one(zk_connect: str) -> None:
    zoos = [ZooKeeper(zk_connect, session_timeout_ms=10000, connection_timeout_ms=10000)
            for _ in range(2)]
    for zoo in zoos:
        await zoo.start()
    handed: list[list[int]] = [[], []]
    try:
        async def hand_out(n: int) -> None:
            ids = zookeeper_producer_ids(zoos[n], n)
            for _ in range(2 * BLOCK_SIZE + 10):
                handed[n].append(await ids.next_id())

        async with trio.open_nursery() as nursery:
            for n in range(2):
                nursery.start_soon(hand_out, n)
    finally:
        for zoo in zoos:
            await zoo.stop()
    every = handed[0] + handed[1]
    assert len(set(every)) == len(every) == 2 * (2 * BLOCK_SIZE + 10)
    # each took three whole blocks, so six blocks went, 0..5999
    assert max(every) < 6 * BLOCK_SIZE


# ------------------------------------------------------------------------ a real cluster

@pytest.mark.integration
@pytest.mark.cluster
@pytest.mark.timeout(90)
def test_brokers_of_a_cluster_hand_out_ids_from_blocks_of_their_own(
        make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2)
    handed: dict[int, list[int]] = {}
    for broker_id, process in cluster.brokers.items():
        network = NetworkClient(process.bootstrap, request_timeout_ms=10_000)
        try:
            got = [init_producer_id(network, 20.0) for _ in range(3)]
        finally:
            network.close()
        assert [g.epoch for g in got] == [0, 0, 0]
        handed[broker_id] = [g.producer_id for g in got]
    # each broker numbers from a block of its own...
    assert all(ids == list(range(ids[0], ids[0] + 3)) and ids[0] % 1000 == 0
               for ids in handed.values()), handed
    assert handed[0][0] != handed[1][0]
    # ...and keeps the next one claimed ahead (claimed again once its spare was taken): four
    # blocks claimed, two in use and two spare
    until(lambda: cluster.json(zk.LATEST_PRODUCER_ID_BLOCK)["block_end"] == "3999", 20,
          "each broker's next block claimed ahead")
    latest = cluster.json(zk.LATEST_PRODUCER_ID_BLOCK)
    assert latest["version"] == 1 and latest["broker"] in (0, 1)
    assert (latest["block_start"], latest["block_end"]) == ("3000", "3999")
