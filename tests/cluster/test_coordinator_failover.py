"""Coordinator failover on a 3-broker cluster, with real broker and consumer processes.

A group's coordinator is the leader of its ``__consumer_offsets`` partition; when that broker
fails, the controller elects another replica, which loads the partition (Catch-up -> Ready)
and coordinates the group from what the log holds (seed 001: "Co-ordinator failover or
connection loss to the co-ordinator", "Co-ordinator failure during rebalance",
"Consumer-Group Assignment and Migration").

The fault tests run consumer processes of one group (``tests/groups/member.py``: sync commit
after each batch, a paced batch of work, every event written to a file) over numbered
messages, fault the coordinator's broker in the middle, and check: the group is Steady again
under its new coordinator, every message was processed at least once, the committed offsets
(sampled all along) never went backwards, duplicates come only from the uncommitted window
(batches processed but not covered by a successful commit); each prints the time from the
fault to Steady (the start of the Steady spell the group settles in; also when it was first
seen Steady there -- a new coordinator loads a Steady group before its members are back --
and when every member had a commit accepted again) and the duplicate count. The faults:

- kill -9 while Steady;
- kill -9 during PrepareRebalance: a member joins while another member, with a long session
  and rebalance timeout, is stopped (SIGSTOP) and so does not rejoin; the coordinator dies
  holding the others' JoinGroups (seed step 3);
- kill -9 right after the round's group record is written (seed step 4), reached with the
  brokers run through ``tests.coordinator_faults`` (a wrapper the harness loads; the broker
  has no such setting): the coordinator stops itself (SIGSTOP) at that point once a test
  creates the file ``coordinator-test-pause`` in its data directory, and the test kills it
  there. Twice: right after the local append (the record
  is not replicated yet: the new coordinator has the previous generation) and once the ISR
  has it but before any JoinGroup is answered (the new coordinator has the new generation
  that no member has heard of);
- a controlled shutdown (SIGTERM) of the coordinator's broker;
- the coordinator's broker paused (SIGSTOP) past its ZooKeeper session timeout, then resumed:
  a zombie coordinator, fenced by the new leader epoch;
- the coordinator's broker cut from ZooKeeper (a cut link) while its members still reach it:
  a zombie coordinator that stays awake, then the link healed.

Then: 20 groups spread over the cluster, one broker killed -- only the groups whose offsets
partitions it led move, the others see no rebalance; and reloading ``__consumer_offsets``
after a failover (and after moving leadership back) gives the same groups and offsets.

``ODRADEK_TEST_FAILOVER_MESSAGES`` sets the message count (default 5,000; the issue's figure
is 50,000).
"""

from __future__ import annotations

import os
import re
import signal
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from client.admin import Admin
from client.group_admin import GroupAdmin
from protocol.errors import ErrorCode, GroupIdNotFoundError
from tests import coordinator_faults
from tests.broker.raw import RawClient
from tests.cluster.conftest import Cluster, until, zookeeper_through
from tests.cluster.groups_support import (
    GROUP_SETTINGS,
    MESSAGES,
    SESSION_MS,
    ConsumerPool,
    GroupRun,
    bootstrap_of,
    describe,
    live_bootstrap,
    process_state,
)
from tests.cluster.link_proxy import LinkProxy
from tests.coordinator_broker.members import Member, commit
from tests.groups.support import of_kind

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: per fault test: cluster start, production, consumption, the fault, the checks
FAULT_TIMEOUT = 240 if MESSAGES <= 10_000 else 600
CONSUME_TIMEOUT = 60.0 + MESSAGES / 250


def _report(name: str, run: GroupRun, *, old: int, new: int, times: tuple[float, float],
            fault_at: float, generations: tuple[int, int]) -> None:
    ledger = run.ledger()
    duplicates = ledger.check(run.expected)
    samples = run.sampler.check()
    resumed = run.commits_resumed(fault_at)
    assert resumed is not None
    print(f"\nFAILOVER {name}: {run.messages} messages, {len(run.members.started)} members, "
          f"coordinator {old} -> {new}; fault to Steady {times[1]:.2f} s (first seen Steady "
          f"there after {times[0]:.2f} s), every member committing again after "
          f"{resumed:.2f} s; generation {generations[0]} -> {generations[1]}; duplicates "
          f"{duplicates} (uncommitted window {len(ledger.window)}, failed commits "
          f"{ledger.commit_failures}); committed offsets sampled {samples} times, never "
          f"backwards (failed samples {dict(run.sampler.errors)})")


def _coordinator(run: GroupRun, members: int) -> tuple[int, int]:
    """Wait for the group to be Steady with ``members``; (coordinator id, generation)."""
    found = run.wait_steady(members, 60)
    return found.coordinator.node_id, found.generation


def _finish(name: str, run: GroupRun, *, old: int, fault_at: float, generation: int,
            members: int = 4) -> None:
    """After the fault: Steady under another coordinator (timed from ``fault_at``), every
    message processed and committed, the group still Steady there; the checks and the
    report."""
    first_s, steady_s, after = run.wait_settled(
        members, run.cluster.failover_bound + 30, not_on=old, since=fault_at)
    run.wait_all_processed(CONSUME_TIMEOUT)
    final = run.wait_steady(members, 30, not_on=old)
    assert final.coordinator.node_id == after.coordinator.node_id
    assert final.generation >= generation
    run.stop()
    _report(name, run, old=old, new=final.coordinator.node_id, times=(first_s, steady_s),
            fault_at=fault_at, generations=(generation, final.generation))


@pytest.fixture
def group_run(make_cluster: Callable[..., Cluster], tmp_path: Path
              ) -> Iterator[Callable[..., GroupRun]]:
    """``group_run(group, per_broker=None, pause_after=None, **broker_settings)``: a 3-broker
    cluster, the topic with every message, and a GroupRun (its members stopped at the end,
    however the test ends); ``pause_after`` runs the brokers through ``tests.coordinator_faults``
    with that pause point."""
    runs: list[GroupRun] = []

    def factory(group: str, per_broker: Mapping[int, Mapping[str, Any]] | None = None,
                pause_after: str | None = None, **settings: object) -> GroupRun:
        faults = {} if pause_after is None else {
            "env": coordinator_faults.faulty_env(pause_after=pause_after),
            "module": coordinator_faults.MODULE,
        }
        cluster = make_cluster(3, settings={**GROUP_SETTINGS, **settings},
                               per_broker=per_broker, **faults)
        run = GroupRun(cluster, tmp_path, group)
        runs.append(run)
        run.produce()
        return run

    yield factory
    for run in runs:
        run.stop()


# ------------------------------------------------------------------------------ (a) Steady


@pytest.mark.timeout(FAULT_TIMEOUT)
def test_kill_9_of_the_coordinator_while_the_group_is_steady(
    group_run: Callable[..., GroupRun],
) -> None:
    run = group_run("failover-steady")
    run.start_members(4)
    old, generation = _coordinator(run, 4)
    run.sampler.start()
    run.wait_processed(run.messages // 4, CONSUME_TIMEOUT, "before the fault")

    dead = run.cluster.brokers[old]
    fault_at = time.monotonic()
    dead.kill()
    with ThreadPoolExecutor(1) as pool:
        # an admin started during the failover, its first bootstrap address the dead broker:
        # it asks the next one, and the group's coordinator until there is a new one
        admin_view = pool.submit(describe, f"{dead.bootstrap},{run.live_bootstrap()}",
                                 run.group, int((run.cluster.failover_bound + 30) * 1000))
        _finish("kill -9 while Steady", run, old=old, fault_at=fault_at, generation=generation)
        assert admin_view.result().coordinator.node_id != old


# ---------------------------------------------------------------------- (b) PrepareRebalance


@pytest.mark.timeout(FAULT_TIMEOUT)
def test_kill_9_of_the_coordinator_during_prepare_rebalance(
    group_run: Callable[..., GroupRun],
) -> None:
    run = group_run("failover-prepare")
    fast = run.start_members(2)
    # a member that does not rejoin quickly: stopped below, its session and the round's
    # rebalance timeout long enough to keep the group in PrepareRebalance for the kill
    slow = run.start_member("--session-timeout-ms", "30000", "--rebalance-timeout-ms", "60000")
    old, generation = _coordinator(run, 3)
    run.sampler.start()
    run.wait_processed(run.messages // 4, CONSUME_TIMEOUT, "before the fault")

    os.kill(slow.pid, signal.SIGSTOP)
    try:
        states = {m.name: len(of_kind(m.snapshot(), "state")) for m in fast}
        run.start_member()  # joins: PrepareRebalance; the fast ones rejoin, the slow one not
        until(lambda: describe(run.live_bootstrap(), run.group).state == "PrepareRebalance", 30,
              "the group in PrepareRebalance")
        for member in fast:  # they rejoin still consuming; their JoinGroups are held
            member.wait_for(_rejoining_after(states[member.name]), "rejoining for the new round")
        assert describe(run.live_bootstrap(), run.group).state == "PrepareRebalance"
        fault_at = time.monotonic()
        run.cluster.brokers[old].kill()
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    _finish("kill -9 during PrepareRebalance", run, old=old, fault_at=fault_at,
            generation=generation)


def _rejoining_after(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether a state event after the first ``count`` says the member is rejoining (an
    incremental member's JoinGroup goes out as it enters that state)."""
    return lambda events: any(e["state"] == "Rejoining while consuming"
                              for e in of_kind(events, "state")[count:])


# ------------------------------------------------------------- (c) group record appended


@pytest.mark.timeout(FAULT_TIMEOUT)
@pytest.mark.parametrize("point", ["group_record", "group_record_replicated"])
def test_kill_9_of_the_coordinator_right_after_the_group_record(
    group_run: Callable[..., GroupRun], point: str,
) -> None:
    run = group_run(f"failover-{point.replace('_', '-')}", pause_after=point)
    run.start_members(3)
    old, generation = _coordinator(run, 3)
    run.sampler.start()
    run.wait_processed(run.messages // 4, CONSUME_TIMEOUT, "before the fault")

    coordinator = run.cluster.brokers[old]
    # arm: the next round's record stops it
    (coordinator.data_dir / coordinator_faults.ARM_FILE).touch()
    pause_line = f"event='coordinator.test_pause' point='{point}'"
    stops = coordinator.log_text().count(pause_line)
    run.start_member()  # a round: the group record of generation + 1
    try:
        coordinator.wait_for_log(re.escape(pause_line), count=stops + 1, timeout=60)
        until(lambda: process_state(coordinator.pid) == "T", 10,
              f"broker {old} stopped at {point}")
        fault_at = time.monotonic()
        coordinator.kill()
    finally:
        if coordinator.running:
            os.kill(coordinator.pid, signal.SIGCONT)
    _finish(f"kill -9 after the group record ({point})", run, old=old, fault_at=fault_at,
            generation=generation)


# --------------------------------------------------------------------- (d) SIGTERM


@pytest.mark.timeout(FAULT_TIMEOUT)
def test_controlled_shutdown_of_the_coordinator(group_run: Callable[..., GroupRun]) -> None:
    run = group_run("failover-sigterm")
    run.start_members(4)
    old, generation = _coordinator(run, 4)
    run.sampler.start()
    run.wait_processed(run.messages // 4, CONSUME_TIMEOUT, "before the fault")

    coordinator = run.cluster.brokers[old]
    fault_at = time.monotonic()
    os.kill(coordinator.pid, signal.SIGTERM)
    assert coordinator.wait(60) == 0, coordinator.log_text()[-3000:]
    _finish("SIGTERM (controlled shutdown)", run, old=old, fault_at=fault_at,
            generation=generation)


# ------------------------------------------- (e) a zombie: paused or cut past its session


#: the two zombie coordinators: what is done to its broker, as the report names it
ZOMBIES = {
    "paused": "SIGSTOP past the ZooKeeper session, then SIGCONT",
    "cut": "cut from ZooKeeper past the session, then healed",
}


@pytest.mark.timeout(FAULT_TIMEOUT)
@pytest.mark.parametrize("fault", list(ZOMBIES))
def test_a_zombie_coordinator_past_its_zookeeper_session_then_back(
    fault: str, zk_links: dict[int, LinkProxy], zk_connect: str,
    group_run: Callable[..., GroupRun],
) -> None:
    """The coordinator's broker outlives its ZooKeeper session: ZooKeeper expires it, another
    replica leads the offsets partition and loads the group. Paused (SIGSTOP), it does
    nothing meanwhile; cut from ZooKeeper, it stays awake and its members go on heartbeating
    and committing to it -- but it cannot have a commit replicated (its followers fetch from
    the new leader, and it cannot shrink the ISR without ZooKeeper), so it acknowledges none,
    and the committed offsets never go backwards. Back (SIGCONT, or the link healed), it
    registers again, resigns the partition (Ready -> Down), and the members find the new
    coordinator."""
    run = group_run(f"failover-{fault}", per_broker=zookeeper_through(zk_links, zk_connect))
    run.start_members(4)
    old, generation = _coordinator(run, 4)
    run.sampler.start()
    run.wait_processed(run.messages // 4, CONSUME_TIMEOUT, "before the fault")

    cluster = run.cluster
    coordinator = cluster.brokers[old]
    offsets_partition = _offsets_partition(cluster, run.group)
    failures_before = run.ledger().commit_failures
    fault_at = time.monotonic()
    if fault == "paused":
        os.kill(coordinator.pid, signal.SIGSTOP)
    else:
        zk_links[old].cut()
    try:
        until(lambda: old not in cluster.registered(), cluster.failover_bound,
              f"broker {old}'s registration expired")
        until(lambda: cluster.state("__consumer_offsets", offsets_partition)["leader"]
              not in (old, -1), cluster.failover_bound,
              f"__consumer_offsets-{offsets_partition} led by another broker")
        if fault == "cut":  # it still takes commits: it answers them with an error
            until(lambda: run.ledger().commit_failures > failures_before, 30,
                  "a member's commit refused by the cut-off coordinator")
    finally:
        if fault == "paused":
            os.kill(coordinator.pid, signal.SIGCONT)
        else:
            zk_links[old].restore()
    back_at = time.monotonic()
    until(lambda: old in cluster.registered(), cluster.failover_bound,
          f"broker {old} registered again")
    coordinator.wait_for_log(
        f"event='offsets_partition_transition' partition={offsets_partition} "
        "from='Ready' to='Down'", timeout=cluster.failover_bound)
    _finish(ZOMBIES[fault], run, old=old, fault_at=fault_at, generation=generation)
    print(f"({fault} for {back_at - fault_at:.2f} s)")
    assert coordinator.running


def _offsets_partition(cluster: Cluster, group: str) -> int:
    partitions = len(cluster.assignment("__consumer_offsets"))
    return zlib.crc32(group.encode("utf-8")) % partitions


# --------------------------------------------------------------- groups spread over the cluster

SPREAD_GROUPS = 20
#: more __consumer_offsets partitions than the cluster fixture's 3, so groups spread
SPREAD_SETTINGS = {**GROUP_SETTINGS, "offsets_topic_partitions": 6}


def _group_views(admin: GroupAdmin, groups: list[str]) -> dict[str, tuple[int, str, int, int]]:
    """Each group's (coordinator, state, generation, member count)."""
    views = {}
    for group in groups:
        found = admin.describe_group(group)
        views[group] = (found.coordinator.node_id, found.state, found.generation,
                        len(found.members))
    return views


@pytest.mark.timeout(180)
def test_a_broker_killed_moves_only_the_groups_it_coordinated(
    make_cluster: Callable[..., Cluster],
) -> None:
    """20 groups (one consumer each, in one thread of the test) over the 6 offsets partitions;
    kill -9 of the broker coordinating the most: its groups move to the new leaders of their
    offsets partitions and are Steady there again; every other group stays Steady with its
    generation and coordinator throughout, and its consumer never revokes its partitions."""
    cluster = make_cluster(3, settings=SPREAD_SETTINGS)
    cluster.create_topic("spread", partitions=3, replication_factor=3)
    groups = [f"spread-{i:02d}" for i in range(SPREAD_GROUPS)]
    pool = ConsumerPool(bootstrap_of(cluster), "spread", groups).start()
    try:
        def all_steady() -> dict[str, tuple[int, str, int, int]] | None:
            with GroupAdmin(live_bootstrap(cluster), timeout_ms=5_000) as admin:
                views = _group_views(admin, groups)
            steady = all(v[1] == "Steady" and v[3] == 1 for v in views.values()) and all(
                pool.view(g)[:2] == ("Part of a group", views[g][2]) for g in groups)
            return views if steady else None

        before = until(all_steady, 60, "every group Steady with its consumer")
        victim = Counter(v[0] for v in before.values()).most_common(1)[0][0]
        moved = sorted(g for g, v in before.items() if v[0] == victim)
        stayed = sorted(g for g, v in before.items() if v[0] != victim)
        assert moved and stayed, before
        revoked = {g: pool.view(g)[2] for g in groups}
        print(f"\nkilling broker {victim}, coordinator of {len(moved)} of {len(groups)} groups "
              f"(controller: {cluster.controller_id()})")

        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        looks = 0

        def look(wanted: list[str]) -> dict[str, tuple[int, str, int, int]]:
            """The groups ``wanted`` and the untouched ones; these must be as before."""
            nonlocal looks
            with GroupAdmin(live_bootstrap(cluster), timeout_ms=5_000) as admin:
                views = _group_views(admin, stayed)
                looks += 1
                for group in stayed:  # (its consumer may look for its coordinator a moment)
                    assert views[group] == before[group], (group, before[group], views[group])
                    assert pool.view(group)[1:] == (before[group][2], revoked[group]), (
                        group, pool.view(group))
                views.update(_group_views(admin, wanted))
            return views

        def moved_steady() -> bool:
            views = look(moved)
            return all(views[g][0] != victim and views[g][1:] == ("Steady", views[g][2], 1)
                       for g in moved)

        until(moved_steady, cluster.failover_bound + 30,
              f"the groups of broker {victim} Steady under their new coordinators")
        moved_s = time.monotonic() - killed_at
        # a session timeout (and some) of looking on: a consumer that had not reached its new
        # coordinator would be expired meanwhile; the untouched groups stay untouched
        watch_until = time.monotonic() + SESSION_MS / 1000 + 2
        while time.monotonic() < watch_until:
            look([])

        def consumers_back() -> bool:
            views = look(moved)
            return all(views[g][0] != victim and views[g][1:] == ("Steady", views[g][2], 1)
                       and pool.view(g)[:2] == ("Part of a group", views[g][2]) for g in moved)

        until(consumers_back, 30, "the moved groups' consumers members of their groups")
        settled_s = time.monotonic() - killed_at
        after = look(moved)
        assert not pool.errors, pool.errors
    finally:
        pool.stop()
    bumped = [g for g in moved if after[g][2] != before[g][2]]
    print(f"groups moved: {len(moved)}, Steady under their new coordinators "
          f"{moved_s:.2f} s after the kill, consumers confirmed {settled_s:.2f} s after it "
          f"(generation bumped in {len(bumped)}); groups untouched: {len(stayed)}, looked at "
          f"{looks} times during the failover, never a rebalance; longest poll() of the "
          f"pool {pool.slowest[1] * 1000:.0f} ms")
    assert all(after[g][2] >= before[g][2] for g in moved)
    assert all(after[g] == before[g] for g in stayed)


# -------------------------------------------------------------------------- reload after failover

RELOAD_TOPIC = "ledger"
RELOAD_SESSION_MS = 120_000  # the raw members never heartbeat: they must outlive the test


Snapshot = tuple[int, Any, dict[tuple[str, int], Any]]


def _snapshot(admin: GroupAdmin, group: str) -> Snapshot:
    """(coordinator, what DescribeGroups says, what OffsetFetch says) of one group; the
    description is None for a group that does not exist."""
    offsets = {(tp.topic, tp.partition): tuple(c)
               for tp, c in admin.committed_offsets(group).items()}
    coordinator = admin.find_coordinator(group).node_id
    try:
        found = admin.describe_group(group)
    except GroupIdNotFoundError:
        return coordinator, None, offsets
    members = sorted((m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                      m.subscription, tuple(sorted(m.assignment))) for m in found.members)
    return coordinator, (found.state, found.generation, found.strategy, members), offsets


def _snapshots(cluster: Cluster, groups: list[str]
               ) -> dict[str, Snapshot]:
    with GroupAdmin(live_bootstrap(cluster), timeout_ms=20_000) as admin:
        return {group: _snapshot(admin, group) for group in groups}


def _snapshots_if(cluster: Cluster, groups: list[str], coordinated: Callable[[str, int], bool]
                  ) -> dict[str, Snapshot] | None:
    """The snapshots, if every group's coordinator is as ``coordinated(group, id)`` wants."""
    found = _snapshots(cluster, groups)
    return found if all(coordinated(g, v[0]) for g, v in found.items()) else None


def _make_groups(cluster: Cluster) -> list[str]:
    """20 groups of four kinds, on whichever brokers coordinate them: Steady with two members
    (raw protocol members that never heartbeat, with a long session) and their commits;
    Empty after their members left, offsets kept; offsets committed with manual assignment
    (no group record); deleted (tombstones only)."""
    kinds = ["steady", "empty", "manual", "deleted"]
    groups = [f"reload-{kinds[i % 4]}-{i:02d}" for i in range(20)]
    with GroupAdmin(live_bootstrap(cluster), timeout_ms=20_000) as admin:
        where = {g: admin.find_coordinator(g) for g in groups}
    clients: list[RawClient] = []
    joining: list[tuple[str, Member]] = []
    try:
        for group in groups:
            address = (where[group].host, where[group].port)
            kind = group.split("-")[1]
            if kind in ("steady", "empty"):
                for _ in range(2 if kind == "steady" else 1):
                    member = Member(address, group, [RELOAD_TOPIC],
                                    session_timeout_ms=RELOAD_SESSION_MS,
                                    rebalance_timeout_ms=RELOAD_SESSION_MS)
                    member.send_join()  # every group's members join together: one round each
                    joining.append((group, member))
            else:
                client = RawClient(address)
                clients.append(client)
                index = int(group.rsplit("-", 1)[1])
                codes = commit(client, group, -1, "", {(RELOAD_TOPIC, p): 10 * index + p
                                                       for p in range(3)}, metadata=group)
                assert set(codes.values()) == {ErrorCode.NONE}, (group, codes)
        for group, member in joining:
            answer = member.finish_join()
            assert answer["error_code"] == 0, (group, answer)
        for n, (group, member) in enumerate(joining):
            offsets = {tp: 100 + n for tp in member.partitions}
            if offsets:
                codes = member.commit(offsets, metadata=f"{group}/{n}")
                assert set(codes.values()) == {ErrorCode.NONE}, (group, codes)
            if group.split("-")[1] == "empty":
                assert member.leave() is ErrorCode.NONE
    finally:
        for _, member in joining:
            member.close()
        for client in clients:
            client.close()
    with GroupAdmin(live_bootstrap(cluster), timeout_ms=20_000) as admin:
        deleted = [g for g in groups if g.split("-")[1] == "deleted"]
        assert set(admin.delete_groups(deleted).values()) == {None}
    return groups


@pytest.mark.timeout(180)
def test_offsets_reload_after_a_failover_gives_the_same_groups_and_offsets(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Groups and offsets before a kill -9 of the broker coordinating most of them, and after
    the new leaders of its offsets partitions loaded them: the same, group by group
    (DescribeGroups: state, generation, strategy, members and their assignments; OffsetFetch:
    every committed offset and its metadata; deleted groups stay deleted). And once more after
    the broker is back and leadership moves back to it (preferred election): it loads the
    partitions it followed meanwhile."""
    cluster = make_cluster(3, settings={**SPREAD_SETTINGS,
                                        "group_max_session_timeout_ms": RELOAD_SESSION_MS})
    cluster.create_topic(RELOAD_TOPIC, partitions=3, replication_factor=3)
    groups = _make_groups(cluster)
    before = _snapshots(cluster, groups)
    kinds = Counter((v[1] or ("Dead",))[0] for v in before.values())
    assert kinds == {"Steady": 5, "Empty": 10, "Dead": 5}, kinds  # manual ones are Empty
    victim = Counter(v[0] for v in before.values()).most_common(1)[0][0]
    moved = sorted(g for g, v in before.items() if v[0] == victim)
    print(f"\nkilling broker {victim}, coordinator of {len(moved)} of {len(groups)} groups")

    cluster.brokers[victim].kill()
    started = time.monotonic()
    after = until(lambda: _snapshots_if(cluster, groups, lambda g, c: c != victim),
                  cluster.failover_bound + 30, "every group answered by a live coordinator")
    reloaded_s = time.monotonic() - started
    for group in groups:
        assert after[group][1:] == before[group][1:], (group, before[group], after[group])
    assert all(after[g][0] == before[g][0] for g in groups if g not in moved)

    # back, in sync, and leader again of its preferred offsets partitions: it loads them
    cluster.brokers[victim].restart()
    cluster.wait_ready()
    offsets_partitions = cluster.assignment("__consumer_offsets")
    until(lambda: all(victim in cluster.state("__consumer_offsets", p)["isr"]
                      for p, replicas in offsets_partitions.items() if victim in replicas),
          60, f"broker {victim} back in the ISR of its offsets partitions")
    with Admin(live_bootstrap(cluster), timeout_ms=20_000) as admin:
        admin.elect_leaders([("__consumer_offsets", p) for p in offsets_partitions])
    again = until(lambda: _snapshots_if(cluster, groups,
                                        lambda g, c: c == victim or g not in moved),
                  60, f"broker {victim} coordinating its groups again")
    for group in groups:
        assert again[group][1:] == before[group][1:], (group, before[group], again[group])
    print(f"{len(moved)} groups reloaded by the new leaders {reloaded_s:.2f} s after the kill, "
          f"and again by broker {victim} after the preferred election: every group and "
          f"offset as before ({dict(kinds)})")
