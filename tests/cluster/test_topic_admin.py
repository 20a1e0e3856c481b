"""Topic administration on a cluster: an explicit replica assignment in CreateTopics, bad ones
refused by name, and CreatePartitions placing the new partitions (Kafka's kafka-topics
--replica-assignment and --alter --partitions)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client.admin import Admin
from protocol.errors import (
    BrokerNotAvailableError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
)
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, until
from tooling.cli import main as cli

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.mark.timeout(90)
def test_an_explicit_replica_assignment_is_kept_and_bad_ones_are_refused(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    bootstrap = cluster.brokers[0].bootstrap
    assignment = {0: [2, 0], 1: [1, 2], 2: [0, 1]}
    with Admin(bootstrap) as admin:
        admin.create_topic("placed", replica_assignment=assignment)
        with pytest.raises(BrokerNotAvailableError, match=r"partition 0.*7"):
            admin.create_topic("nowhere", replica_assignment={0: [7, 0]})
        with pytest.raises(InvalidReplicaAssignmentError, match="partition 1"):
            admin.create_topic("uneven", replica_assignment={0: [0, 1], 1: [1]})
    assert cluster.assignment("placed") == assignment
    until(lambda: cluster.leaders("placed") == {0: 2, 1: 1, 2: 0}, 20,
          "each partition led by its first replica")
    # the CLI's kafka-topics form
    code = cli.main(["topics", "create", "placed-cli", "--replica-assignment", "1:0,0:2",
                     "--bootstrap", bootstrap])
    assert code == 0
    assert cluster.assignment("placed-cli") == {0: [1, 0], 1: [0, 2]}


@pytest.mark.timeout(90)
def test_create_partitions_places_the_new_ones_and_never_shrinks(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("growing", partitions=2, replication_factor=2)
    bootstrap = cluster.brokers[1].bootstrap
    assert cli.main(["topics", "alter", "growing", "--partitions", "5",
                     "--bootstrap", bootstrap]) == 0
    assignment = cluster.assignment("growing")
    assert sorted(assignment) == [0, 1, 2, 3, 4]
    assert all(len(set(r)) == 2 for r in assignment.values())
    cluster.wait_for_leaders("growing", 5)
    with Admin(bootstrap) as admin, pytest.raises(InvalidPartitionsError, match="larger"):
        admin.create_partitions("growing", 3)


@pytest.mark.timeout(60)
def test_a_single_broker_takes_an_assignment_naming_itself_only(broker: BrokerProcess) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("mine", replica_assignment={0: [broker.node_id or 0]})
        with pytest.raises(InvalidReplicaAssignmentError, match="other than this single"):
            admin.create_topic("theirs", replica_assignment={0: [5]})
        assert admin.describe_topics(["mine"])[0].partitions[0].replicas == (
            broker.node_id or 0,)


@pytest.mark.timeout(90)
def test_an_admin_request_right_after_the_controller_died_waits_for_the_next_one(
    make_cluster: Callable[..., Cluster],
) -> None:
    """The survivors' metadata names the dead controller until ZooKeeper has noticed: the
    admin asks again, with fresh metadata, until the next one answers (Kafka's AdminClient)."""
    cluster = make_cluster(3)
    old = cluster.controller_id()
    assert old is not None
    survivor = cluster.any_running(but=old)
    cluster.brokers[old].kill()
    with Admin(survivor.bootstrap, timeout_ms=int(cluster.failover_bound * 1000)) as admin:
        admin.elect_leaders()  # ElectLeaders: the controller's alone, NOT_CONTROLLER elsewhere
    assert cluster.controller_id() not in (None, old)
