"""The group tooling on a real cluster: ``odradek cluster status`` shows which broker
coordinates which groups (and leads which ``__consumer_offsets`` partitions), and
``odradek groups describe`` names the coordinator FindCoordinator names and how long the group
has been in its state -- also after the coordinator's broker was killed and the group moved."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from client.consumer import Consumer
from client.group_admin import GroupAdmin
from protocol.partitions import offsets_partition_for
from tests.cluster.conftest import Cluster, until
from tooling.cli import main as cli

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

GROUPS = ("apples", "pears", "plums", "figs")


def run(*argv: str) -> str:
    """What ``odradek ARGV`` prints on stdout (it must succeed)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli.main(list(argv)) == 0, err.getvalue()
    return out.getvalue()


@contextlib.contextmanager
def members(bootstrap: str, groups: dict[str, int]) -> Iterator[list[Consumer]]:
    """``groups[g]`` consumers of each group g, polled until all are in their groups. Their
    sessions are long, so the groups stay Steady while the test looks without polling."""
    of = {
        Consumer(bootstrap, group_id=g, client_id=f"{g}-{i}", session_timeout_ms=60_000,
                 heartbeat_interval_ms=1_000): g
        for g, n in groups.items() for i in range(n)
    }
    consumers = list(of)
    try:
        for consumer in consumers:
            consumer.subscribe(["fruit"])
        deadline = time.monotonic() + 60
        while not all(c.assignment() for c in consumers) or len(
                {(of[c], c.generation) for c in consumers}) != len(groups):
            assert time.monotonic() < deadline, "the consumers did not all join"
            for consumer in consumers:
                consumer.poll(10)
        yield consumers
    finally:
        for consumer in consumers:
            consumer.close(timeout_ms=2_000)


@pytest.fixture
def cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    cluster = make_cluster(3)
    cluster.create_topic("fruit", partitions=4, replication_factor=3)
    return cluster


def bootstrap_of(cluster: Cluster) -> str:
    return ",".join(p.bootstrap for p in cluster.running().values())


@pytest.mark.timeout(120)
def test_cluster_status_shows_what_each_broker_coordinates(cluster: Cluster) -> None:
    bootstrap = bootstrap_of(cluster)
    sizes = {g: 1 + i % 3 for i, g in enumerate(GROUPS)}
    with members(bootstrap, sizes), GroupAdmin(bootstrap) as admin:
        coordinators = {g: admin.find_coordinator(g).node_id for g in GROUPS}
        status: dict[str, Any] = json.loads(run("cluster", "status", "--bootstrap", bootstrap,
                                                "--json"))
        table = run("cluster", "status", "--bootstrap", bootstrap)
    offsets = [p for p in status["partitions"] if p["topic"] == "__consumer_offsets"]
    assert len(offsets) == 3  # CLUSTER_SETTINGS: offsets_topic_partitions
    by_node = {c["node_id"]: c for c in status["group_coordinators"]}
    assert sorted(by_node) == [0, 1, 2]
    for node, load in by_node.items():
        assert load["error"] is None
        assert load["offsets_partitions"] == sorted(
            p["partition"] for p in offsets if p["leader"] == node)
        mine = {g["group"]: g for g in load["groups"]}
        assert sorted(mine) == sorted(g for g, c in coordinators.items() if c == node)
        for group, listed in mine.items():
            assert listed == {"group": group, "offsets_partition":
                              offsets_partition_for(group, 3), "state": "Steady",
                              "generation": listed["generation"], "members": sizes[group]}
            assert listed["offsets_partition"] in load["offsets_partitions"]
        assert load["group_count"] == len(mine)
        assert load["member_count"] == sum(sizes[g] for g in mine)
    # the same in the tables
    assert "group coordinators" in table and "groups by coordinator" in table
    for group in GROUPS:
        row = next(line for line in table.splitlines() if f" {group} " in line)
        cells = [c.strip() for c in row.replace("┃", "│").split("│")[1:-1]]
        assert cells[:2] == [str(coordinators[group]), group]
        assert cells[3:] == ["Steady", cells[4], str(sizes[group])]


@pytest.mark.timeout(150)
def test_describe_names_the_coordinator_and_the_state_age_across_a_kill(
    cluster: Cluster,
) -> None:
    bootstrap = bootstrap_of(cluster)
    joining_ms = int(time.time() * 1000)  # the machine's clock, which the brokers read too
    with members(bootstrap, {"apples": 2}) as consumers:
        described = json.loads(run("groups", "describe", "apples", "--state", "--bootstrap",
                                   bootstrap, "--json"))
        with GroupAdmin(bootstrap) as admin:
            found = admin.find_coordinator("apples")
        assert described["coordinator"] == {"node_id": found.node_id, "host": found.host,
                                            "port": found.port}
        assert described["state"] == "Steady" and described["member_count"] == 2
        since = described["state_since_ms"]
        assert 0 <= described["in_state_ms"] < 60_000
        assert since <= time.time() * 1000

        cluster.brokers[found.node_id].kill()  # SIGKILL
        survivors = ",".join(p.bootstrap for i, p in cluster.running().items())

        def moved() -> dict[str, Any] | None:
            for consumer in consumers:
                consumer.poll(10)  # the members find the new coordinator meanwhile
            now = json.loads(run("groups", "describe", "apples", "--state", "--bootstrap",
                                 survivors, "--json", "--api-timeout-ms", "2000"))
            return now if now["coordinator"]["node_id"] != found.node_id else None

        after = until(moved, cluster.failover_bound, "the group at a new coordinator")
    # loaded from __consumer_offsets: still Steady, since the time in its group record (when
    # its round ended, the moment before the generation was written and it became Steady)
    assert after["state"] == "Steady" and after["generation"] == described["generation"]
    assert joining_ms <= after["state_since_ms"] <= since
    assert after["in_state_ms"] >= described["in_state_ms"]


@pytest.mark.parametrize(("argv", "says"), [
    (["groups", "describe"], ["IN-STATE-FOR", "FindCoordinator"]),
    (["cluster", "status"], ["__consumer_offsets partitions it leads", "coordinates"]),
    (["demo"], ["--cluster", "kill -9", "--zookeeper-session-timeout-ms"]),
], ids=["groups describe", "cluster status", "demo"])
def test_help_names_the_new_views(argv: list[str], says: list[str],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for words in says:
        assert words in text
