"""Groups of Kafka's clients on odradek's coordinator (client-side assignment: the leader's
SyncGroup carries everyone's partitions).

Seed 001: "the consumer whose session expired is removed from the group and the coordinator
triggers a rebalance"; every message is processed, none lost after the last commit.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

import pytest

from client import Admin, NewTopic
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.kafka_clients.conftest import native_produce, unique_topic

PARTITIONS = 6
DEADLINE_S = 60.0


class Member:
    """One member process; what it has processed (and committed), read as it prints it."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.kafka_clients.members", client, bootstrap, group,
             topic], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _values(tag: str, start: int, count: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(start, start + count)]


def _produce_spread(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Round-robin over the partitions, so every member has work."""
    for partition in range(PARTITIONS):
        native_produce(bootstrap, topic, [(None, v) for v in values[partition::PARTITIONS]],
                       partition=partition)


def _wait_processed(members: list[Member], seen: dict[Member, set[str]], wanted: set[str],
                    what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        for member in members:
            while True:
                try:
                    seen[member].add(member.lines.get_nowait()["v"])
                except queue.Empty:
                    break
        done = set().union(*seen.values())
        if wanted <= done:
            return
        if time.monotonic() > deadline:
            missing = sorted(wanted - done)
            pytest.fail(f"{what}: {len(missing)} messages never processed, e.g. {missing[:5]}")
        time.sleep(0.05)


def _describe(kafka_broker: BrokerProcess, group: str) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "tooling.cli.main", "groups", "describe", group,
         "--bootstrap", kafka_broker.bootstrap, "--json"],
        capture_output=True, text=True, timeout=30, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert run.returncode == 0, run.stderr
    described: dict[str, Any] = json.loads(run.stdout)
    return described


def _wait_described(kafka_broker: BrokerProcess, group: str, members: int) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        described = _describe(kafka_broker, group)
        if described["state"] == "Steady" and len(described["members"]) == members:
            return described
        if time.monotonic() > deadline:
            pytest.fail(f"group {group} not Steady with {members} members: {described}")
        time.sleep(0.2)


def test_three_members_one_killed_every_message_processed(
        kafka_broker: BrokerProcess, kafka_client: str, tmp_path: Path) -> None:
    topic, group = unique_topic(f"group-{kafka_client}"), unique_topic(f"g-{kafka_client}")
    with Admin(kafka_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    first, second = _values("first", 0, 300), _values("second", 300, 300)
    _produce_spread(kafka_broker.bootstrap, topic, first)
    members = [Member(kafka_client, kafka_broker.kafka_bootstrap, group, topic)
               for _ in range(3)]
    seen: dict[Member, set[str]] = {m: set() for m in members}
    try:
        _wait_processed(members, seen, {v.decode() for v in first}, "before the kill")
        described = _wait_described(kafka_broker, group, 3)
        owned = sorted((a["topic"], a["partition"]) for m in described["members"]
                       for a in m["assignment"])
        assert owned == [(topic, p) for p in range(PARTITIONS)], described  # each once
        members[0].kill()
        _produce_spread(kafka_broker.bootstrap, topic, second)
        _wait_processed(members[1:], seen, {v.decode() for v in first + second},
                        "after one member was killed")
        described = _wait_described(kafka_broker, group, 2)
        assert sorted((a["topic"], a["partition"]) for m in described["members"]
                      for a in m["assignment"]) == owned
        ends = {o["partition"]: o["log_end_offset"] for o in described["offsets"]}
        assert ends == dict.fromkeys(range(PARTITIONS), 100), described["offsets"]
        lost = {v.decode() for v in first + second} - set().union(*seen.values())
        print(f"{kafka_client}: group of 3, one SIGKILLed: produced={len(first + second)} "
              f"lost={len(lost)}")
        assert not lost
    finally:
        for member in members:
            member.stop()
