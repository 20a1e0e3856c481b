"""The campaign's clients, each in a process of its own so a fault can kill it: producers of
uniquely numbered messages (tests/chaos/producer.py, and librdkafka's through the Kafka
listeners: tests/chaos/kafka_producer.py) and the members of two consumer groups
(tests/groups/member.py; one group commits after each batch, the other every 500 ms by
auto-commit). Every client appends what it did to a file of its own in the run directory;
``write_history`` turns those files into the history the checker reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.broker_process import REPO_ROOT
from tests.chaos.history import Commit, Consumed, Owned, Produced, write_records
from tests.groups.support import MemberProcess

#: each producer's values start at its index times this, so every value is unique in a run
VALUES_PER_PRODUCER = 1_000_000_000
#: the groups: name -> how the members commit
GROUPS = {"manual": "sync", "auto": "auto"}
STOP_TIMEOUT = 180.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


@dataclass
class ProducerProcess:
    name: str
    out: Path
    proc: subprocess.Popen[bytes]
    kafka: bool  # librdkafka through the Kafka listeners

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(STOP_TIMEOUT)

    def stop(self) -> None:
        """SIGTERM: stop sending, settle what is in flight, exit."""
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class Member:
    """One member process of a group, and the file its events are appended to."""

    name: str
    group: str
    out: Path
    process: MemberProcess
    ended: str | None = None  # "killed" / "closed", with when
    ended_at: float = 0.0


@dataclass
class Workload:
    """Every client process of a run. ``bootstrap`` lists every broker."""

    run_dir: Path
    bootstrap: str
    topic: str
    kafka_bootstrap: str | None = None  # the Kafka listeners, for librdkafka producers
    rate: float = 100.0
    producers: list[ProducerProcess] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)

    # ----------------------------------------------------------------------- producers

    def start_producer(self, kafka: bool = False) -> ProducerProcess:
        """A native producer, or (``kafka``) librdkafka through the Kafka listeners."""
        index = len(self.producers)
        name = f"{'k' if kafka else 'p'}{index}"
        out = self.run_dir / "clients" / f"producer-{name}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        module, bootstrap = "tests.chaos.producer", self.bootstrap
        if kafka:
            assert self.kafka_bootstrap is not None, "no Kafka listeners"
            module, bootstrap = "tests.chaos.kafka_producer", self.kafka_bootstrap
        stderr = open(out.with_suffix(".log"), "ab")  # noqa: SIM115 -- the child holds it
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--bootstrap", bootstrap, "--topic", self.topic,
             "--name", name, "--first", str(index * VALUES_PER_PRODUCER),
             "--rate", str(self.rate), "--out", str(out)],
            stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=_env(), cwd=REPO_ROOT)
        stderr.close()
        producer = ProducerProcess(name, out, proc, kafka)
        self.producers.append(producer)
        return producer

    def live_producers(self) -> list[ProducerProcess]:
        return [p for p in self.producers if p.running]

    # ------------------------------------------------------------------------- members

    def start_member(self, group: str) -> Member:
        name = f"{group}-m{sum(m.group == group for m in self.members)}"
        out = self.run_dir / "clients" / f"member-{name}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        process = MemberProcess(
            name, self.bootstrap, group, "--topics", self.topic, "--commit", GROUPS[group],
            "--session-timeout-ms", "6000", "--heartbeat-interval-ms", "500",
            "--request-timeout-ms", "10000", "--metadata-max-age-ms", "2000",
            "--out", str(out), "--log")
        member = Member(name, group, out, process)
        self.members.append(member)
        return member

    def live_members(self, group: str | None = None) -> list[Member]:
        return [m for m in self.members
                if m.ended is None and (group is None or m.group == group)]

    def kill_member(self, member: Member) -> None:
        member.process.kill()
        member.ended, member.ended_at = "killed", time.monotonic()

    def close_member(self, member: Member) -> None:
        member.process.terminate()
        member.ended, member.ended_at = "closed", time.monotonic()

    def stop_everything(self) -> None:
        for producer in self.producers:
            producer.kill()
        for member in self.members:
            member.process.kill()


# ------------------------------------------------------------------------------ the history

def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The whole lines of a client's file (a killed client may have left half of one)."""
    if not path.exists():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue


def _split(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("-")
    return topic, int(partition)


def member_history(member: Member) -> dict[str, list[dict[str, Any]]]:
    """A member's events as the history's consumed, owned and commits lines."""
    consumed: list[dict[str, Any]] = []
    owned: list[dict[str, Any]] = []
    commits: list[dict[str, Any]] = []
    holding: set[str] = set()
    member_id = member.name
    base = {"group": member.group, "member": member.name}
    for event in _lines(member.out):
        kind = event.get("event")
        if kind == "assigned":
            member_id = event.get("member") or member_id
            holding = set(event["partitions"])
            owned.append({**base, "t": event["t"], "generation": event["generation"],
                          "owned": [list(_split(k)) for k in sorted(holding)]})
        elif kind == "revoked":
            holding -= set(event["partitions"])
            owned.append({**base, "t": event["t"], "generation": event["generation"],
                          "owned": [list(_split(k)) for k in sorted(holding)]})
        elif kind == "records":
            for key, offset, value in event["records"]:
                topic, partition = _split(key)
                consumed.append({**base, "t": event["t"], "generation": event["generation"],
                                 "topic": topic, "partition": partition, "offset": offset,
                                 "value": value})
        elif kind == "committed":
            for key, offset in event["offsets"].items():
                topic, partition = _split(key)
                commits.append({**base, "t": event["t"], "sent": event.get("sent"),
                                "generation": event["generation"], "topic": topic,
                                "partition": partition, "offset": offset})
    if member.ended is not None:
        owned.append({**base, "t": member.ended_at, "generation": -1, "owned": [],
                      "ended": member.ended})
    return {"consumed": consumed, "owned": owned, "commits": commits}


def last_member_id(member: Member) -> str | None:
    """The member id the coordinator last gave the member (its last assignment's)."""
    ids = [e["member"] for e in member.process.snapshot() if e.get("event") == "assigned"]
    return ids[-1] if ids else None


def write_history(workload: Workload) -> None:
    """produced.jsonl, consumed.jsonl, owned.jsonl and commits.jsonl in the run directory,
    each in time order, from the clients' own files."""
    kinds: dict[str, list[dict[str, Any]]] = {"consumed": [], "owned": [], "commits": []}
    for member in workload.members:
        for kind, lines in member_history(member).items():
            kinds[kind] += lines
    for member in workload.members:  # what the client logged, to read beside the history
        member.out.with_suffix(".log").write_text("".join(member.process.stderr))
    kinds["produced"] = [line for p in workload.producers for line in _lines(p.out)]
    run_dir = workload.run_dir
    for line in kinds["owned"]:
        line["owned"] = tuple(map(tuple, line["owned"]))
    for lines in kinds.values():
        lines.sort(key=lambda line: float(line["t"]))
    write_records(run_dir / Produced.FILE, [Produced(**line) for line in kinds["produced"]])
    write_records(run_dir / Consumed.FILE, [Consumed(**line) for line in kinds["consumed"]])
    write_records(run_dir / Owned.FILE, [Owned(**line) for line in kinds["owned"]])
    write_records(run_dir / Commit.FILE, [Commit(**line) for line in kinds["commits"]])
