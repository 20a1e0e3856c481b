"""SIGTERM in a cluster: the broker asks the controller to move its leaderships away before it
stops (Kafka's ControlledShutdown), and exits at once -- not after a session timeout. A rolling
restart under a producer: every send is eventually acknowledged.

Nothing here depends on replication: without it a restarted broker does not rejoin the ISRs
(so the last broker of a rolling restart takes its partitions offline while it is away) and
messages acknowledged by a leader that stopped are not on the next one -- only that every send
is eventually acknowledged is asserted."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from client.batch import RecordFuture
from client.producer import Producer
from client.records import RecordMetadata
from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: a session far longer than a controlled shutdown, so that anything waiting on one is plain:
#: the broker is stopped with SIGKILL if it has not exited STOP_TIMEOUT (20 s) after SIGTERM
LONG_SESSION_MS = 30_000


@pytest.mark.timeout(90)
def test_sigterm_moves_leadership_away_before_the_broker_exits(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, settings={"zookeeper_session_timeout_ms": LONG_SESSION_MS})
    cluster.create_topic("cs", partitions=6, replication_factor=3)
    controller = cluster.controller_id()
    assert controller is not None
    before = cluster.states("cs")
    # a broker that leads some partitions and is not the controller
    leaving = next(b for b in range(3) if b != controller
                   and any(s["leader"] == b for s in before.values()))
    led = sorted(p for p, s in before.items() if s["leader"] == leaving)
    process = cluster.brokers[leaving]

    stopping_at = time.monotonic()
    status = process.stop()
    took = time.monotonic() - stopping_at
    print(f"controlled shutdown of broker {leaving} (leading {led}): exit {status} after "
          f"{took:.2f} s (session timeout {cluster.session_timeout:g} s)")
    # it exited by itself (not SIGKILL after 20 s), so before its session could have expired
    assert status == 0, "the broker waited for something: see its log"
    assert took < cluster.session_timeout

    # its own log: the controller answered (all moved) before it stopped serving
    run = process.log_text().split("--- start:")[-1]
    order = re.findall(r"event='([\w.]+)'", run)
    done = order.index("cluster.controlled_shutdown_done")
    assert order.index("broker.stopping") < done < order.index("broker.draining")
    assert "controlled_shutdown_incomplete" not in run
    # the controller moved them before it answered, so before the broker stopped (one clock)
    moved_at = _timestamp(cluster.brokers[controller].log_text(),
                          rf"controller\.controlled_shutdown' broker_id={leaving} moved=\d+ "
                          r"remaining=0")
    assert moved_at < _timestamp(run, r"event='broker\.stopped'")

    # the controller moved each partition once (one leader epoch), within its own epoch
    after = cluster.states("cs")
    epoch = cluster.controller_epoch()
    for partition in led:
        state = after[partition]
        assert state["leader"] not in (leaving, -1)
        assert state["leader_epoch"] >= before[partition]["leader_epoch"] + 1
        assert state["controller_epoch"] == epoch
        assert leaving not in state["isr"]
    assert cluster.controller_id() == controller
    # what another broker answers (well within a session timeout)
    def answered() -> bool:
        view = cluster.metadata(controller, ["cs"])
        return leaving not in view.brokers and {
            p: i.leader for p, i in view.topics["cs"].partitions.items()} == {
            p: s["leader"] for p, s in after.items()}

    until(answered, cluster.session_timeout / 2,
          f"broker {controller}'s Metadata shows the new leaders")


def _timestamp(log: str, pattern: str) -> str:
    """The ISO timestamp of the first log line matching ``pattern`` (they sort as strings)."""
    line = next(line for line in log.splitlines() if re.search(pattern, line))
    match = re.search(r"timestamp='([^']+)'", line)
    assert match is not None, line
    return match[1]


class _ProducerLoop(threading.Thread):
    """Sends to every partition of ``topic`` without pause until ``stop`` (each partition
    in turn, a few hundred a second), counting acknowledgements and the gaps between them.
    The producer is used by this thread only."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.stopping = threading.Event()
        self.acked = 0
        self.sent = 0
        self.errors: list[BaseException | None] = []
        self.longest_gap = 0.0
        #: per partition: the longest time between two of its acknowledgements
        self.partition_gaps: dict[int, float] = {}
        self._partition_acks: dict[int, float] = {}
        self.started = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.failure = exc

    def _run(self) -> None:
        producer = Producer(self.bootstrap, acks=1, retry_backoff_ms=100,
                            request_timeout_ms=5_000, delivery_timeout_ms=120_000,
                            max_block_ms=60_000)
        pending: list[RecordFuture] = []
        last_ack = time.monotonic()
        try:
            while not self.stopping.is_set():
                future = producer.send(self.topic, f"m{self.sent}".encode(),
                                       partition=self.sent % self.partitions)
                self.sent += 1
                pending.append(future)
                producer.poll(0.003)
                last_ack = self._settle(pending, last_ack)
                self.started.set()
            producer.flush(120)
            self._settle(pending, last_ack)
            assert not pending, f"{len(pending)} sends not settled after flush"
        finally:
            producer.close(5)

    def _settle(self, pending: list[RecordFuture], last_ack: float) -> float:
        now = time.monotonic()
        still = []
        newly = 0
        for future in pending:
            if not future.done():
                still.append(future)
            elif future.failed():
                self.errors.append(future.exception())
            else:
                metadata = future.value
                assert isinstance(metadata, RecordMetadata)
                newly += 1
                previous = self._partition_acks.get(metadata.partition, now)
                self.partition_gaps[metadata.partition] = max(
                    self.partition_gaps.get(metadata.partition, 0.0), now - previous)
                self._partition_acks[metadata.partition] = now
        pending[:] = still
        if newly:
            self.longest_gap = max(self.longest_gap, now - last_ack)
            self.acked += newly
            return now
        return last_ack


def _more_acks(loop: _ProducerLoop, what: str, count: int = 50) -> None:
    acked = loop.acked
    until(lambda: loop.acked >= acked + count or loop.failure is not None, 60, what)


@pytest.mark.timeout(150)
def test_a_rolling_restart_under_a_producer_loses_no_send(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("roll", partitions=3, replication_factor=3)
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    loop = _ProducerLoop(bootstrap, "roll", 3)
    loop.start()
    try:
        assert loop.started.wait(30), "the producer did not start"
        for broker_id, process in sorted(cluster.brokers.items()):
            _more_acks(loop, f"acknowledgements before restarting broker {broker_id}")
            stopping_at = time.monotonic()
            assert process.stop() == 0
            took = time.monotonic() - stopping_at
            process.start(port=process.port)
            print(f"broker {broker_id}: stopped in {took:.2f} s, restarted after "
                  f"{time.monotonic() - stopping_at:.2f} s")
            cluster.wait_ready()
        _more_acks(loop, "acknowledgements after the rolling restart")
    finally:
        loop.stopping.set()
        loop.join(150)
    assert not loop.is_alive()
    if loop.failure is not None:
        raise loop.failure
    gaps = ", ".join(f"{p}: {g:.2f} s" for p, g in sorted(loop.partition_gaps.items()))
    print(f"rolling restart: {loop.acked} of {loop.sent} sends acknowledged; longest gap "
          f"between acknowledgements {loop.longest_gap:.2f} s (per partition: {gaps})")
    assert loop.errors == []
    assert loop.acked == loop.sent
