"""The chaos campaign's history checker: what a run recorded, held against what must hold.

One function per invariant; each returns the violations it found, every one with the history's
lines that show it, so a violation can be read without the run. What is legitimate but worth
watching (zombie windows, duplicates delivered to consumers) is counted as a figure. Both
producers are idempotent, so a value stored twice is a violation; ``--duplicates-counted``
counts them instead, for runs of producers that are not.

    python -m tests.chaos.checker RUN_DIR [--duplicates-counted] [--json]

prints the report and exits 1 when it holds a violation.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from tests.chaos.history import (
    Commit,
    Consumed,
    FinalLog,
    History,
    Owned,
    Record,
    TopicPartition,
    read_history,
    to_line,
)

#: the state a settled group is in: odradek's describe says Steady; Kafka's listener
#: translates it to Stable, and a run may describe its groups through either
SETTLED_STATES = frozenset({"Steady", "Stable"})


def evidence(record: Record) -> str:
    """A history line as evidence: its file and the line itself."""
    return f"{record.FILE}: {to_line(record)}"


@dataclass(frozen=True)
class Violation:
    """One broken invariant, said in a sentence, with the lines that show it."""

    invariant: str
    summary: str
    evidence: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "summary": self.summary,
                "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Report:
    """The violations found and the run's figures."""

    violations: tuple[Violation, ...]
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def render(self) -> str:
        """One paragraph per violation, its evidence indented under it, then the figures."""
        paragraphs = [
            "\n".join([f"VIOLATION {v.invariant}: {v.summary}",
                       *(f"    {line}" for line in v.evidence)])
            for v in self.violations
        ]
        verdict = "OK: no violations" if self.ok else f"{len(self.violations)} violation(s)"
        figures = "\n".join(f"  {name}: {_figure_text(value)}"
                            for name, value in self.figures.items())
        return "\n\n".join([*paragraphs, f"{verdict}\nfigures:\n{figures}"])

    def to_json(self) -> str:
        """The report as one JSON line, for a table of campaigns."""
        return json.dumps({"ok": self.ok,
                           "violations": [v.as_dict() for v in self.violations],
                           "figures": self.figures}, sort_keys=True)


def _figure_text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key}={count}" for key, count in sorted(value.items())) or "none"
    return str(value)


# --- the final logs, indexed ---------------------------------------------------------------


@dataclass(frozen=True)
class _Partition:
    """A final log looked up by offset."""

    log: FinalLog
    values: dict[int, str]

    def describe(self, offset: int) -> str:
        """What the final log holds at ``offset``, said for evidence."""
        if offset in self.values:
            return f"the final log holds {self.values[offset]!r} at offset {offset}"
        return (f"the final log has no record at offset {offset} "
                f"(it spans [{self.log.log_start_offset}, {self.log.high_watermark}))")


def _final_partitions(history: History) -> dict[TopicPartition, _Partition]:
    return {(log.topic, log.partition): _Partition(log, dict(log.records))
            for log in history.final_logs}


def _missing_partition(topic: str, partition: int) -> str:
    return f"final_logs.jsonl: no line for {topic}-{partition}"


# --- 1. acknowledged messages are in the final log -----------------------------------------


def acknowledged_lost(history: History, final: dict[TopicPartition, _Partition]
                      ) -> Iterator[Violation]:
    """An acknowledged send must be in the final log at its offset with its value: acks=all
    promised it survives any fault that leaves min.insync replicas."""
    for sent in history.produced:
        if not sent.acked:
            continue
        part = final.get((sent.topic, sent.partition))
        if part is None:
            yield Violation("acknowledged-lost",
                            f"acknowledged value {sent.value} of {sent.topic}-{sent.partition} "
                            "has no final log to be in",
                            (evidence(sent), _missing_partition(sent.topic, sent.partition)))
        elif sent.offset is None:
            if sent.value not in part.values.values():
                yield Violation("acknowledged-lost",
                                f"acknowledged value {sent.value} (no offset returned) is "
                                f"nowhere in {sent.topic}-{sent.partition}'s final log",
                                (evidence(sent),))
        elif sent.offset < part.log.log_start_offset:
            continue  # deleted by retention or DeleteRecords: counted, not verifiable
        elif part.values.get(sent.offset) != sent.value:
            yield Violation("acknowledged-lost",
                            f"acknowledged value {sent.value} is not at its offset "
                            f"{sent.offset} of {sent.topic}-{sent.partition}",
                            (evidence(sent), f"final_logs.jsonl: {part.describe(sent.offset)}"))


# --- 2. duplicates -------------------------------------------------------------------------


def stored_copies(history: History) -> dict[str, list[tuple[str, int, int]]]:
    """Where each value stored more than once is: ``value -> [(topic, partition, offset)]``."""
    places: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for log in history.final_logs:
        for offset, value in log.records:
            places[value].append((log.topic, log.partition, offset))
    return {value: where for value, where in places.items() if len(where) > 1}


def duplicates_stored(copies: dict[str, list[tuple[str, int, int]]]) -> Iterator[Violation]:
    """A value stored twice: a retried send written again, which the idempotent producers'
    numbering must prevent (a violation unless ``duplicates_fail`` is False)."""
    for value, where in sorted(copies.items()):
        places = ", ".join(f"{topic}-{partition}@{offset}" for topic, partition, offset in where)
        yield Violation("duplicate-stored", f"value {value} is stored {len(where)} times",
                        (f"final_logs.jsonl: {value!r} at {places}",))


# --- 3. replicas agree ---------------------------------------------------------------------


def replicas_differ(history: History) -> Iterator[Violation]:
    """Replicas of a partition must hold the same bytes below the high watermark: a consumer
    must read the same log whichever replica leads."""
    for verdict in history.replicas:
        if not verdict.agree:
            yield Violation("replicas-differ",
                            f"replicas of {verdict.topic}-{verdict.partition} differ below the "
                            f"high watermark: {verdict.first_difference}",
                            (evidence(verdict),))


# --- 4. committed offsets move forward -----------------------------------------------------


def commits_backwards(history: History) -> Iterator[Violation]:
    """A group's committed offset for a partition never goes back, taken in the order the
    commits were acknowledged: going back re-delivers what the group had processed, and
    means the coordinator took a commit from a member that no longer owned the partition."""
    last: dict[tuple[str, str, int], Commit] = {}
    for commit in sorted(history.commits, key=lambda c: c.t):
        key = (commit.group, commit.topic, commit.partition)
        previous = last.get(key)
        if previous is not None and commit.offset < previous.offset:
            yield Violation("commit-backwards",
                            f"group {commit.group}'s committed offset for "
                            f"{commit.topic}-{commit.partition} went back from "
                            f"{previous.offset} to {commit.offset}",
                            (evidence(previous), evidence(commit)))
        last[key] = commit


# --- 5. one owner per partition ------------------------------------------------------------


@dataclass(frozen=True)
class Ownership:
    """A member owning a partition from ``start`` until ``end``; ``line`` opened it."""

    member: str
    generation: int
    start: float
    end: float
    line: Owned


def ownership_intervals(owned: Iterable[Owned], run_end: float
                        ) -> dict[tuple[str, TopicPartition], list[Ownership]]:
    """Each (group, partition)'s owners over time. A member's line holds until its next line
    (an end line owns nothing), and its last line until the end of the run."""
    by_member: dict[tuple[str, str], list[Owned]] = defaultdict(list)
    for line in sorted(owned, key=lambda o: o.t):
        by_member[(line.group, line.member)].append(line)
    intervals: dict[tuple[str, TopicPartition], list[Ownership]] = defaultdict(list)
    for lines in by_member.values():
        ends = [following.t for following in lines[1:]] + [run_end]
        for line, end in zip(lines, ends, strict=True):
            for topic, partition in line.owned:
                intervals[(line.group, (topic, partition))].append(
                    Ownership(line.member, line.generation, line.t, end, line))
    return intervals


def _overlaps(owners: Sequence[Ownership]) -> Iterator[tuple[Ownership, Ownership]]:
    """Pairs of different members owning at once, the older generation (then start) first."""
    for a, b in combinations(owners, 2):
        if a.member != b.member and a.start < b.end and b.start < a.end:
            yield (a, b) if (a.generation, a.start) <= (b.generation, b.start) else (b, a)


def double_ownership(history: History, run_end: float) -> tuple[list[Violation], int]:
    """Two members of a group must not own a partition at once. Across generations an
    overlap can be a zombie window -- a member expelled before it learns of it, as in
    Kafka's classic protocol -- and is counted; it is a violation when both owners are in
    one generation, or when the older generation's owner had a commit for the partition
    acknowledged that it sent during the overlap (the coordinator must refuse a stale
    generation)."""
    commits: dict[tuple[str, str, TopicPartition], list[Commit]] = defaultdict(list)
    for commit in history.commits:
        commits[(commit.group, commit.member, (commit.topic, commit.partition))].append(commit)
    violations: list[Violation] = []
    zombie_windows = 0
    for (group, (topic, partition)), owners in sorted(
            ownership_intervals(history.owned, run_end).items()):
        for older, newer in _overlaps(owners):
            overlap = (max(older.start, newer.start), min(older.end, newer.end))
            lines = (evidence(older.line), evidence(newer.line))
            if older.generation == newer.generation:
                violations.append(Violation(
                    "double-ownership",
                    f"{older.member} and {newer.member} of group {group} both own "
                    f"{topic}-{partition} in generation {older.generation}", lines))
                continue
            # sent while the newer owner owned it: the coordinator took it after the newer
            # generation was formed (a commit sent before may have been taken before)
            stale = [c for c in commits[(group, older.member, (topic, partition))]
                     if c.generation < newer.generation
                     and overlap[0] <= (c.t if c.sent is None else c.sent) < overlap[1]]
            if stale:
                violations.append(Violation(
                    "double-ownership",
                    f"{older.member} (generation {older.generation}) had a commit for "
                    f"{topic}-{partition} acknowledged, sent while {newer.member} (generation "
                    f"{newer.generation}) owned it", lines + tuple(evidence(c) for c in stale)))
            else:
                zombie_windows += 1
    return violations, zombie_windows


# --- 6. groups settle ----------------------------------------------------------------------


def groups_unsettled(history: History) -> Iterator[Violation]:
    """Once the faults are over, every group returns to its settled state with exactly the
    members still alive, and consumes every partition to its end: a group stuck
    rebalancing, holding a dead member, or with a member that stopped fetching, stalls its
    partitions."""
    described = {outcome.group for outcome in history.groups}
    for group in sorted({line.group for line in history.owned} - described):
        yield Violation("group-unsettled", f"group {group} was not described at the end",
                        ("groups.jsonl: no line for this group",))
    for outcome in history.groups:
        if outcome.state not in SETTLED_STATES:
            yield Violation("group-unsettled",
                            f"group {outcome.group} ends {outcome.state}, not Steady",
                            (evidence(outcome),))
        elif sorted(outcome.members) != sorted(outcome.expected_members):
            yield Violation("group-unsettled",
                            f"group {outcome.group} ends with members {sorted(outcome.members)}"
                            f", expected {sorted(outcome.expected_members)}",
                            (evidence(outcome),))
        elif outcome.behind:
            stalled = ", ".join(f"{topic}-{partition} at {committed} of {end}"
                                for topic, partition, committed, end in outcome.behind)
            yield Violation("group-unsettled",
                            f"group {outcome.group} never consumed to the end: {stalled}",
                            (evidence(outcome),))


# --- 7. deliveries are of the final log ----------------------------------------------------


def delivered_not_in_log(history: History, final: dict[TopicPartition, _Partition]
                         ) -> Iterator[Violation]:
    """What a consumer was given must be what the final log holds at that offset: a delivery
    the log later lost (truncated, not re-delivered there) was read above the high watermark
    or from a replica that should not have led."""
    for delivery in history.consumed:
        part = final.get((delivery.topic, delivery.partition))
        if part is None:
            yield Violation("delivered-not-in-log",
                            f"value {delivery.value} was delivered from "
                            f"{delivery.topic}-{delivery.partition}, which has no final log",
                            (evidence(delivery),
                             _missing_partition(delivery.topic, delivery.partition)))
        elif (delivery.offset >= part.log.log_start_offset
              and part.values.get(delivery.offset) != delivery.value):
            yield Violation("delivered-not-in-log",
                            f"value {delivery.value} was delivered at offset {delivery.offset} "
                            f"of {delivery.topic}-{delivery.partition}, which the final log "
                            "does not hold there",
                            (evidence(delivery),
                             f"final_logs.jsonl: {part.describe(delivery.offset)}"))


# --- figures and the whole check -----------------------------------------------------------


def duplicates_delivered(consumed: Iterable[Consumed]) -> int:
    """Deliveries of a value its group had already been given (at-least-once redelivery)."""
    per_group = Counter((delivery.group, delivery.value) for delivery in consumed)
    return sum(count - 1 for count in per_group.values())


def acknowledged_below_log_start(history: History, final: dict[TopicPartition, _Partition]
                                 ) -> int:
    """Acknowledged sends deleted since (retention, DeleteRecords): not lost, not checkable."""
    return sum(1 for sent in history.produced
               if sent.acked and sent.offset is not None
               and (part := final.get((sent.topic, sent.partition))) is not None
               and sent.offset < part.log.log_start_offset)


def run_end(history: History) -> float:
    """The last time the history records: when ownership still held at the end stops."""
    times = [r.t for kind in (history.produced, history.consumed, history.owned,
                              history.commits, history.faults) for r in kind]
    return max(times, default=math.inf)


def metadata_stale(history: History) -> Iterator[Violation]:
    """Once healed, every broker's Metadata names the leaders ZooKeeper names: a broker that
    keeps an old leader sends its clients to a broker that refuses them, for as long as it
    keeps it."""
    for line in history.metadata:
        yield Violation(
            "metadata-stale",
            f"broker {line.broker} names broker {line.leader} (epoch {line.leader_epoch}) as "
            f"leader of {line.topic}-{line.partition}; ZooKeeper names broker "
            f"{line.zookeeper_leader} (epoch {line.zookeeper_leader_epoch})",
            (evidence(line),))


def check_history(history: History, *, duplicates_fail: bool = True) -> Report:
    """Every invariant over an in-memory history."""
    final = _final_partitions(history)
    copies = stored_copies(history)
    ownership_violations, zombie_windows = double_ownership(history, run_end(history))
    violations = [
        *acknowledged_lost(history, final),
        *(duplicates_stored(copies) if duplicates_fail else ()),
        *replicas_differ(history),
        *commits_backwards(history),
        *ownership_violations,
        *groups_unsettled(history),
        *delivered_not_in_log(history, final),
        *metadata_stale(history),
    ]
    figures = {
        "acknowledged": sum(sent.acked for sent in history.produced),
        "failed_sends": sum(not sent.acked for sent in history.produced),
        "deliveries": len(history.consumed),
        "duplicates_stored": sum(len(where) - 1 for where in copies.values()),
        "duplicates_delivered": duplicates_delivered(history.consumed),
        "zombie_windows": zombie_windows,
        "acknowledged_below_log_start": acknowledged_below_log_start(history, final),
        "replicas_unanswered": sum(bool(v.unanswered) for v in history.replicas),
        "faults_by_kind": dict(Counter(f.fault for f in history.faults if f.phase == "start")),
    }
    return Report(tuple(violations), figures)


def check(run_dir: Path, *, duplicates_fail: bool = True) -> Report:
    """Every invariant over a run's directory."""
    return check_history(read_history(run_dir), duplicates_fail=duplicates_fail)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.checker",
                                     description="Check a chaos run's recorded history.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--duplicates-counted", action="store_true",
                        help="a value stored twice is a figure, not a violation (producers "
                             "that are not idempotent)")
    parser.add_argument("--json", action="store_true", help="print the report as a JSON line")
    args = parser.parse_args(argv)
    if not args.run_dir.is_dir():
        parser.error(f"{args.run_dir} is not a directory")
    report = check(args.run_dir, duplicates_fail=not args.duplicates_counted)
    print(report.to_json() if args.json else report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
