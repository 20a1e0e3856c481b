"""A replica whose closed segments or indexes were damaged while its broker was down
(docs/storage.md "Crash recovery", broker/cluster/damaged.py).

- A follower: a flipped byte in a closed segment below the high watermark and a truncated
  index. On restart its log is cut at the bad entry, it fetches the rest from the leader again,
  rejoins the ISR, and holds the leader's bytes; consumers read every acknowledged message.
- A leader, when the whole cluster went down at once (nobody could take anyone out of the
  ISR): it comes back first with a damaged closed segment. It must not be elected with the
  hole -- it would lead the others into truncating acknowledged messages away -- so the
  partition waits for an in-sync replica that has them, and no acknowledged message is lost.

Every broker is on 127.0.0.1, started and stopped by PID.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import layout
from client.admin import Admin
from client.producer import Producer
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, read_partitions, replica_log, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SEGMENT_BYTES = 4096


def _values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:05d}-".encode().ljust(60, b"x") for i in range(n)]


def _send_all(bootstrap: str, topic: str, values: list[bytes]) -> dict[bytes, int]:
    """Produce with acks=all: value -> acknowledged offset."""
    with Producer(bootstrap, acks="all", retry_backoff_ms=100, request_timeout_ms=5_000,
                  delivery_timeout_ms=60_000) as producer:
        futures = {v: producer.send(topic, v, partition=0) for v in values}
        producer.flush(60)
        return {v: f.result(0).offset for v, f in futures.items()}


def _make_topic(cluster: Cluster, topic: str) -> None:
    with Admin(cluster.any_running().bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic(topic, 1, 3, configs={
            "segment.bytes": str(SEGMENT_BYTES), "min.insync.replicas": "2"})
    cluster.wait_for_leaders(topic, 1)
    until(lambda: _in_sync(cluster, topic), 20, f"a full ISR for {topic}")


def _in_sync(cluster: Cluster, topic: str) -> bool:
    state = cluster.state(topic, 0)
    return state["leader"] >= 0 and sorted(state["isr"]) == sorted(cluster.assignment(topic)[0])


def _partition_dir(process: BrokerProcess, topic: str) -> Path:
    return process.data_dir / layout.partition_dir_name(topic, 0)


def _closed_segments(process: BrokerProcess, topic: str) -> list[Path]:
    return sorted(_partition_dir(process, topic).glob("*.log"))[:-1]


def _log_bytes(process: BrokerProcess, topic: str) -> bytes:
    """The replica's entries, every segment's bytes one after the other."""
    return b"".join(p.read_bytes() for p in sorted(_partition_dir(process, topic).glob("*.log")))


def _damage(process: BrokerProcess, topic: str) -> int:
    """Flip a byte in the value of an entry in the middle of the second closed segment and
    cut the first closed segment's offset index mid-entry. Returns the damaged entry's
    offset."""
    first, second, *_ = _closed_segments(process, topic)
    data = bytearray(second.read_bytes())
    entries, pos = [], 0
    while pos < len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        entries.append((pos, offset, 12 + size))
        pos += 12 + size
    position, offset, size = entries[len(entries) // 2]
    data[position + size - 5] ^= 0x40
    second.write_bytes(bytes(data))
    index = first.with_suffix(".index")
    index.write_bytes(index.read_bytes()[:-13])
    return offset


def _since_start(process: BrokerProcess) -> str:
    return process.log_text().split("--- start:")[-1]


def _lost(bootstrap: str, topic: str, acked: dict[bytes, int]) -> dict[bytes, int]:
    """The acknowledged messages a consumer does not read at their offset, as written."""
    read = read_partitions(bootstrap, topic, [0])[0]
    assert len(read) == len({offset for offset, _ in read}), "an offset read twice"
    found = dict(read)
    return {v: o for v, o in acked.items() if found.get(o) != v}


@pytest.mark.timeout(150)
def test_a_damaged_follower_is_cut_refetches_from_its_leader_and_rejoins_the_isr(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    topic = "damaged-follower"
    _make_topic(cluster, topic)
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    acked = _send_all(bootstrap, topic, _values("a", 400))
    leader = cluster.brokers[cluster.state(topic, 0)["leader"]]
    follower = next(p for b, p in cluster.brokers.items() if p is not leader)
    assert len(_closed_segments(follower, topic)) >= 4

    port = follower.port
    follower.stop()
    until(lambda: follower.node_id not in cluster.state(topic, 0)["isr"],
          cluster.failover_bound, "the stopped follower out of the ISR")
    bad_offset = _damage(follower, topic)
    assert bad_offset < max(acked.values())  # below the high watermark
    acked |= _send_all(bootstrap, topic, _values("b", 100))  # while it is down

    follower.start(port=port, timeout=cluster.failover_bound + 10)
    text = _since_start(follower)
    assert "log.recovery.data_dropped" in text
    assert f"first_offset_dropped={bad_offset}" in text
    until(lambda: _in_sync(cluster, topic), 60, "the damaged follower back in the ISR")
    until(lambda: _log_bytes(follower, topic) == _log_bytes(leader, topic), 30,
          "the follower holds the leader's bytes")
    assert replica_log(follower, topic, 0) == replica_log(leader, topic, 0)
    lost = _lost(bootstrap, topic, acked)
    print(f"{len(acked)} acknowledged, {len(lost)} lost; follower cut at {bad_offset}")
    assert not lost


@pytest.mark.timeout(180)
def test_a_damaged_leader_back_first_after_the_whole_cluster_stopped_is_not_elected(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    topic = "damaged-leader"
    _make_topic(cluster, topic)
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    acked = _send_all(bootstrap, topic, _values("a", 400))
    leader_id = cluster.state(topic, 0)["leader"]
    leader = cluster.brokers[leader_id]
    assert len(_closed_segments(leader, topic)) >= 4
    ports = {b: p.port for b, p in cluster.brokers.items()}

    for process in cluster.brokers.values():  # all at once: no controller shrinks the ISR
        process.kill()
    until(lambda: cluster.registered() == [], cluster.failover_bound,
          "every killed broker's registration gone")
    state = cluster.state(topic, 0)
    assert state["leader"] == leader_id and sorted(state["isr"]) == [0, 1, 2], state
    bad_offset = _damage(leader, topic)

    # the damaged leader comes back alone: it becomes the controller, and must not lead
    leader.start(port=ports[leader_id], timeout=cluster.failover_bound + 10)
    until(lambda: cluster.controller_id() == leader_id
          and cluster.state(topic, 0)["controller_epoch"] == cluster.controller_epoch(),
          cluster.failover_bound, "the partition's state written by the new controller")
    state = cluster.state(topic, 0)
    assert state["leader"] != leader_id and leader_id not in state["isr"], state
    text = _since_start(leader)
    assert "replica.damaged_left_isr" in text
    assert f"first_offset_dropped={bad_offset}" in text

    others = [b for b in cluster.brokers if b != leader_id]
    for broker_id in others:
        cluster.brokers[broker_id].start(port=ports[broker_id],
                                         timeout=cluster.failover_bound + 10)
    until(lambda: _in_sync(cluster, topic), 60, "every replica back in the ISR")
    new_leader = cluster.brokers[cluster.state(topic, 0)["leader"]]
    assert new_leader is not leader
    for process in cluster.brokers.values():
        until(lambda p=process: _log_bytes(p, topic) == _log_bytes(new_leader, topic), 30,
              f"broker {process.node_id} holds the leader's bytes")
    lost = _lost(bootstrap, topic, acked)
    print(f"{len(acked)} acknowledged, {len(lost)} lost; the old leader was cut at "
          f"{bad_offset}")
    assert not lost


@pytest.mark.timeout(150)
def test_a_damaged_leader_killed_alone_comes_back_as_a_follower_and_leads_once_caught_up(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    topic = "damaged-preferred"
    with Admin(cluster.any_running().bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic(topic, 1, 3, configs={
            "segment.bytes": str(SEGMENT_BYTES), "min.insync.replicas": "2"},
            replica_assignment={0: [0, 1, 2]})
    cluster.wait_for_leaders(topic, 1)
    until(lambda: _in_sync(cluster, topic), 20, f"a full ISR for {topic}")
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    acked = _send_all(bootstrap, topic, _values("a", 400))
    preferred = cluster.brokers[0]
    assert cluster.state(topic, 0)["leader"] == 0

    port = preferred.port
    preferred.kill()
    until(lambda: cluster.state(topic, 0)["leader"] not in (0, -1)
          and 0 not in cluster.state(topic, 0)["isr"], cluster.failover_bound,
          "another leader, and the killed one out of the ISR")
    bad_offset = _damage(preferred, topic)
    acked |= _send_all(bootstrap, topic, _values("b", 100))

    preferred.start(port=port, timeout=cluster.failover_bound + 10)
    assert f"first_offset_dropped={bad_offset}" in _since_start(preferred)
    until(lambda: _in_sync(cluster, topic), 60, "the damaged replica back in the ISR")
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        until(lambda: cluster.state(topic, 0)["leader"] == 0
              or admin.elect_leaders([(topic, 0)]) == [(topic, 0)], 30,
              "the preferred replica leads again")
    acked |= _send_all(bootstrap, topic, _values("c", 100))
    for process in cluster.brokers.values():
        until(lambda p=process: _log_bytes(p, topic) == _log_bytes(preferred, topic), 30,
              f"broker {process.node_id} holds the leader's bytes")
    lost = _lost(bootstrap, topic, acked)
    print(f"{len(acked)} acknowledged, {len(lost)} lost; the old leader was cut at "
          f"{bad_offset} and leads again")
    assert not lost
