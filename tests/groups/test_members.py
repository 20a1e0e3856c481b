"""Consumer groups end to end: a real broker process, each member a process of its own.

Members commit synchronously after each batch they print, so every delivery can be checked: all
messages arrive, partitions are disjoint in every generation, and a message arrives twice only if
no successful commit covered it (the uncommitted window, counted by ``Ledger``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from tests.groups.support import (
    GROUP_BROKER_SETTINGS,
    Ledger,
    MemberProcess,
    Members,
    create_topic,
    last_assignment,
    of_kind,
    owns,
    partition_names,
    produce,
    wait_for_ownership,
)

pytestmark = pytest.mark.integration

SESSION_MS = 2_000
#: what a move may take beyond the session timeout: the next heartbeat, the join round, the
#: group record's write, the committed-offsets lookup -- generous for a loaded machine
SLACK_S = 8.0


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def consumed(members: list[MemberProcess]) -> set[str]:
    return set(Ledger(members).values())


def test_three_members_share_partitions_and_take_over_after_a_kill(make_broker) -> None:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, "numbers", 12)
    everything = partition_names("numbers", 12)
    members = Members(broker.bootstrap, "counting", "--topics", "numbers",
                      "--session-timeout-ms", str(SESSION_MS))
    values = [str(i) for i in range(10_000)]
    try:
        victim, *survivors = [members.start() for _ in range(3)]
        first = wait_for_ownership([victim, *survivors], everything, timeout=30)
        produce(broker.bootstrap, "numbers", values[:5_000])
        wait_until(lambda: len(consumed(members.started)) >= 2_500, "half the first messages")
        lost = owns(victim.snapshot())
        assert lost, "the victim owned partitions"

        victim.kill()
        generation = wait_for_ownership(survivors, everything, SESSION_MS / 1000 + SLACK_S)
        assert generation > first

        produce(broker.bootstrap, "numbers", values[5_000:])
        wait_until(lambda: consumed(members.started) >= set(values), "every message")
    finally:
        members.stop_all()
    ledger = Ledger(members.started)
    ledger.check_disjoint_per_generation()
    duplicates = ledger.check_complete(values)
    # The victim's partitions were all taken over, and only there may anything repeat.
    taken = {p for _, ps in ledger.assignments_by_generation()[generation] for p in ps}
    assert lost <= taken
    assert duplicates <= 200  # at most one batch (max_poll_records) was never committed


def test_a_member_that_stops_polling_is_replaced_and_its_commit_fails(make_broker) -> None:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, "work", 4)
    everything = partition_names("work", 4)
    members = Members(broker.bootstrap, "stalling", "--topics", "work",
                      "--session-timeout-ms", "1000", "--heartbeat-interval-ms", "200",
                      "--pause-ms", "3000")
    values = [str(i) for i in range(2_000)]
    try:
        slow, steady = members.start(), members.start()
        wait_for_ownership([slow, steady], everything, timeout=30)
        produce(broker.bootstrap, "work", values[:1_000])
        slow.wait_for(lambda es: of_kind(es, "committed"), "a first commit")

        slow.signal(signal.SIGUSR1)  # stop calling poll() for 3 s: three session timeouts
        slow.wait_for(lambda es: of_kind(es, "paused"), "the pause")
        # The coordinator removes it; the other member takes every partition meanwhile.
        wait_for_ownership([steady], everything, timeout=1.0 + SLACK_S)

        events = slow.wait_for(lambda es: of_kind(es, "commit_failed"), "the failed commit")
        failure = of_kind(events, "commit_failed")[-1]
        assert failure["error"] == "CommitFailedError"
        assert "poll()" in failure["message"] and "session" in failure["message"]
        # It rejoins and gets partitions again in a later generation.
        wait_for_ownership([slow, steady], everything, timeout=30)
        assert owns(slow.snapshot())

        produce(broker.bootstrap, "work", values[1_000:])
        wait_until(lambda: consumed(members.started) >= set(values), "every message")
    finally:
        members.stop_all()
    ledger = Ledger(members.started)
    ledger.check_disjoint_per_generation()
    ledger.check_complete(values)


def test_members_continue_from_committed_offsets_after_a_broker_restart(make_broker) -> None:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, "durable", 6)
    everything = partition_names("durable", 6)
    members = Members(broker.bootstrap, "restarting", "--topics", "durable",
                      "--session-timeout-ms", "3000")
    values = [str(i) for i in range(4_000)]
    try:
        a, b = members.start(), members.start()
        wait_for_ownership([a, b], everything, timeout=30)
        produce(broker.bootstrap, "durable", values[:2_000])
        wait_until(lambda: consumed(members.started) >= set(values[:2_000]), "the first half")

        seen = {m.name: len(m.snapshot()) for m in (a, b)}
        broker.stop()  # SIGTERM
        broker.start(port=broker.port)
        # Both look for the coordinator again, and the group settles with both in it.
        for member in (a, b):
            member.wait_for(
                lambda es, m=member: any(
                    e["event"] == "state" and "Re-discover" in e["state"]
                    for e in es[seen[m.name]:]
                ),
                "looking for the coordinator again",
            )
        wait_for_ownership([a, b], everything, timeout=30)
        produce(broker.bootstrap, "durable", values[2_000:])
        wait_until(lambda: consumed(members.started) >= set(values), "every message")
    finally:
        members.stop_all()
    ledger = Ledger(members.started)
    ledger.check_disjoint_per_generation()
    ledger.check_complete(values)


def test_a_pattern_subscription_picks_up_a_new_matching_topic(make_broker) -> None:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, "metrics-cpu", 2)
    create_topic(broker.bootstrap, "logs", 2)
    members = Members(broker.bootstrap, "wildcard", "--pattern", r"metrics-.*",
                      "--metadata-max-age-ms", "300")
    try:
        member = members.start()
        wait_for_ownership([member], partition_names("metrics-cpu", 2), timeout=30)

        create_topic(broker.bootstrap, "metrics-disk", 3)
        wanted = partition_names("metrics-cpu", 2) | partition_names("metrics-disk", 3)
        wait_for_ownership([member], wanted, timeout=30)
        produce(broker.bootstrap, "metrics-disk", ["d1", "d2", "d3"])
        produce(broker.bootstrap, "logs", ["not-for-the-pattern"])
        wait_until(lambda: consumed([member]) >= {"d1", "d2", "d3"}, "the new topic's messages")
    finally:
        members.stop_all()
    assert "not-for-the-pattern" not in consumed([member])
    assert not any(p.startswith("logs") for e in of_kind(member.snapshot(), "assigned")
                   for p in e["partitions"])


def test_close_makes_the_others_rebalance_without_waiting_for_the_session(make_broker) -> None:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, "handover", 4)
    everything = partition_names("handover", 4)
    # A session timeout far longer than the wait below: only LeaveGroup can explain a move.
    members = Members(broker.bootstrap, "closing", "--topics", "handover",
                      "--session-timeout-ms", "60000", "--heartbeat-interval-ms", "200")
    try:
        leaving, staying = members.start(), members.start()
        first = wait_for_ownership([leaving, staying], everything, timeout=30)
        leaving.terminate()  # SIGTERM: close() commits and sends LeaveGroup
        assert of_kind(leaving.snapshot(), "closed")
        generation = wait_for_ownership([staying], everything, timeout=15)
        assert generation > first
    finally:
        members.stop_all()
    assert (last_assignment(staying.snapshot()) or {})["generation"] == generation
