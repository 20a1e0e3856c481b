"""Group members as processes (``tests/groups/member.py``) and what tests check about them.

``MemberProcess`` starts one member, collects the JSON events it prints, and waits for a
condition with a deadline; it is stopped by its PID only (SIGTERM for a clean close, SIGKILL for
a crash). ``Ledger`` reads the events of every member of a test: what was consumed, who owned
which partitions in which generation, and which records were never covered by a commit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

from client import Admin, Producer
from tests.broker_process import REPO_ROOT

STOP_TIMEOUT = 20.0

#: broker settings for group tests: short sessions are allowed
GROUP_BROKER_SETTINGS = {"group_min_session_timeout_ms": 200}

Event = dict[str, Any]


class MemberProcess:
    def __init__(self, name: str, bootstrap: str, group: str, *args: str) -> None:
        self.name = name
        command = [
            sys.executable, "-m", "tests.groups.member",
            "--bootstrap", bootstrap, "--group", group, *args,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=REPO_ROOT,
        )
        self.events: list[Event] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._pump, args=(self._proc.stdout, True), daemon=True),
            threading.Thread(target=self._pump, args=(self._proc.stderr, False), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _pump(self, stream: IO[str], is_stdout: bool) -> None:
        for line in stream:
            with self._changed:
                if is_stdout:
                    self.events.append(json.loads(line))
                else:
                    self.stderr.append(line)
                self._changed.notify_all()

    def snapshot(self) -> list[Event]:
        with self._changed:
            return list(self.events)

    def wait_for(
        self, predicate: Callable[[list[Event]], bool], what: str, timeout: float = 30.0
    ) -> list[Event]:
        """Wait until ``predicate(events)`` holds; the events then. Fails naming ``what``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.events):
                left = deadline - time.monotonic()
                if left <= 0 or (self._proc.poll() is not None and not self._pumping()):
                    raise AssertionError(
                        f"{self.name}: {what} not seen in {timeout} s; exit "
                        f"{self._proc.poll()}; last events {self.events[-5:]}\n"
                        f"{''.join(self.stderr[-40:])}"
                    )
                self._changed.wait(min(left, 0.5))
            return list(self.events)

    def _pumping(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def signal(self, signum: int) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self._reap()

    def terminate(self) -> None:
        """SIGTERM: the member closes (commits, leaves the group) and exits."""
        self.signal(signal.SIGTERM)
        self._reap()

    def _reap(self) -> None:
        try:
            self._proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(STOP_TIMEOUT)
        for thread in self._threads:
            thread.join(STOP_TIMEOUT)


class Members:
    """Every member a test started; all are killed by PID at the end."""

    def __init__(self, bootstrap: str, group: str, *args: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.args = args
        self.started: list[MemberProcess] = []

    def start(self, *extra: str) -> MemberProcess:
        member = MemberProcess(
            f"member-{len(self.started)}", self.bootstrap, self.group, *self.args, *extra
        )
        self.started.append(member)
        return member

    def stop_all(self) -> None:
        for member in self.started:
            member.kill()


# ------------------------------------------------------------------------------- events


def of_kind(events: Iterable[Event], kind: str) -> list[Event]:
    return [e for e in events if e["event"] == kind]


def last_assignment(events: Sequence[Event]) -> Event | None:
    assigned = of_kind(events, "assigned")
    return assigned[-1] if assigned else None


def owns(events: Sequence[Event]) -> set[str]:
    """The partitions a member owns now: as its last assignment or revocation left them."""
    owned: set[str] = set()
    for event in events:
        if event["event"] == "assigned":
            owned = set(event["partitions"])
        elif event["event"] == "revoked":
            owned = set(event["owned"])
        elif event["event"] == "closed":
            owned = set()
    return owned


def wait_for_ownership(
    members: Sequence[MemberProcess], partitions: set[str], timeout: float
) -> int:
    """Wait until ``members`` own ``partitions`` between them, disjointly and in one
    generation; that generation."""
    deadline = time.monotonic() + timeout
    while True:
        views = [m.snapshot() for m in members]
        owned = [owns(v) for v in views]
        generations = {e["generation"] for v in views if (e := last_assignment(v)) is not None}
        union = set().union(*owned)
        if (
            union == partitions
            and sum(map(len, owned)) == len(partitions)
            and len(generations) == 1
            and all(owns(v) == set((last_assignment(v) or {}).get("partitions", ()))
                    for v in views)
        ):
            return generations.pop()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"members did not come to own {sorted(partitions)} in one generation within "
                f"{timeout} s: owned {[sorted(o) for o in owned]}, generations {generations}"
            )
        time.sleep(0.05)


class Ledger:
    """What every member of a test consumed and owned, from their events."""

    def __init__(self, members: Iterable[MemberProcess]) -> None:
        self.events = {m.name: m.snapshot() for m in members}

    def values(self) -> Counter[str]:
        return Counter(
            value
            for events in self.events.values()
            for e in of_kind(events, "records")
            for _, _, value in e["records"]
        )

    def uncommitted(self) -> set[str]:
        """Values in batches that no successful commit covered: a batch whose commit failed,
        or the batches after a member's last commit (a member killed mid-way). Only these
        may be delivered again."""
        out: set[str] = set()
        for events in self.events.values():
            pending: list[str] = []
            for e in events:
                if e["event"] == "records":
                    pending += [value for _, _, value in e["records"]]
                elif e["event"] == "committed":
                    pending = []
                elif e["event"] == "commit_failed":
                    out.update(pending)
                    pending = []
            out.update(pending)
        return out

    def assignments_by_generation(self) -> dict[int, list[tuple[str, list[str]]]]:
        by_generation: dict[int, list[tuple[str, list[str]]]] = defaultdict(list)
        for events in self.events.values():
            for e in of_kind(events, "assigned"):
                by_generation[e["generation"]].append((e["member"], e["partitions"]))
        return dict(by_generation)

    def check_disjoint_per_generation(self) -> None:
        for generation, owners in self.assignments_by_generation().items():
            seen: dict[str, str] = {}
            for member, partitions in owners:
                for p in partitions:
                    assert p not in seen or seen[p] == member, (
                        f"generation {generation}: {p} owned by {seen[p]} and {member}"
                    )
                    seen[p] = member

    def check_complete(self, expected: Iterable[str]) -> int:
        """Every expected value was consumed; duplicates only among uncommitted records.
        Returns the number of duplicate deliveries."""
        counts = self.values()
        missing = [v for v in expected if v not in counts]
        assert not missing, f"{len(missing)} messages never consumed, e.g. {missing[:10]}"
        duplicates = {v: n - 1 for v, n in counts.items() if n > 1}
        window = self.uncommitted()
        outside = sorted(set(duplicates) - window)
        assert not outside, f"delivered twice although committed: {outside[:10]}"
        total = sum(duplicates.values())
        assert total <= len(window), (total, len(window))
        return total


# ------------------------------------------------------------------------------- topics


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions)


def produce(bootstrap: str, topic: str, values: Iterable[str]) -> None:
    """Send each value (as its own key too, so values spread over partitions) and wait."""
    with Producer(bootstrap, linger_ms=5) as producer:
        for value in values:
            producer.send(topic, value.encode(), key=value.encode())
        producer.flush()


def partition_names(topic: str, count: int) -> set[str]:
    return {f"{topic}-{p}" for p in range(count)}
