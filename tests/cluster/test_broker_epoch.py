"""Kafka's broker epoch (KIP-380): every control request names the registration of the broker
it is for, and a broker refuses one meant for an older registration of itself.

A chaos run on distinct hosts (seed 133) ended with one broker's Metadata naming, for a
minute, the leaders of before its host was cut off: an UpdateMetadata the controller had
written to the old connection before the broker registered again lay in the cut link and was
applied after the newer one. Here that late request is sent by hand: the current controller's
epoch, an empty view, and the broker's previous registration -- refused, and the broker's view
is intact; the same request naming its current registration is taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode
from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _update_metadata(cluster: Cluster, broker_id: int, broker_epoch: int) -> int:
    """An UpdateMetadata v1 with an empty view, as the current controller, naming
    ``broker_epoch``; the broker's error code."""
    body: dict[str, Any] = {
        "controller_id": cluster.controller_id(), "controller_epoch": cluster.controller_epoch(),
        "broker_epoch": broker_epoch, "partitions": [], "live_brokers": [], "topics": [],
    }
    network = NetworkClient(cluster.brokers[broker_id].bootstrap, client_id="late-controller",
                            request_timeout_ms=10_000)
    try:
        answer = network.send(-1, ApiKey.UPDATE_METADATA, body, api_version=1).result(10)
    except BrokerError as exc:  # a request-level refusal comes back raised, typed
        return int(exc.code)
    finally:
        network.close()
    return int(answer["error_code"])


@pytest.mark.timeout(90)
def test_a_control_request_for_an_older_registration_is_refused(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("t", partitions=3, replication_factor=3)
    victim = next(b for b in sorted(cluster.brokers) if b != cluster.controller_id())
    _, stat = cluster.zk.get(f"/brokers/ids/{victim}")
    before = cluster.metadata(victim, ["t"])
    assert len(before.topics["t"].partitions) == 3

    assert _update_metadata(cluster, victim, stat.czxid - 1) == ErrorCode.STALE_BROKER_EPOCH
    after = cluster.metadata(victim, ["t"])
    assert after.topics["t"].partitions == before.topics["t"].partitions
    assert sorted(after.brokers) == [0, 1, 2]

    # the same request for the registration it has now is the controller's to make: taken
    assert _update_metadata(cluster, victim, stat.czxid) == ErrorCode.NONE
    until(lambda: "t" not in cluster.metadata(victim, ["t"]).topics
          or not cluster.metadata(victim, ["t"]).topics["t"].partitions, 10,
          f"broker {victim} took the view of its own registration's request")
