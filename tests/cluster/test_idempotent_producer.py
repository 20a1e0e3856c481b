"""The idempotent producer against a write whose answer never came (issue 27; KIP-98).

The follower of a partition is stopped (SIGSTOP) while an acks=all send is in flight: the
leader writes the batch, waits for its in-sync follower and answers REQUEST_TIMED_OUT after the
request's timeout. The producer retries the batch -- already in the log. Once the leader drops
the silent follower from the ISR, the retry is acknowledged. Without idempotence the log then
holds the message twice; with it, once, at the offset acknowledged."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client.producer import Producer
from tests.cluster.conftest import Cluster, paused, read_partitions, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SETTINGS = {"replica_lag_time_max_ms": 3000, "min_insync_replicas": 1}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_a_retry_of_a_written_but_unanswered_batch_is_stored_once_only_when_idempotent(
    make_cluster: Callable[..., Cluster], idempotent: bool,
) -> None:
    cluster = make_cluster(2, settings=SETTINGS)
    cluster.create_topic("retried", partitions=1, replication_factor=2)
    until(lambda: len(cluster.state("retried", 0)["isr"]) == 2, 20, "both replicas in sync")
    state = cluster.state("retried", 0)
    leader = cluster.brokers[state["leader"]]
    follower = next(p for b, p in cluster.brokers.items() if b != state["leader"])
    with Producer(leader.bootstrap, acks="all", request_timeout_ms=1_000,
                  retry_backoff_ms=200, enable_idempotence=idempotent) as producer:
        producer.send("retried", b"before", partition=0).result(30)
        with paused(follower):
            future = producer.send("retried", b"once", partition=0)
            offset = future.result(60).offset  # answered once the ISR has shrunk
        stored = read_partitions(leader.bootstrap, "retried", [0], timeout=30)[0]
    copies = [o for o, value in stored if value == b"once"]
    print(f"idempotent={idempotent}: copies of the retried message {copies}, acknowledged at "
          f"{offset}")
    assert offset in copies
    if idempotent:
        assert copies == [offset]
    else:
        assert len(copies) >= 2  # the scenario does produce a retry of a written batch
