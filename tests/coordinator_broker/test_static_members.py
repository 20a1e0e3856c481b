"""Static membership (KIP-345) end to end: real Consumers with a group_instance_id against a
broker process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from client import Admin, Consumer, ConsumerRebalanceListener, TopicPartition
from client.group_admin import GroupAdmin
from protocol.errors import FencedInstanceIdError

pytestmark = pytest.mark.integration


class Told(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked: list[list[TopicPartition]] = []
        self.assigned: list[list[TopicPartition]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.revoked.append(revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.assigned.append(assigned)


def poll_until(consumers: list[Consumer], condition: Callable[[], Any], what: str,
               timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        for consumer in consumers:
            consumer.poll(50)


def member(broker, instance: str, listener: Told | None = None,
           session_timeout_ms: int = 10_000) -> Consumer:
    consumer = Consumer(broker.bootstrap, group_id="static", group_instance_id=instance,
                        session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=500,
                        auto_offset_reset="earliest")
    consumer.subscribe(["t"], listener=listener)
    return consumer


def test_a_restarted_static_member_takes_its_partitions_back_without_a_rebalance(
        broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t", 4)
    told_b = Told()
    a, b = member(broker, "a"), member(broker, "b", told_b)
    try:
        poll_until([a, b], lambda: len(a.assignment()) + len(b.assignment()) == 4
                   and a.generation == b.generation, "a steady group of two")
        generation, owned = a.generation, a.assignment()
        revocations = len(told_b.revoked)
        a.close()  # a static member's LeaveGroup keeps its place
        again = member(broker, "a")
        try:
            poll_until([again, b], lambda: again.assignment() == owned, "a's partitions back")
            assert again.generation == generation
            for _ in range(10):  # b keeps going, never told to rebalance
                b.poll(50)
                again.poll(50)
            assert b.generation == generation and len(told_b.revoked) == revocations
            with GroupAdmin(broker.bootstrap) as admin:
                described = admin.describe_group("static")
            assert sorted(m.instance_id for m in described.members) == ["a", "b"]
            assert described.generation == generation
        finally:
            again.close()
    finally:
        b.close()


def test_a_second_process_with_the_same_instance_fences_the_first(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t", 2)
    first = member(broker, "solo")
    try:
        poll_until([first], lambda: len(first.assignment()) == 2, "the first member's join")
        second = member(broker, "solo")
        try:
            poll_until([second], lambda: len(second.assignment()) == 2, "the second's join")
            with pytest.raises(FencedInstanceIdError):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    first.poll(100)
            assert len(second.assignment()) == 2
        finally:
            second.close()
    finally:
        first.close()


def test_an_admin_removes_a_static_member_at_once(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t", 2)
    # a session longer than the test's deadline: the partitions can only move by the removal
    gone = member(broker, "gone", session_timeout_ms=120_000)
    stays = member(broker, "stays", session_timeout_ms=120_000)
    try:
        poll_until([gone, stays], lambda: len(gone.assignment()) == 1
                   and len(stays.assignment()) == 1, "a group of two")
        gone.close()
        with GroupAdmin(broker.bootstrap) as admin:
            assert admin.remove_members("static", ["gone"]) == {"gone": None}
        poll_until([stays], lambda: len(stays.assignment()) == 2, "the partitions moved")
    finally:
        stays.close()


def test_the_cli_shows_instance_ids_and_removes_members(broker) -> None:
    def odradek(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tooling.cli", *args, "--bootstrap",
                               broker.bootstrap], capture_output=True, text=True, timeout=60)

    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t", 2)
    one = member(broker, "one", session_timeout_ms=120_000)
    try:
        poll_until([one], lambda: len(one.assignment()) == 2, "the member's join")
        described = odradek("groups", "describe", "static", "--members", "--json")
        assert [m["instance_id"] for m in json.loads(described.stdout)] == ["one"]
        one.close()  # kept: a static member's leave
        removed = odradek("groups", "remove-members", "static", "--instance-id", "one",
                          "--instance-id", "two", "--json")
        assert removed.returncode == 1  # "two" is no member
        results = json.loads(removed.stdout)
        assert results["one"] is None and "two" in results["two"]
        state = json.loads(odradek("groups", "describe", "static", "--state", "--json").stdout)
        assert state["member_count"] == 0
    finally:
        one.close()
