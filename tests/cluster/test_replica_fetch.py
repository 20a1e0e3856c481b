"""The follower's two pure steps: cutting a fetched chunk where the leader's epochs begin (so
it records them at the right offsets), and choosing where to truncate after
OffsetsForLeaderEpoch (KIP-101 with KIP-279's refinement); and what its fetches say: its log
start (Fetch v3), or nothing to a leader of an older release. No sockets: real logs in
tmp_path, the leader's answers made up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from broker.cluster.links import LinkError
from broker.cluster.replicas import (
    ReplicaFetcher,
    ReplicaManager,
    _split_by_epoch,
    _truncation_point,
)
from broker.log import LogConfig, PartitionLog
from broker.settings import BrokerSettings
from protocol.apis import ApiKey
from protocol.compression import Codec
from protocol.errors import UnsupportedVersionError
from protocol.messageset import encode_message_set, read_entries


def messages(n: int, start: int = 0) -> bytes:
    return encode_message_set([(None, f"m{i}".encode(), 0) for i in range(start, start + n)])


def leader_log(tmp_path: Path, epochs: list[tuple[int, int]], total: int) -> PartitionLog:
    """A leader's log of ``total`` one-message entries, epochs starting where listed."""
    log = PartitionLog.open(tmp_path / "leader-0", LogConfig())
    starts = dict((start, epoch) for epoch, start in epochs)
    for offset in range(total):
        if offset in starts:
            log.assign_leader_epoch(starts[offset])
        log.append(messages(1, offset))
    return log


def test_a_chunk_is_cut_where_each_epoch_begins(tmp_path: Path) -> None:
    leader = leader_log(tmp_path, [(0, 0), (3, 4), (5, 7)], total=10)
    chunk = leader.read(2, 1 << 20).bytes()
    epochs = [{"epoch": 0, "start_offset": 0}, {"epoch": 3, "start_offset": 4},
              {"epoch": 5, "start_offset": 7}]
    pieces = _split_by_epoch(chunk, epochs)
    got = [(epoch, [e.offset for e in read_entries(bytes(piece))[0]]) for piece, epoch in pieces]
    assert got == [(0, [2, 3]), (3, [4, 5, 6]), (5, [7, 8, 9])]


def test_a_follower_copy_records_the_leaders_epochs(tmp_path: Path) -> None:
    leader = leader_log(tmp_path, [(0, 0), (2, 3)], total=6)
    follower = PartitionLog.open(tmp_path / "follower-0", LogConfig())
    epochs = [{"epoch": e.epoch, "start_offset": e.start_offset}
              for e in leader.leader_epochs.entries]
    for piece, epoch in _split_by_epoch(leader.read(0, 1 << 20).bytes(), epochs):
        follower.append_as_follower(piece, leader_epoch=epoch)
    assert follower.leader_epochs.entries == leader.leader_epochs.entries
    assert follower.log_end_offset == 6


def test_a_compressed_wrapper_is_not_split_and_a_partial_tail_is_left_to_the_log(
    tmp_path: Path,
) -> None:
    wrapped = encode_message_set([(None, b"a", 0), (None, b"b", 0)], codec=Codec.GZIP)
    log = PartitionLog.open(tmp_path / "w-0", LogConfig())
    log.assign_leader_epoch(1)
    log.append(wrapped)
    log.assign_leader_epoch(2)
    log.append(messages(1))
    data = log.read(0, 1 << 20).bytes()
    pieces = _split_by_epoch(data[:-3], [{"epoch": 1, "start_offset": 0},
                                         {"epoch": 2, "start_offset": 2}])
    # the cut entry's epoch is not known yet: it rides with the wrapper's piece, whose append
    # drops it; the next fetch starts at offset 2 and names epoch 2 then
    ((piece, epoch),) = pieces
    assert epoch == 1
    entries, whole = read_entries(bytes(piece))
    assert [e.offset for e in entries] == [1]  # the wrapper, whole
    assert whole < len(piece)


def test_truncation_goes_to_the_leaders_end_of_the_common_epoch(tmp_path: Path) -> None:
    follower = leader_log(tmp_path, [(0, 0), (1, 5)], total=8)
    assert _truncation_point(follower, 1, 6) == 6  # the leader's epoch 1 ended at 6
    assert _truncation_point(follower, 1, 20) == 8  # never past our own log end


def test_kip_279_an_epoch_the_leader_never_had_is_cut_at_our_end_of_the_common_one(
    tmp_path: Path,
) -> None:
    """We wrote epoch 4 from offset 5 as a leader the others never followed; the leader's
    largest epoch at or below 4 is 3, which it kept until offset 9. Our epoch 3 ended at 5, so
    everything from 5 diverges."""
    follower = leader_log(tmp_path, [(0, 0), (3, 2), (4, 5)], total=8)
    assert _truncation_point(follower, 3, 9) == 5


def test_with_no_common_epoch_only_the_high_watermark_is_known_to_be_shared(
    tmp_path: Path,
) -> None:
    follower = leader_log(tmp_path, [(2, 0)], total=8)
    follower.high_watermark = 3
    assert _truncation_point(follower, -1, -1) == 3


class _Leader:
    """Stands in for the fetcher's link: records each Fetch's version and partition, and
    answers as an older release (UNSUPPORTED_VERSION above ``newest``) or drops the connection
    when told to -- ``count`` times, then never again (a long poll that does not end)."""

    host = "127.0.0.1"
    port = 9

    def __init__(self, newest: int, count: int) -> None:
        self.newest = newest
        self.count = count
        self.drop_next = False
        self.asked: list[tuple[int, dict[str, Any]]] = []

    async def request(self, api: ApiKey, body: dict[str, Any], *, version: int = 0
                      ) -> dict[str, Any]:
        assert api is ApiKey.FETCH
        if len(self.asked) == self.count:
            await trio.sleep_forever()
        ((partition,),) = [t["partitions"] for t in body["topics"]]
        self.asked.append((version, partition))
        if self.drop_next:
            self.drop_next = False
            raise LinkError("closed by the peer")
        if version > self.newest:
            raise UnsupportedVersionError(f"Fetch v{version} is not supported")
        return {"topics": [{"name": "t", "partitions": [{
            "partition": 0, "error_code": 0, "high_watermark": 5, "log_start_offset": 2,
            "records": b"", "leader_epochs": []}]}]}

    async def aclose(self) -> None:
        pass


async def _fetches(tmp_path: Path, leader: _Leader) -> None:
    """Run a follower of ``t-0`` (log start 2, end 5) against ``leader`` until it has asked
    all it answers."""
    manager = ReplicaManager(1, zoo=None, settings=BrokerSettings(),
                             on_high_watermark=lambda topic, partition: None,
                             broker_address=lambda broker_id: None)
    plog = leader_log(tmp_path, [(0, 0)], total=5)
    assert plog.advance_log_start(2)
    manager.become(("t", 0), plog, {"leader": 0, "leader_epoch": 0, "isr": [0, 1],
                                    "replicas": [0, 1], "zk_version": 0,
                                    "controller_epoch": 1})
    replica = manager.replicas[("t", 0)]
    replica.needs_truncation = False
    fetcher = ReplicaFetcher(manager, 0, "127.0.0.1", 9)
    fetcher.link = leader  # type: ignore[assignment]
    fetcher.add(replica)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetcher.run)
            while len(leader.asked) < leader.count:
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()


async def test_a_follower_fetches_record_batches_and_reports_its_log_start(
        tmp_path: Path) -> None:
    leader = _Leader(newest=4, count=2)
    await _fetches(tmp_path, leader)
    assert [(v, p.get("log_start_offset")) for v, p in leader.asked] == [(4, 2), (4, 2)]


async def test_a_leader_of_the_release_before_is_fetched_from_with_v3(tmp_path: Path) -> None:
    """A leader without record batches (Fetch v3): the follower still reports its log
    start."""
    leader = _Leader(newest=3, count=3)
    await _fetches(tmp_path, leader)
    assert [(v, p.get("log_start_offset")) for v, p in leader.asked] == [
        (4, 2), (3, 2), (3, 2)]


async def test_a_leader_of_an_older_release_is_fetched_from_with_v1_until_the_link_drops(
        tmp_path: Path) -> None:
    """Replication goes on, without the follower's log start, while brokers are upgraded one
    at a time; a dropped connection (the leader restarting, maybe upgraded) tries v4 again."""
    leader = _Leader(newest=2, count=4)
    await _fetches(tmp_path, leader)
    assert [(v, p.get("log_start_offset")) for v, p in leader.asked] == [
        (4, 2), (3, 2), (1, None), (1, None)]
    leader = _Leader(newest=2, count=5)
    leader.drop_next = True
    await _fetches(tmp_path / "again", leader)
    assert [v for v, _ in leader.asked] == [4, 4, 3, 1, 1]
