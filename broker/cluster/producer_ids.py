"""Producer ids for idempotent producers (InitProducerId, KIP-98): no two producers of a
cluster ever get the same one, across restarts too, because a leader keeps each producer's
last batches under its id and would take one producer's batches for another's retries.

Ids are taken in blocks of ``BLOCK_SIZE``, as Kafka takes them, so that handing one out costs
nothing most of the time. A block is claimed before any of its ids is given:

- in a ZooKeeper cluster, from ``/latest_producer_id_block`` (Kafka's node and JSON), by a write
  conditional on the version read: two brokers claiming at once cannot both win, and the loser
  reads again and claims the next block;
- on a broker without ZooKeeper, from ``producer_id_block`` in its data directory, in the same
  JSON, written atomically and fsynced before the block is used: a restart claims the block
  after it, never one whose ids may have been handed out.

A claimed block that a broker does not use up is lost when it stops, as in Kafka. A cluster
member keeps a spare block claimed ahead (``keep_a_block_ready``), so that it hands out ids while
cut from ZooKeeper.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
import trio
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.cluster import zk_layout as zk
from broker.cluster.zookeeper import ZooKeeper
from broker.log.layout import write_atomically

#: ids in a block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``)
BLOCK_SIZE = 1000
#: the file that holds a broker's last claimed block when it has no ZooKeeper
BLOCK_FILE = "producer_id_block"
#: the largest producer id: a record batch holds it in an int64
MAX_PRODUCER_ID = 2**63 - 1
#: between two attempts to claim a spare block while ZooKeeper cannot be reached
SPARE_RETRY_S = 1.0

log = structlog.get_logger(__name__)


class ProducerIdsExhaustedError(RuntimeError):
    """No block is left below ``MAX_PRODUCER_ID`` (never reached in practice)."""


@dataclass(frozen=True)
class ProducerIdBlock:
    """The ids ``first`` to ``last`` (inclusive), claimed by ``broker_id``."""

    broker_id: int
    first: int
    last: int

    def encode(self) -> bytes:
        return zk.encode_producer_id_block(self.broker_id, self.first, self.last)

    @classmethod
    def decode(cls, data: bytes, where: str) -> ProducerIdBlock:
        return cls(*zk.decode_producer_id_block(data, where))


def block_after(latest: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block ``broker_id`` claims after ``latest`` (None: no block yet, ids from 0)."""
    first = 0 if latest is None else latest.last + 1
    if first > MAX_PRODUCER_ID - BLOCK_SIZE + 1:
        raise ProducerIdsExhaustedError(f"no block of producer ids is left after {latest}")
    return ProducerIdBlock(broker_id, first, first + BLOCK_SIZE - 1)


class ProducerIds:
    """Hands out the ids of one claimed block after another; ``claim`` gets the next block
    (awaited when the current one is used up and no spare is ready, one claim at a time)."""

    def __init__(self, claim: Callable[[], Awaitable[ProducerIdBlock]]) -> None:
        self._claim = claim
        self._next = 0
        self._last = -1  # no block yet
        self._spare: ProducerIdBlock | None = None
        self._spare_taken = trio.Event()
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._last:
                block, self._spare = self._spare, None
                if block is None:
                    block = await self._claim()
                else:
                    self._spare_taken.set()
                self._next, self._last = block.first, block.last
            producer_id = self._next
            self._next += 1
            return producer_id

    async def keep_a_block_ready(self, retry_backoff: float = SPARE_RETRY_S) -> None:
        """Claim the next block before it is needed -- at start, and again each time the
        spare is taken -- so that a broker cut from ZooKeeper still hands out ids, as Kafka's
        claims its first block when it starts. Runs until cancelled; a failed claim is tried
        again after ``retry_backoff`` seconds."""
        while True:
            if self._spare is None:
                try:
                    self._spare = await self._claim()
                except Exception as exc:  # ZooKeeper away: next_id claims, or says so
                    log.info("producer_ids.spare_not_claimed", error=str(exc))
                    await trio.sleep(retry_backoff)
                    continue
            self._spare_taken = trio.Event()
            await self._spare_taken.wait()


# ------------------------------------------------------------------------------- ZooKeeper

def claim_zk_block(kazoo: KazooClient, broker_id: int) -> ProducerIdBlock:
    """Claim the block after ``/latest_producer_id_block``'s, blocking: a conditional write on
    the version read, read again when another broker wrote in between. A missing or empty node
    (Kafka creates it empty) means no block was taken yet."""
    path = zk.LATEST_PRODUCER_ID_BLOCK
    while True:
        try:
            data, stat = kazoo.get(path)
        except NoNodeError:
            block = block_after(None, broker_id)
            with contextlib.suppress(NodeExistsError):
                kazoo.create(path, block.encode(), makepath=True)
                return block
            continue
        latest = ProducerIdBlock.decode(data, path) if data else None
        block = block_after(latest, broker_id)
        with contextlib.suppress(BadVersionError, NoNodeError):
            kazoo.set(path, block.encode(), version=stat.version)
            return block


def zookeeper_producer_ids(zoo: ZooKeeper, broker_id: int) -> ProducerIds:
    """A cluster member's ids, in blocks claimed in ZooKeeper."""

    async def claim() -> ProducerIdBlock:
        return await zoo.call(claim_zk_block, zoo.kazoo, broker_id)

    return ProducerIds(claim)


# ----------------------------------------------------------------------- the data directory

def claim_file_block(data_dir: Path, broker_id: int) -> ProducerIdBlock:
    """Claim the block after the one ``producer_id_block`` holds and write it there, durably,
    before returning it (blocking)."""
    path = data_dir / BLOCK_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        latest = None
    else:
        latest = ProducerIdBlock.decode(data, str(path))
    block = block_after(latest, broker_id)
    write_atomically(path, block.encode(), durable=True)
    return block


def file_producer_ids(data_dir: Path, broker_id: int) -> ProducerIds:
    """A single broker's ids, in blocks claimed in its data directory."""

    async def claim() -> ProducerIdBlock:
        return await trio.to_thread.run_sync(claim_file_block, data_dir, broker_id)

    return ProducerIds(claim)
