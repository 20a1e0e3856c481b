"""SIGTERM -- what ``kill``, systemd and container runtimes send -- stops the long-running
``odradek`` commands the way Ctrl-C does. ``consume --group`` commits what it printed, leaves
its group at once (not after its session expires) and prints its summary; ``produce`` sends
what it read and reports it; ``demo`` stops everything it started.

Each command runs as a process of its own (a signal is sent to a PID), its output read by
threads and waited for with deadlines; everything is stopped by PID at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from client import LATEST, Admin, Consumer, TopicPartition
from client.group_admin import GroupAdmin
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.groups.support import GROUP_BROKER_SETTINGS, create_topic, produce

pytestmark = pytest.mark.integration

STOP_TIMEOUT = 20.0


class CliProcess:
    """``python -m tooling.cli ARGV`` with its stdout and stderr lines collected by threads."""

    def __init__(
        self, *argv: str, stdin: int = subprocess.DEVNULL, tmp_dir: Path | None = None
    ) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
        if tmp_dir is not None:
            env["TMPDIR"] = str(tmp_dir)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tooling.cli", *argv], stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = threading.Condition()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump(self, stream: IO[str], lines: list[str]) -> None:
        for line in stream:
            with self._changed:
                lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[str]], bool], what: str,
                 timeout: float = 30.0) -> list[str]:
        """Wait until ``predicate(stdout lines)`` holds; fails naming ``what``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.out):
                left = deadline - time.monotonic()
                if left <= 0 or not self._threads[0].is_alive():
                    raise AssertionError(
                        f"{what} not seen in {timeout} s; exit {self.proc.poll()}\n"
                        + "\n".join(self.out[-10:] + self.err[-40:])
                    )
                self._changed.wait(min(left, 0.5))
            return list(self.out)

    def finish(self) -> int:
        """Wait for the process to end by itself and its output to be read; its exit status."""
        status = self.proc.wait(STOP_TIMEOUT)
        for thread in self._threads:
            thread.join(STOP_TIMEOUT)
        return status

    def stop(self) -> None:
        """SIGKILL by PID if it still runs (a test that failed half-way)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def group_broker(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return make_broker(settings=GROUP_BROKER_SETTINGS)


@pytest.fixture
def bootstrap(group_broker: BrokerProcess) -> str:
    return group_broker.bootstrap


@pytest.fixture
def started() -> Iterator[list[CliProcess]]:
    """The CLI processes a test starts; killed by PID at the end if still running."""
    processes: list[CliProcess] = []
    yield processes
    for process in processes:
        process.stop()


def _committed(admin: GroupAdmin, group: str) -> dict[TopicPartition, int]:
    return {tp: c.offset for tp, c in admin.committed_offsets(group).items()}


@pytest.mark.parametrize(
    ("signum", "commit"),
    [
        (signal.SIGTERM, "auto"),  # nothing committed yet: the final commit is close()'s
        (signal.SIGTERM, "sync"),  # committed as a member: only LeaveGroup removes it now
        (signal.SIGTERM, "async"),
        (signal.SIGINT, "auto"),   # Ctrl-C: the same path
    ],
    ids=lambda v: getattr(v, "name", v),
)
def test_a_stopped_group_consumer_commits_leaves_and_reports(
    group_broker: BrokerProcess, bootstrap: str, started: list[CliProcess],
    signum: signal.Signals, commit: str,
) -> None:
    create_topic(bootstrap, "events", 3)
    produce(bootstrap, "events", [f"event {i}" for i in range(30)])
    consumer = CliProcess("consume", "events", "--group", "watchers", "--from-beginning",
                          "--json", "--commit", commit, "--bootstrap", bootstrap)
    started.append(consumer)
    lines = consumer.wait_for(lambda out: len(out) >= 30, "30 records printed")
    printed = [json.loads(line) for line in lines]
    consumed: dict[TopicPartition, int] = {}  # next offset to read: what must be committed
    for record in printed:
        tp = TopicPartition(record["topic"], record["partition"])
        consumed[tp] = max(consumed.get(tp, 0), record["offset"] + 1)
    with GroupAdmin(bootstrap) as admin:
        if commit != "auto":
            # A commit with its member id: the coordinator now keeps the member after its
            # connection closes, until it leaves or its session (10 s) expires.
            deadline = time.monotonic() + 30
            while _committed(admin, "watchers") != consumed:
                assert time.monotonic() < deadline, "its commits never arrived"

        consumer.proc.send_signal(signum)
        status = consumer.finish()

        group = admin.describe_group("watchers")
        committed = _committed(admin, "watchers")
    assert status == 0, "\n".join(consumer.err)
    assert consumer.err[-1:] == ["processed 30 messages"]
    assert (group.state, len(group.members)) == ("Empty", 0)
    assert committed == consumed
    # it left (LeaveGroup): the coordinator did not have to expire it after its session
    moves = [line for line in group_broker.log_text().splitlines()
             if "event='group_transition' group='watchers'" in line]
    assert any("LeaveGroup" in line for line in moves), moves
    assert not any("silent for" in line for line in moves), moves


def test_a_stopped_producer_sends_what_it_read_and_reports(
    bootstrap: str, started: list[CliProcess]
) -> None:
    create_topic(bootstrap, "notes", 1)
    # linger 0: a line that starts a batch goes out at once, so the broker shows it is running
    producer = CliProcess("produce", "notes", "--linger-ms", "0", "--bootstrap", bootstrap,
                          stdin=subprocess.PIPE)
    started.append(producer)
    stdin = producer.proc.stdin
    assert stdin is not None
    stdin.write("one\ntwo\nthree\n")  # and stdin stays open: it goes on reading
    stdin.flush()
    tp = TopicPartition("notes", 0)
    with Consumer(bootstrap, auto_offset_reset="earliest") as reader:
        reader.assign([tp])
        deadline = time.monotonic() + 30
        while not reader.poll(timeout_ms=200):
            assert time.monotonic() < deadline, "nothing produced"

    producer.proc.send_signal(signal.SIGTERM)
    status = producer.finish()

    assert status == 128 + signal.SIGTERM, "\n".join(producer.err)
    summary = re.fullmatch(r"sent (\d) messages to 'notes' in [\d.]+ s \([\d,]+ msgs/s\)",
                           producer.err[0])
    assert summary and len(producer.err) == 1, producer.err
    # Every line it counted as sent was acknowledged, so it is stored; nothing else is.
    with Admin(bootstrap) as admin:
        end = admin.list_offsets({tp: LATEST})[tp].offset
    assert end == int(summary[1]) >= 1


def _children(pid: int) -> set[int]:
    """The PIDs of the processes whose parent is ``pid`` (Linux: /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_stopped_demo_stops_everything_it_started(
    tmp_path: Path, started: list[CliProcess]
) -> None:
    demo = CliProcess("demo", "--phase-seconds", "60", tmp_dir=tmp_path)
    started.append(demo)
    children: set[int] = set()
    try:
        lines = demo.wait_for(
            lambda out: sum("-> Part of a group" in line for line in out) >= 3,
            "three consumers in the group", timeout=60,
        )
        children = _children(demo.proc.pid)
        assert len(children) == 4  # the broker and three consumers
        broker = re.search(r"broker started in (\S+) \(pid (\d+)\)", "\n".join(lines))
        assert broker, lines
        assert int(broker[2]) in children

        demo.proc.send_signal(signal.SIGTERM)
        status = demo.finish()

        assert status == 128 + signal.SIGTERM, "\n".join(demo.out + demo.err)
        assert "broker stopped" in demo.out[-1]
        assert not os.path.exists(broker[1])
        assert not [pid for pid in children if _alive(pid)]
    finally:
        for pid in children:
            if _alive(pid):  # left behind (the test failed): stop it by its PID
                os.kill(pid, signal.SIGKILL)
