"""Replication with real brokers and real faults (DESIGN "Cluster": replication; seed 003
"Replication" and "Requests"; docs/replication.md).

- A follower paused (SIGSTOP) longer than replica_lag_time_max_ms leaves the ISR while its
  ZooKeeper session lives on, acks=all goes on with min_insync_replicas of the rest, and the
  follower rejoins once it has caught up.
- An ISR smaller than min_insync_replicas refuses acks=all before anything is written.
- A paused leader is replaced; what it took afterwards is never acknowledged, it truncates to
  the new leader's log, and no consumer ever saw what was cut.
- KIP-101's two scenarios: a follower restarting with a stale high watermark must not drop
  acknowledged messages (it may lead next), and two replicas restarting one after the other must
  not keep different messages at the same offset.
- Consumers read below the high watermark only (seed 003: "Consumers can only fetch data which
  has been replicated completly").

Every broker is on 127.0.0.1, stopped by PID; what is paused is resumed in a ``finally``.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.log import LogConfig, PartitionLog, layout
from client.admin import Admin
from client.consumer import Consumer
from client.network import NetworkClient
from client.producer import Producer
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, NotEnoughReplicasError
from protocol.messageset import decode_messages, encode_message_set
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import (
    Cluster,
    metadata_from,
    paused,
    read_partitions,
    replica_log,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: the lag bound the ISR tests use (DESIGN: replica_lag_time_max_ms)
LAG_MS = 3000
#: a session that outlives every pause of these tests: the ISR moves by lag, not by death
LONG_SESSION_MS = 20_000
#: a session timeout short enough for failovers within seconds
SHORT_SESSION_MS = 3000


# ------------------------------------------------------------------------------- helpers

def _request(process: BrokerProcess, api: ApiKey, body: dict[str, Any],
             timeout: float = 15.0) -> dict[str, Any]:
    """One request answered by exactly this broker."""
    network = NetworkClient(process.bootstrap, client_id="replication-test",
                            request_timeout_ms=int(timeout * 1000))
    try:
        return network.send(-1, api, body).result(timeout)
    finally:
        network.close()


def _produce_body(topic: str, partition: int, values: list[bytes], *, acks: int,
                  timeout_ms: int = 10_000) -> dict[str, Any]:
    now = int(time.time() * 1000)
    records = encode_message_set([(None, v, now) for v in values])
    return {"acks": acks, "timeout_ms": timeout_ms, "topics": [
        {"name": topic, "partitions": [{"partition": partition, "records": records}]}]}


def _produce(process: BrokerProcess, topic: str, partition: int, values: list[bytes], *,
             acks: int, timeout_ms: int = 10_000) -> dict[str, Any]:
    """A raw Produce to one broker: the partition's result (error_code, base_offset)."""
    body = _request(process, ApiKey.PRODUCE, _produce_body(topic, partition, values, acks=acks,
                                                           timeout_ms=timeout_ms),
                    timeout=timeout_ms / 1000 + 10)
    result: dict[str, Any] = body["topics"][0]["partitions"][0]
    return result


def _latest(process: BrokerProcess, topic: str, partition: int) -> int:
    """ListOffsets latest, as the leader answers it (the high watermark)."""
    body = _request(process, ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition": partition, "timestamp": -1}]}]})
    result = body["topics"][0]["partitions"][0]
    assert result["error_code"] == ErrorCode.NONE, result
    offset: int = result["offset"]
    return offset


def _fetch(process: BrokerProcess, topic: str, partition: int, offset: int
           ) -> tuple[int, list[tuple[int, bytes | None]]]:
    """A consumer's Fetch (replica_id -1, no waiting): (high watermark, messages)."""
    body = _request(process, ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"name": topic, "partitions": [
            {"partition": partition, "fetch_offset": offset, "max_bytes": 1 << 20}]}]})
    result = body["topics"][0]["partitions"][0]
    assert result["error_code"] == ErrorCode.NONE, result
    messages, _ = decode_messages(result["records"])
    return result["high_watermark"], [(m.offset, m.value) for m in messages]


def _send_all(bootstrap: str, topic: str, partition: int, values: list[bytes], *,
              acks: int | str = "all", timeout: float = 60.0) -> dict[bytes, int]:
    """Produce with the client (acks=all, retries): value -> acknowledged offset."""
    with Producer(bootstrap, acks=acks, retry_backoff_ms=100, request_timeout_ms=5_000,
                  delivery_timeout_ms=int(timeout * 1000)) as producer:
        futures = {v: producer.send(topic, v, partition=partition) for v in values}
        producer.flush(timeout)
        return {v: f.result(0).offset for v, f in futures.items()}


def _values(prefix: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(start, start + n)]


def _isr(cluster: Cluster, topic: str, partition: int = 0) -> list[int]:
    return list(cluster.state(topic, partition)["isr"])


def _in_sync(cluster: Cluster, topic: str, partition: int = 0) -> bool:
    state = cluster.state(topic, partition)
    return state["leader"] >= 0 and sorted(state["isr"]) == sorted(
        cluster.assignment(topic)[partition])


def _metadata_isr(process: BrokerProcess, topic: str, partition: int = 0) -> list[int]:
    return list(metadata_from(process.bootstrap, [topic]).topics[topic]
                .partitions[partition].isr)


def _log_since_start(process: BrokerProcess) -> str:
    """The broker's log since its latest start."""
    return process.log_text().split("--- start:")[-1]


def _truncations(text: str) -> list[int]:
    """The offsets a follower truncated to (``replica.truncated ... to=N``)."""
    return [int(m) for m in re.findall(r"event='replica\.truncated'.*? to=(\d+)", text)]


def _hw_checkpoint(process: BrokerProcess, topic: str, partition: int) -> int | None:
    """The high watermark in the broker's replication-offset-checkpoint (None: none kept)."""
    path = process.data_dir / layout.REPLICATION_OFFSET_CHECKPOINT
    rows = layout.read_checkpoint(path, 3) or []
    found = [int(hw) for t, p, hw in rows if (t, int(p)) == (topic, partition)]
    return found[0] if found else None


def _identical(a: BrokerProcess, b: BrokerProcess, topic: str, partition: int = 0) -> bool:
    return replica_log(a, topic, partition) == replica_log(b, topic, partition)


class Watcher(threading.Thread):
    """A consumer that reads one partition from the beginning for the whole test, keeping every
    (offset, value) it was given -- what consumers saw while the faults happened."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        super().__init__(name=f"watcher-{topic}-{partition}", daemon=True)
        self.bootstrap = bootstrap
        self.tp = TopicPartition(topic, partition)
        self.seen: list[tuple[int, bytes | None]] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def values(self) -> set[bytes | None]:
        with self._lock:
            return {v for _, v in self.seen}

    def run(self) -> None:
        try:
            with Consumer(self.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=100,
                          request_timeout_ms=5_000, fetch_max_wait_ms=200) as consumer:
                consumer.assign([self.tp])
                while not self._halt.is_set():
                    records = consumer.poll(100)
                    with self._lock:
                        self.seen += [(r.offset, r.value) for r in records]
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> list[tuple[int, bytes | None]]:
        self._halt.set()
        self.join(30)
        assert not self.is_alive(), "the watching consumer did not stop"
        if self.error is not None:
            raise self.error
        return self.seen


# ------------------------------------------------------------------------- the ISR by lag

@pytest.mark.timeout(120)
def test_a_paused_follower_leaves_the_isr_by_lag_and_rejoins_once_caught_up(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, settings={
        "replica_lag_time_max_ms": LAG_MS, "min_insync_replicas": 2,
        "zookeeper_session_timeout_ms": LONG_SESSION_MS})
    topic = "lagging"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    until(lambda: _in_sync(cluster, topic), 20, "a full ISR")
    leader_id = cluster.state(topic, 0)["leader"]
    leader = cluster.brokers[leader_id]
    controller = cluster.controller_id()
    # a follower that is not the controller: the ISR change must reach Metadata meanwhile
    follower_id = next(b for b in sorted(cluster.brokers) if b not in (leader_id, controller))
    follower = cluster.brokers[follower_id]
    bootstrap = leader.bootstrap
    acked = _send_all(bootstrap, topic, 0, _values("before", 20))

    with paused(follower):
        paused_at = time.monotonic()
        # acks=all waits while the paused follower is still in the ISR, then goes on without it
        acked |= _send_all(bootstrap, topic, 0, _values("during", 20), timeout=30)
        answered_after = time.monotonic() - paused_at
        isr = _isr(cluster, topic)
        assert follower_id not in isr and len(isr) == 2, isr
        # it left by lag, not by death: its session and registration are still there
        assert follower_id in cluster.registered()
        leader.wait_for_log(rf"event='replica\.isr_changed'.*reason='\[{follower_id}\] fell "
                            "behind", timeout=5)
        until(lambda: follower_id not in _metadata_isr(leader, topic), 10,
              "the leader's Metadata without the paused follower")
        print(f"paused follower {follower_id}: acks=all answered {answered_after:.2f} s after "
              f"the pause (replica_lag_time_max_ms {LAG_MS} ms), ISR now {isr}")
        acked |= _send_all(bootstrap, topic, 0, _values("shrunk", 20), timeout=30)

    until(lambda: follower_id in _isr(cluster, topic), 30,
          f"follower {follower_id} back in the ISR after SIGCONT")
    until(lambda: follower_id in _metadata_isr(leader, topic), 10,
          "the leader's Metadata with the follower again")
    acked |= _send_all(bootstrap, topic, 0, _values("after", 20))
    until(lambda: all(_identical(leader, p, topic) for p in cluster.brokers.values()), 20,
          "every replica holds the same log")
    final = dict(read_partitions(bootstrap, topic, [0])[0])
    missing = {v: o for v, o in acked.items() if final.get(o) != v}
    assert not missing, f"acknowledged messages not at their offsets: {missing}"


# ------------------------------------------------------------------ min_insync_replicas

@pytest.mark.timeout(90)
def test_acks_all_is_refused_before_writing_while_the_isr_is_below_min_insync(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(2, settings={"zookeeper_session_timeout_ms": SHORT_SESSION_MS,
                                        "replica_lag_time_max_ms": LAG_MS})
    topic = "guarded"  # the broker default is 1; the topic config asks for 2
    with Admin(cluster.brokers[0].bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic(topic, 1, 2, configs={"min.insync.replicas": "2"})
    cluster.wait_for_leaders(topic, 1)
    until(lambda: _in_sync(cluster, topic), 20, "a full ISR")
    leader_id = cluster.state(topic, 0)["leader"]
    leader = cluster.brokers[leader_id]
    follower = cluster.brokers[1 - leader_id]
    first = _produce(leader, topic, 0, _values("met", 5), acks=-1)
    assert first["error_code"] == ErrorCode.NONE, first

    port = follower.port
    follower.kill()
    until(lambda: _isr(cluster, topic) == [leader_id]
          and _metadata_isr(leader, topic) == [leader_id], cluster.failover_bound,
          "the ISR down to the leader alone")
    end = _latest(leader, topic, 0)  # with an ISR of one, the high watermark is the log end
    assert end == 5 and len(replica_log(leader, topic, 0)) == 5

    refused = _produce(leader, topic, 0, _values("refused", 3), acks=-1)
    assert refused["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS, refused
    assert refused["base_offset"] == -1
    # the typed error, through the client (no retries: it would retry this retriable error)
    with Producer(leader.bootstrap, acks="all", retries=0) as producer:
        future = producer.send(topic, b"refused-client", partition=0)
        producer.flush(30)
        with pytest.raises(NotEnoughReplicasError):
            future.result(0)
    # nothing was written: the log end did not move, on the wire and on disk
    assert _latest(leader, topic, 0) == end
    assert [v for _, v in replica_log(leader, topic, 0)] == _values("met", 5)
    # acks=1 does not ask for in-sync replicas
    one = _produce(leader, topic, 0, _values("one", 2), acks=1)
    assert (one["error_code"], one["base_offset"]) == (ErrorCode.NONE, 5), one

    follower.start(port=port, timeout=cluster.failover_bound + 10)
    until(lambda: _in_sync(cluster, topic) and len(_metadata_isr(leader, topic)) == 2,
          30, "the restarted follower back in the ISR")
    again = _produce(leader, topic, 0, _values("again", 3), acks=-1)
    assert (again["error_code"], again["base_offset"]) == (ErrorCode.NONE, 7), again
    final = [v for _, v in read_partitions(leader.bootstrap, topic, [0])[0]]
    assert final == _values("met", 5) + _values("one", 2) + _values("again", 3)
    until(lambda: _identical(leader, follower, topic), 10, "both replicas the same")


# ------------------------------------------------------------------ a paused (zombie) leader

#: what an acks=all produce to a replaced leader may be answered
ZOMBIE_REFUSALS = {ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                   ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT}

@pytest.mark.timeout(120)
def test_a_paused_leader_is_replaced_acknowledges_nothing_more_and_truncates_on_return(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, settings={"zookeeper_session_timeout_ms": SHORT_SESSION_MS,
                                        "replica_lag_time_max_ms": LAG_MS,
                                        "min_insync_replicas": 2})
    topic = "zombie"
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    for p in range(3):
        until(lambda p=p: _in_sync(cluster, topic, p), 20, f"a full ISR of {topic}-{p}")
    controller = cluster.controller_id()
    leaders = cluster.leaders(topic)
    # a partition led by another broker than the controller: only the leader is paused
    partition = next((p for p, b in sorted(leaders.items()) if b != controller), 0)
    old_id = leaders[partition]
    old = cluster.brokers[old_id]
    before_state = cluster.state(topic, partition)
    others = ",".join(p.bootstrap for b, p in sorted(cluster.brokers.items()) if b != old_id)
    watcher = Watcher(others, topic, partition)
    watcher.start()
    try:
        acked = _send_all(others, topic, partition, _values("before", 30))
        until(lambda: set(acked) <= watcher.values(), 20, "the consumer read what came first")
        # a connection to the leader, opened before it is paused
        network = NetworkClient(old.bootstrap, client_id="zombie-writer",
                                request_timeout_ms=90_000)
        network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
        zombies = _values("zombie", 5)
        with paused(old):
            paused_at = time.monotonic()
            # written while it is paused: it reads them when it wakes, still believing it leads
            answer = network.send(-1, ApiKey.PRODUCE, _produce_body(
                topic, partition, zombies, acks=-1, timeout_ms=30_000), timeout=90)

            def replaced() -> tuple[int] | None:  # a tuple: broker 0 is a leader too
                s = cluster.state(topic, partition)
                return (s["leader"],) if s["leader"] not in (old_id, -1) and s[
                    "leader_epoch"] > before_state["leader_epoch"] else None

            (new_id,) = until(replaced, cluster.failover_bound,
                              "a new leader while it is paused")
            print(f"leader {old_id} of {topic}-{partition} paused; broker {new_id} leads after "
                  f"{time.monotonic() - paused_at:.2f} s")
            assert old_id not in _isr(cluster, topic, partition)
            # acks=all goes on at the new leader: two in-sync replicas of three
            acked |= _send_all(others, topic, partition, _values("after", 30))
        new = cluster.brokers[new_id]
        # the zombie produce is answered with a refusal, never acknowledged: it no longer
        # leads, or its ISR is too small for acks=all (before or after the append), or the
        # batch was not replicated within the request's timeout_ms
        try:
            body = answer.result(60)
        finally:
            network.close()
        result = body["topics"][0]["partitions"][0]
        outcome = ErrorCode(result["error_code"]).name
        assert result["error_code"] in ZOMBIE_REFUSALS, result
        until(lambda: not old.running or old_id in _isr(cluster, topic, partition),
              cluster.failover_bound + 20, f"broker {old_id} back in the ISR as a follower")
        assert old.running, f"the resumed leader exited:\n{_log_since_start(old)[-3000:]}"
        # it cut what it had taken (replica.truncated) or refused it outright: either way its
        # log is now the new leader's
        until(lambda: _identical(old, new, topic, partition), 20,
              f"broker {old_id}'s log the same as new leader {new_id}'s")
        truncated = _truncations(old.log_text())
        print(f"zombie produce answered {outcome}; the old leader truncated to {truncated}")
        acked |= _send_all(others, topic, partition, _values("last", 5))
        until(lambda: set(acked) <= watcher.values(), 30, "the consumer read everything")
    finally:
        seen = watcher.stop()
    final = read_partitions(others, topic, [partition])[partition]
    final_values = {v for _, v in final}
    at = dict(final)
    assert not set(zombies) & final_values, "a never-acknowledged zombie write survived"
    lost = {v: o for v, o in acked.items() if at.get(o) != v}
    assert not lost, f"acknowledged messages not at their offsets: {lost}"
    # what a consumer was given was never cut away later (it read below the high watermark)
    assert {v for _, v in seen} <= final_values
    assert all(at.get(o) == v for o, v in seen), "a consumer saw an offset change its message"
    until(lambda: all(replica_log(process, topic, partition) == final
                      for process in cluster.brokers.values()), 20,
          "every replica holds what the consumer read, and nothing else")


# -------------------------------------------------------------------- KIP-101 scenarios

@pytest.mark.timeout(120)
def test_kip101_scenario_1_a_restarted_follower_keeps_acknowledged_messages_and_leads(
    make_cluster: Callable[..., Cluster],
) -> None:
    """KIP-101 scenario 1, "High Watermark Truncation followed by Immediate Leader Election":
    a follower restarts with a stale high watermark, truncates to it -- dropping messages that
    were acknowledged -- and then becomes leader: they are lost. Here the follower must not
    truncate below what the leader's epoch gave it, and leads with every message."""
    cluster = make_cluster(2, settings={
        "zookeeper_session_timeout_ms": SHORT_SESSION_MS, "replica_lag_time_max_ms": LAG_MS,
        "min_insync_replicas": 1,
        # the high watermark checkpoint is written by the maintenance pass: none runs in the
        # test, so the follower's stays stale, as after a crash
        "maintenance_interval_ms": 600_000})
    topic = "kip101-hw"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    until(lambda: _in_sync(cluster, topic), 20, "a full ISR")
    a_id = cluster.state(topic, 0)["leader"]
    a, b = cluster.brokers[a_id], cluster.brokers[1 - a_id]
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    acked = _send_all(bootstrap, topic, 0, _values("m", 20))
    assert {v for _, v in replica_log(b, topic, 0)} >= set(acked)  # acks=all: B has them
    stale = _hw_checkpoint(b, topic, 0)
    assert stale is None or stale < 20, stale  # a truncation to it would drop acked messages

    # the follower restarts (kill -9); the leader goes on alone (min_insync_replicas 1)
    b_port = b.port
    b.kill()
    until(lambda: _isr(cluster, topic) == [a_id], cluster.failover_bound, "B out of the ISR")
    acked |= _send_all(a.bootstrap, topic, 0, _values("w", 10))
    b.start(port=b_port, timeout=cluster.failover_bound + 10)
    until(lambda: _in_sync(cluster, topic), 30, "B back in the ISR")
    truncated = _truncations(_log_since_start(b))
    print(f"B's stale high watermark {stale}; B truncated to {truncated} on restart")
    assert all(t >= 20 for t in truncated), (
        f"B truncated acknowledged messages on restart (to {truncated}, stale HW {stale})")

    # ... and the leader dies at once: B leads, with every acknowledged message
    a_port = a.port
    a.kill()
    until(lambda: cluster.state(topic, 0)["leader"] == b.node_id, cluster.failover_bound,
          "B leads after A's kill -9")
    acked |= _send_all(b.bootstrap, topic, 0, _values("n", 10))
    final = dict(read_partitions(b.bootstrap, topic, [0])[0])
    lost = {v: o for v, o in acked.items() if final.get(o) != v}
    assert not lost, f"acknowledged messages lost after B took over: {lost}"
    a.start(port=a_port, timeout=cluster.failover_bound + 10)
    until(lambda: _in_sync(cluster, topic), 30, "A back in the ISR")
    until(lambda: _identical(a, b, topic), 20, "A and B hold the same log")


@pytest.mark.timeout(120)
def test_kip101_scenario_2_replicas_restarted_one_after_the_other_do_not_diverge(
    make_cluster: Callable[..., Cluster],
) -> None:
    """KIP-101 scenario 2, "Replica Divergence on Restart after Multiple Hard Failures": both
    replicas crash; the follower lost its unflushed tail, comes back first and leads, and takes
    new messages at the offsets the old leader still holds others at. The old leader, whose high
    watermark covers its own tail, must not keep it: truncated by leader epoch, both replicas
    end with the same messages at the same offsets and no acknowledged message is lost."""
    cluster = make_cluster(2, settings={
        "zookeeper_session_timeout_ms": SHORT_SESSION_MS, "replica_lag_time_max_ms": LAG_MS,
        "min_insync_replicas": 1, "maintenance_interval_ms": 200})
    topic = "kip101-fork"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    until(lambda: _in_sync(cluster, topic), 20, "a full ISR")
    a_id = cluster.state(topic, 0)["leader"]
    a, b = cluster.brokers[a_id], cluster.brokers[1 - a_id]
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    acked = _send_all(bootstrap, topic, 0, _values("m", 5))  # acks=all
    # acks=1: these five are not promised to survive two replicas failing
    _send_all(bootstrap, topic, 0, _values("m", 5, start=5), acks=1)
    until(lambda: len(replica_log(b, topic, 0)) == 10, 10, "B replicated all ten")
    until(lambda: _hw_checkpoint(a, topic, 0) == 10, 10, "A's high watermark 10 checkpointed")

    # a power failure: both die at once, and B loses what it had not flushed (offsets 5-9)
    ports = {a: a.port, b: b.port}
    for process in (a, b):  # signals first, reaping after: neither outlives the other
        os.kill(process.pid, signal.SIGKILL)
    for process in (a, b):
        process.kill()
    _lose_tail(b.data_dir, topic, 0, keep=5)
    assert [o for o, _ in replica_log(b, topic, 0)] == list(range(5))

    # B comes back first: it was in the ISR, so it leads, and takes n5..n9 at offsets 5..9
    b.start(port=ports[b], timeout=cluster.failover_bound + 10)
    until(lambda: cluster.state(topic, 0)["leader"] == b.node_id, cluster.failover_bound,
          "B leads after the restart")
    new = _send_all(b.bootstrap, topic, 0, _values("n", 5, start=5))
    assert sorted(new.values()) == list(range(5, 10)), new  # the same offsets A holds m5..m9 at
    acked |= new

    # A comes back: its high watermark (10) covers its own m5..m9; the epoch says cut at 5
    a.start(port=ports[a], timeout=cluster.failover_bound + 10)
    until(lambda: _in_sync(cluster, topic), 30, "A back in the ISR")
    until(lambda: _identical(a, b, topic), 20, "A and B hold the same log")
    truncated = _truncations(_log_since_start(a))
    print(f"A truncated to {truncated} on rejoining (its checkpointed HW was 10)")
    assert truncated == [5], truncated

    # A must serve the same log as leader: move the leadership there (kill -9 of B)
    b.kill()
    until(lambda: cluster.state(topic, 0)["leader"] == a.node_id, cluster.failover_bound,
          "A leads after B's kill -9")
    final = read_partitions(a.bootstrap, topic, [0])[0]
    assert [v for _, v in final] == _values("m", 5) + _values("n", 5, start=5)
    at = dict(final)
    lost = {v: o for v, o in acked.items() if at.get(o) != v}
    assert not lost, f"acknowledged messages lost: {lost}"


def _lose_tail(data_dir: Path, topic: str, partition: int, *, keep: int) -> None:
    """What a power failure leaves of a partition whose messages from ``keep`` on were not
    flushed: the log cut there (with its indexes, epochs and recovery point), by the log's own
    truncation, while the broker is down."""
    directory = data_dir / layout.partition_dir_name(topic, partition)
    plog = PartitionLog.open(directory, LogConfig())
    try:
        plog.truncate_to(keep)
    finally:
        plog.close()


# ------------------------------------------------------------------ the high watermark

@pytest.mark.timeout(90)
def test_consumers_never_read_past_the_high_watermark(
    make_cluster: Callable[..., Cluster],
) -> None:
    lag_ms = 5000  # the "invisible" half is checked while the paused follower is in the ISR
    cluster = make_cluster(2, settings={
        "replica_lag_time_max_ms": lag_ms, "min_insync_replicas": 1,
        "zookeeper_session_timeout_ms": LONG_SESSION_MS})
    topic = "visible"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    until(lambda: _in_sync(cluster, topic), 20, "a full ISR")
    leader_id = cluster.state(topic, 0)["leader"]
    leader, follower = cluster.brokers[leader_id], cluster.brokers[1 - leader_id]
    base = _values("base", 10)
    _send_all(leader.bootstrap, topic, 0, base)
    tp = TopicPartition(topic, 0)
    hidden = _values("hidden", 5)

    with Consumer(leader.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=100,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([tp])
        got: list[bytes | None] = []
        until(lambda: got.extend(r.value for r in consumer.poll(100)) or len(got) >= 10, 20,
              "the consumer read the replicated messages")
        assert got == base
        with paused(follower):
            written = _produce(leader, topic, 0, hidden, acks=1)
            assert (written["error_code"], written["base_offset"]) == (ErrorCode.NONE, 10)
            assert [v for _, v in replica_log(leader, topic, 0)] == base + hidden  # appended
            # ... but not replicated: the high watermark stays, and consumers see nothing more
            assert _latest(leader, topic, 0) == 10
            hw, past = _fetch(leader, topic, 0, 10)
            assert (hw, past) == (10, [])
            _, everything = _fetch(leader, topic, 0, 0)
            assert [v for _, v in everything] == base
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                assert consumer.poll(100) == [], "a consumer read past the high watermark"
            assert consumer.highwater(tp) == 10
            # all of that while the paused follower was still in the ISR
            assert follower.node_id in _isr(cluster, topic)

            # once the follower leaves the ISR (lag), the high watermark moves to the log end
            until(lambda: _isr(cluster, topic) == [leader_id], lag_ms / 1000 + 15,
                  "the paused follower out of the ISR")
            until(lambda: _latest(leader, topic, 0) == 15, 10, "the high watermark at 15")
            hw, past = _fetch(leader, topic, 0, 10)
            assert (hw, [v for _, v in past]) == (15, hidden)
            until(lambda: got.extend(r.value for r in consumer.poll(100)) or len(got) >= 15,
                  20, "the consumer read the messages once the ISR shrank")
            assert got == base + hidden

    until(lambda: _in_sync(cluster, topic), 30, "the follower back in the ISR")
    until(lambda: _identical(leader, follower, topic), 20, "both replicas the same")


@pytest.mark.timeout(90)
def test_list_offsets_asks_the_new_leader_after_a_leader_is_killed(
    make_cluster: Callable[..., Cluster],
) -> None:
    """A client that knows the old leader must learn the new one for ListOffsets (seed 003: "the
    client will keep the metadata information upto date ... when a client sends fetch/poduce
    request but gets a exception"), not ask the dead broker until its timeout."""
    cluster = make_cluster(2, settings={"zookeeper_session_timeout_ms": SHORT_SESSION_MS,
                                        "replica_lag_time_max_ms": LAG_MS})
    topic = "moving"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    until(lambda: _in_sync(cluster, topic), 20, "a full ISR")
    old_id = cluster.state(topic, 0)["leader"]
    old, other = cluster.brokers[old_id], cluster.brokers[1 - old_id]
    _send_all(other.bootstrap, topic, 0, _values("m", 5))
    tp = TopicPartition(topic, 0)
    with Consumer(other.bootstrap, retry_backoff_ms=100, request_timeout_ms=2_000,
                  default_api_timeout_ms=20_000) as consumer:
        assert consumer.end_offsets([tp]) == {tp: 5}  # it knows the leader now
        old.kill()
        until(lambda: cluster.state(topic, 0)["leader"] == other.node_id,
              cluster.failover_bound, "the other broker leads")
        until(lambda: metadata_from(other.bootstrap, [topic]).topics[topic].partitions[0]
              .leader == other.node_id, 10, "its Metadata says so")
        started = time.monotonic()
        assert consumer.end_offsets([tp]) == {tp: 5}
        print(f"end_offsets answered by the new leader after {time.monotonic() - started:.2f} s")

