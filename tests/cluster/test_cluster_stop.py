"""Stopping brokers whose partitions nobody else can lead: every broker at once (SIGTERM to the
whole cluster, as docs/security.md's last step does), or a broker holding the only replica of a
partition. The controller answers such partitions apart from those a later attempt could move
(ControlledShutdown v1's unmovable_partitions), so the broker neither waits nor asks again for
them: it says how many in one line and stops. Before, it asked four times,
``controlled_shutdown_retry_backoff_ms`` apart, and gave up (``controlled_shutdown_incomplete``).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable

import pytest

from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: Kafka's controlled.shutdown.retry.backoff.ms: a retry for nothing would show as a stop of
#: three such pauses
KAFKA_RETRY_BACKOFF_MS = 5_000
#: generous: what every broker of a stopped cluster gets to exit in (not a speed claim)
STOP_DEADLINE = 15.0


def _run(log: str) -> str:
    """The log of the broker's last start."""
    return log.split("--- start:")[-1]


@pytest.mark.timeout(120)
def test_sigterm_to_every_broker_at_once_stops_each_without_waiting_for_new_leaders(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, settings={
        "controlled_shutdown_retry_backoff_ms": KAFKA_RETRY_BACKOFF_MS})
    cluster.create_topic("everywhere", partitions=6, replication_factor=3)
    cluster.create_topic("single", partitions=3, replication_factor=1)
    leaders = set(cluster.leaders("everywhere").values()) | set(
        cluster.leaders("single").values())
    assert leaders == {0, 1, 2}, "every broker leads something"
    processes = dict(cluster.brokers)

    for process in processes.values():
        os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_DEADLINE
    statuses = {i: p.wait(max(0.1, deadline - time.monotonic()))
                for i, p in processes.items()}

    runs = {i: _run(p.log_text()) for i, p in processes.items()}
    for broker_id, run in runs.items():
        assert "controlled_shutdown_incomplete" not in run, f"broker {broker_id}:\n{run}"
        assert "cluster.controlled_shutdown_done" in run, f"broker {broker_id}:\n{run}"
        assert run.count("cluster.controlled_shutdown_unmovable") <= 1, run
    # SIGKILL after the deadline would show here as -9
    assert statuses == {0: 0, 1: 0, 2: 0}


@pytest.mark.timeout(90)
def test_a_broker_holding_the_only_replica_of_a_partition_stops_and_says_so_once(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    controller = cluster.controller_id()
    assert controller is not None
    leaving, other = (b for b in range(3) if b != controller)
    cluster.create_topic("solo", 2, 1, replica_assignment={0: [leaving], 1: [other]})
    cluster.create_topic("shared", 3, 3, replica_assignment={
        p: [leaving, other, controller] for p in range(3)})
    process = cluster.brokers[leaving]

    assert process.stop() == 0
    run = _run(process.log_text())
    assert "controlled_shutdown_incomplete" not in run
    [line] = [line for line in run.splitlines()
              if "cluster.controlled_shutdown_unmovable" in line]
    assert "partitions=1 " in line
    assert run.index("cluster.controlled_shutdown_unmovable") < run.index(
        "cluster.controlled_shutdown_done")
    # the controller moved what it could at the first attempt, and nothing remained
    answers = re.findall(
        rf"controller\.controlled_shutdown' broker_id={leaving} (moved=\d+ remaining=\d+ "
        r"unmovable=\d+)", cluster.brokers[controller].log_text())
    assert answers == ["moved=3 remaining=0 unmovable=1"]

    def moved() -> bool:
        leaders = cluster.leaders("shared")
        return all(leader not in (leaving, -1) for leader in leaders.values())

    until(moved, 10, "every partition of 'shared' led by another broker")
    assert cluster.state("solo", 0)["leader"] in (leaving, -1)  # nobody else can lead it
    assert cluster.state("solo", 1)["leader"] == other
