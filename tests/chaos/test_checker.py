"""The history checker, fed synthetic histories: a clean one passes, and each violation planted
alone is found, with its evidence, and nothing else is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from itertools import count
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.chaos.checker import Report, check, check_history, main
from tests.chaos.history import (
    Commit,
    Consumed,
    Fault,
    FinalLog,
    GroupOutcome,
    History,
    Owned,
    Produced,
    ReplicaVerdict,
    StaleMetadata,
    from_line,
    read_history,
    to_line,
    write_history,
)

TOPIC = "t"
GROUP = "g"
MEMBERS = ("m0", "m1")


def clean_history(sends: Sequence[int] = (6, 5), consumed: Sequence[int] = (4, 3),
                  generations: int = 2, failed_sends: int = 1) -> History:
    """A run where everything holds: ``sends[p]`` acknowledged sends to partition ``p``, the
    first ``consumed[p]`` of them delivered, a chunk per generation, each chunk committed by
    the partition's owner in that generation; eager rebalances (everything revoked before the
    next generation is assigned); the group ends Steady with both members."""
    clock = count(1.0)
    values = count()
    produced: list[Produced] = []
    logs: list[FinalLog] = []
    for partition, n in enumerate(sends):
        acked = [Produced(t=next(clock), producer="p0", topic=TOPIC, partition=partition,
                          value=str(next(values)), acked=True, offset=offset)
                 for offset in range(n)]
        produced += acked
        logs.append(FinalLog(topic=TOPIC, partition=partition, log_start_offset=0,
                             high_watermark=n, records=tuple((s.offset or 0, s.value)
                                                             for s in acked)))
    produced += [Produced(t=next(clock), producer="p0", topic=TOPIC, partition=0,
                          value=str(next(values)), acked=False, error="NOT_ENOUGH_REPLICAS")
                 for _ in range(failed_sends)]
    owned: list[Owned] = []
    deliveries: list[Consumed] = []
    commits: list[Commit] = []
    position = [0] * len(sends)
    for generation in range(1, generations + 1):
        owner = {p: MEMBERS[(p + generation) % len(MEMBERS)] for p in range(len(sends))}
        owned += [Owned(t=next(clock), group=GROUP, member=member, generation=generation,
                        owned=tuple((TOPIC, p) for p, o in owner.items() if o == member))
                  for member in MEMBERS]
        for p, member in owner.items():
            upto = consumed[p] if generation == generations else consumed[p] * generation // (
                generations + 1)
            for offset in range(position[p], upto):
                deliveries.append(Consumed(t=next(clock), group=GROUP, member=member,
                                           generation=generation, topic=TOPIC, partition=p,
                                           offset=offset, value=logs[p].records[offset][1]))
            if upto > position[p]:
                commits.append(Commit(t=next(clock), group=GROUP, member=member,
                                      generation=generation, topic=TOPIC, partition=p,
                                      offset=upto))
                position[p] = upto
        if generation < generations:
            owned += [Owned(t=next(clock), group=GROUP, member=member, generation=generation,
                            owned=()) for member in MEMBERS]
    faults = (Fault(t=1.5, fault="kill", target="broker-1", phase="start", detail="SIGKILL"),
              Fault(t=2.5, fault="kill", target="broker-1", phase="end"))
    return History(
        produced=tuple(produced), consumed=tuple(deliveries), owned=tuple(owned),
        commits=tuple(commits), faults=faults, final_logs=tuple(logs),
        replicas=tuple(ReplicaVerdict(topic=TOPIC, partition=p, agree=True)
                       for p in range(len(sends))),
        groups=(GroupOutcome(group=GROUP, state="Steady", generation=generations,
                             members=MEMBERS, expected_members=MEMBERS),))


def only(report: Report, invariant: str) -> list[str]:
    """The one violation a planted history must give: its invariant, and its evidence."""
    assert [v.invariant for v in report.violations] == [invariant], report.render()
    return list(report.violations[0].evidence)


def with_final_log(history: History, log: FinalLog) -> History:
    """``history`` with the final log of ``log``'s partition replaced by it."""
    return replace(history, final_logs=tuple(
        log if (old.topic, old.partition) == (log.topic, log.partition) else old
        for old in history.final_logs))


def unconsumed_acked(history: History) -> Produced:
    """An acknowledged send no consumer was given: losing it breaks one invariant only."""
    delivered = {d.value for d in history.consumed}
    return next(s for s in history.produced if s.acked and s.value not in delivered)


def test_a_clean_history_passes_with_its_figures() -> None:
    report = check_history(clean_history())
    assert report.ok, report.render()
    assert report.figures == {
        "acknowledged": 11, "failed_sends": 1, "deliveries": 7, "duplicates_stored": 0,
        "duplicates_delivered": 0, "zombie_windows": 0, "acknowledged_below_log_start": 0,
        "replicas_unanswered": 0, "faults_by_kind": {"kill": 1}}
    assert report.render().startswith("OK: no violations")


def test_an_acknowledged_message_missing_from_the_log_is_found() -> None:
    history = clean_history()
    lost = unconsumed_acked(history)
    log = history.final_logs[lost.partition]
    truncated = replace(log, records=tuple(r for r in log.records if r[1] != lost.value))
    evidence = only(check_history(with_final_log(history, truncated)), "acknowledged-lost")
    assert evidence == [f"produced.jsonl: {to_line(lost)}",
                        f"final_logs.jsonl: the final log has no record at offset {lost.offset} "
                        f"(it spans [0, {log.high_watermark}))"]


def test_an_acknowledged_offset_holding_another_value_is_found() -> None:
    history = clean_history()
    lost = unconsumed_acked(history)
    assert lost.offset is not None
    log = history.final_logs[lost.partition]
    overwritten = replace(log, records=tuple(
        (offset, "other" if offset == lost.offset else value) for offset, value in log.records))
    evidence = only(check_history(with_final_log(history, overwritten)), "acknowledged-lost")
    assert evidence[1] == f"final_logs.jsonl: the final log holds 'other' at offset {lost.offset}"


def test_a_failed_send_missing_from_the_log_is_no_violation() -> None:
    history = clean_history(failed_sends=3)
    assert check_history(history).ok


def test_an_acknowledged_message_deleted_from_the_log_start_is_counted_not_failed() -> None:
    history = clean_history(consumed=(0, 0))
    log = history.final_logs[0]
    trimmed = replace(log, log_start_offset=2, records=log.records[2:])
    report = check_history(with_final_log(history, trimmed))
    assert report.ok, report.render()
    assert report.figures["acknowledged_below_log_start"] == 2


def test_a_value_stored_twice_fails_unless_only_counted() -> None:
    history = clean_history()
    log = history.final_logs[1]
    again = log.records[-1][1]
    doubled = replace(log, high_watermark=log.high_watermark + 1,
                      records=(*log.records, (log.high_watermark, again)))
    planted = with_final_log(history, doubled)
    counted = check_history(planted, duplicates_fail=False)
    assert counted.ok and counted.figures["duplicates_stored"] == 1
    evidence = only(check_history(planted), "duplicate-stored")
    assert evidence == [f"final_logs.jsonl: {again!r} at t-1@{log.high_watermark - 1}, "
                        f"t-1@{log.high_watermark}"]


def test_replicas_that_differ_are_found() -> None:
    history = clean_history()
    verdict = ReplicaVerdict(topic=TOPIC, partition=1, agree=False,
                             first_difference="offset 3: broker 2's CRC 0x1f != broker 1's 0x2e")
    planted = replace(history, replicas=(history.replicas[0], verdict))
    report = check_history(planted)
    assert only(report, "replicas-differ") == [f"replicas.jsonl: {to_line(verdict)}"]
    assert "broker 2's CRC" in report.violations[0].summary


def test_replicas_that_did_not_answer_are_counted() -> None:
    history = clean_history()
    unanswered = replace(history.replicas[0], unanswered=(3,))
    report = check_history(replace(history, replicas=(unanswered, history.replicas[1])))
    assert report.ok and report.figures["replicas_unanswered"] == 1


def test_a_committed_offset_going_back_is_found() -> None:
    history = clean_history()
    last = history.commits[-1]
    back = replace(last, t=last.t + 0.5, offset=last.offset - 1)
    evidence = only(check_history(replace(history, commits=(*history.commits, back))),
                    "commit-backwards")
    assert evidence == [f"commits.jsonl: {to_line(last)}", f"commits.jsonl: {to_line(back)}"]


def test_commits_are_taken_in_acknowledgement_order_not_file_order() -> None:
    history = clean_history()
    assert check_history(replace(history, commits=history.commits[::-1])).ok


def test_two_owners_in_one_generation_are_found() -> None:
    history = clean_history()
    last = history.owned[-1]  # the final generation's second member's assignment
    other = next(o for o in history.owned[::-1] if o.member != last.member)
    grabbing = replace(last, t=last.t + 0.5, owned=(*last.owned, *other.owned))
    evidence = only(check_history(replace(history, owned=(*history.owned, grabbing))),
                    "double-ownership")
    assert evidence == [f"owned.jsonl: {to_line(other)}", f"owned.jsonl: {to_line(grabbing)}"]


def test_a_handover_at_one_instant_is_no_overlap() -> None:
    """An owner's interval ends where its next line starts: the revocation and the new
    owner's assignment may carry the same clock reading."""
    history = clean_history()
    new_owner = next(o for o in history.owned[::-1] if (TOPIC, 0) in o.owned)
    gave_up = Owned(t=new_owner.t, group=GROUP, member="m9", generation=new_owner.generation,
                    owned=(), ended="closed")
    had = Owned(t=new_owner.t - 0.5, group=GROUP, member="m9", generation=new_owner.generation,
                owned=((TOPIC, 0),))
    planted = replace(history, owned=(*history.owned, had, gave_up))
    assert check_history(planted).ok, check_history(planted).render()
    late = replace(gave_up, t=new_owner.t + 0.01)
    evidence = only(check_history(replace(history, owned=(*history.owned, had, late))),
                    "double-ownership")
    assert evidence == [f"owned.jsonl: {to_line(had)}", f"owned.jsonl: {to_line(new_owner)}"]


def test_ownership_ends_at_the_end_line_or_else_at_the_end_of_the_run() -> None:
    history = clean_history()
    last_generation = history.owned[-1].generation
    early = Owned(t=0.25, group=GROUP, member="m9", generation=last_generation,
                  owned=((TOPIC, 0),))
    killed = Owned(t=0.5, group=GROUP, member="m9", generation=last_generation, owned=(),
                   ended="killed")
    assert check_history(replace(history, owned=(early, killed, *history.owned))).ok
    # unended, m9 owns t-0 to the end of the run: beside the last generation's owner, and
    # beside the first generation's owner while that one's commits were acknowledged
    report = check_history(replace(history, owned=(early, *history.owned)))
    assert {v.invariant for v in report.violations} == {"double-ownership"}
    assert any(f"both own t-0 in generation {last_generation}" in v.summary
               for v in report.violations)


def zombie(history: History, *, commit: bool) -> tuple[History, Owned, Commit | None]:
    """``history`` with an expelled member of generation 1 still owning partition 0 for a
    while into the last generation, and (``commit``) a commit of it acknowledged then."""
    new_owner = next(o for o in history.owned[::-1] if (TOPIC, 0) in o.owned)
    line = Owned(t=new_owner.t + 0.1, group=GROUP, member="expelled", generation=1,
                 owned=((TOPIC, 0),))
    gone = Owned(t=new_owner.t + 0.3, group=GROUP, member="expelled", generation=1, owned=(),
                 ended="killed")
    stale = None
    commits = history.commits
    if commit:
        before = [c for c in commits if c.partition == 0 and c.t < line.t]
        stale = Commit(t=line.t + 0.1, group=GROUP, member="expelled", generation=1,
                       topic=TOPIC, partition=0, offset=before[-1].offset)
        commits = (*commits, stale)
    return replace(history, owned=(*history.owned, line, gone), commits=commits), line, stale


def test_a_zombie_window_without_a_commit_is_a_figure() -> None:
    planted, _, _ = zombie(clean_history(), commit=False)
    report = check_history(planted)
    assert report.ok, report.render()
    assert report.figures["zombie_windows"] == 1


def test_a_zombie_window_with_an_acknowledged_commit_is_found() -> None:
    history = clean_history()
    planted, line, stale = zombie(history, commit=True)
    assert stale is not None
    new_owner = next(o for o in history.owned[::-1] if (TOPIC, 0) in o.owned)
    evidence = only(check_history(planted), "double-ownership")
    assert evidence == [f"owned.jsonl: {to_line(line)}", f"owned.jsonl: {to_line(new_owner)}",
                        f"commits.jsonl: {to_line(stale)}"]


def test_a_zombie_commit_sent_before_the_new_owner_took_over_is_a_figure() -> None:
    """Acknowledged during the overlap, but sent before it: the coordinator may have taken it
    while the older generation was still the group's."""
    history = clean_history()
    planted, _, stale = zombie(history, commit=True)
    assert stale is not None
    new_owner = next(o for o in history.owned[::-1] if (TOPIC, 0) in o.owned)
    early = replace(stale, sent=new_owner.t - 0.05)
    report = check_history(replace(planted, commits=(
        *[c for c in planted.commits if c is not stale], early)))
    assert report.ok, report.render()
    assert report.figures["zombie_windows"] == 1


def test_a_zombie_commit_after_it_left_is_no_overlap() -> None:
    planted, line, _ = zombie(clean_history(), commit=False)
    left = max(o.t for o in planted.owned if o.member == line.member)
    last = [c for c in planted.commits if c.partition == 0][-1]
    after = replace(last, t=left + 0.1, member=line.member, generation=line.generation)
    report = check_history(replace(planted, commits=(*planted.commits, after)))
    assert report.ok, report.render()
    assert report.figures["zombie_windows"] == 1


@pytest.mark.parametrize("outcome, says", [
    (dict(state="PrepareRebalance"), "ends PrepareRebalance, not Steady"),
    (dict(members=("m0",)), "ends with members ['m0'], expected ['m0', 'm1']"),
    (dict(members=("m0", "m1", "m2")), "expected ['m0', 'm1']"),
    (dict(behind=(("t", 1, 3, 5),)), "never consumed to the end: t-1 at 3 of 5"),
])
def test_a_group_not_settled_with_its_live_members_is_found(outcome, says) -> None:
    history = clean_history()
    ending = replace(history.groups[0], **outcome)
    report = check_history(replace(history, groups=(ending,)))
    assert only(report, "group-unsettled") == [f"groups.jsonl: {to_line(ending)}"]
    assert says in report.violations[0].summary


def test_kafkas_name_for_a_settled_group_is_accepted() -> None:
    history = clean_history()
    assert check_history(replace(history, groups=(replace(history.groups[0],
                                                          state="Stable"),))).ok


def test_a_group_never_described_is_found() -> None:
    report = check_history(replace(clean_history(), groups=()))
    assert only(report, "group-unsettled") == ["groups.jsonl: no line for this group"]


def test_a_delivery_the_final_log_does_not_hold_is_found() -> None:
    history = clean_history()
    delivered = history.consumed[-1]
    truncated = replace(delivered, t=delivered.t + 0.1, offset=delivered.offset + 1,
                        value="never-stored")
    evidence = only(check_history(replace(history, consumed=(*history.consumed, truncated))),
                    "delivered-not-in-log")
    held = history.final_logs[truncated.partition].records[truncated.offset][1]
    assert evidence == [f"consumed.jsonl: {to_line(truncated)}",
                        f"final_logs.jsonl: the final log holds {held!r} at offset "
                        f"{truncated.offset}"]


def test_a_redelivery_is_counted() -> None:
    history = clean_history()
    again = replace(history.consumed[0], t=history.consumed[-1].t + 1)
    report = check_history(replace(history, consumed=(*history.consumed, again)))
    assert report.ok and report.figures["duplicates_delivered"] == 1


def test_the_report_is_one_json_line() -> None:
    history = clean_history()
    report = check_history(replace(history, groups=()))
    line = report.to_json()
    assert "\n" not in line
    decoded = json.loads(line)
    assert decoded["ok"] is False
    assert decoded["violations"][0]["invariant"] == "group-unsettled"
    assert decoded["figures"]["acknowledged"] == 11
    assert report.render().startswith("VIOLATION group-unsettled: group g was not described")


def test_the_command_reads_a_run_directory_and_fails_on_violations(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = clean_history()
    write_history(tmp_path / "clean", history)
    write_history(tmp_path / "bad", replace(history, groups=()))
    assert check(tmp_path / "clean").ok
    assert main([str(tmp_path / "clean")]) == 0
    assert "OK: no violations" in capsys.readouterr().out
    assert main([str(tmp_path / "bad"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


# --- the history's files -------------------------------------------------------------------

texts = st.text(max_size=8)
times = st.floats(min_value=0, max_value=1e6, allow_nan=False)
offsets = st.integers(min_value=0, max_value=2**40)
partitions = st.integers(min_value=0, max_value=64)
values = st.integers(min_value=0).map(str)
RECORDS = st.one_of(
    st.builds(Produced, t=times, producer=texts, topic=texts, partition=partitions,
              value=values, acked=st.booleans(), offset=st.none() | offsets,
              error=st.none() | texts),
    st.builds(Consumed, t=times, group=texts, member=texts, generation=offsets, topic=texts,
              partition=partitions, offset=offsets, value=values),
    st.builds(Owned, t=times, group=texts, member=texts, generation=offsets,
              owned=st.lists(st.tuples(texts, partitions)).map(tuple)),
    st.builds(Owned, t=times, group=texts, member=texts, generation=offsets, owned=st.just(()),
              ended=st.sampled_from(["killed", "closed"])),
    st.builds(Commit, t=times, group=texts, member=texts, generation=offsets, topic=texts,
              partition=partitions, offset=offsets),
    st.builds(Fault, t=times, fault=texts, target=texts, phase=st.sampled_from(["start", "end"]),
              detail=st.none() | texts),
    st.builds(FinalLog, topic=texts, partition=partitions, log_start_offset=offsets,
              high_watermark=offsets,
              records=st.lists(st.tuples(offsets, values)).map(tuple)),
    st.builds(ReplicaVerdict, topic=texts, partition=partitions, agree=st.booleans(),
              first_difference=st.none() | texts,
              unanswered=st.lists(partitions).map(tuple)),
    st.builds(GroupOutcome, group=texts, state=texts, generation=offsets,
              members=st.lists(texts).map(tuple), expected_members=st.lists(texts).map(tuple)),
)


@given(RECORDS)
def test_every_record_kind_survives_its_json_line(record) -> None:
    line = to_line(record)
    assert "\n" not in line
    assert from_line(type(record), line) == record


def test_a_whole_history_survives_its_run_directory(tmp_path: Path) -> None:
    history = clean_history()
    write_history(tmp_path, history)
    assert {p.name for p in tmp_path.iterdir()} == {
        "produced.jsonl", "consumed.jsonl", "owned.jsonl", "commits.jsonl", "faults.jsonl",
        "final_logs.jsonl", "replicas.jsonl", "groups.jsonl", "metadata.jsonl"}
    assert read_history(tmp_path) == history


def test_an_unknown_key_is_refused() -> None:
    line = to_line(Fault(t=1.0, fault="pause", target="broker-2", phase="start"))
    with pytest.raises(ValueError, match="unknown keys"):
        from_line(Fault, line[:-1] + ',"severity":3}')


# --- properties ----------------------------------------------------------------------------

shapes = st.integers(min_value=1, max_value=4).flatmap(lambda n: st.tuples(
    st.lists(st.integers(min_value=1, max_value=12), min_size=n, max_size=n),
    st.lists(st.floats(min_value=0, max_value=1), min_size=n, max_size=n),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=3)))


def shaped(shape: tuple[list[int], list[float], int, int]) -> History:
    sends, shares, generations, failed = shape
    return clean_history(sends, [int(n * share) for n, share in zip(sends, shares, strict=True)],
                         generations, failed)


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_a_random_clean_history_stays_clean(shape) -> None:
    report = check_history(shaped(shape), duplicates_fail=True)
    assert report.ok, report.render()


@settings(max_examples=60, deadline=None)
@given(shapes, st.data())
def test_removing_any_acknowledged_value_is_always_found(shape, data) -> None:
    history = shaped(shape)
    lost = data.draw(st.sampled_from([s for s in history.produced if s.acked]))
    log = history.final_logs[lost.partition]
    planted = with_final_log(history, replace(
        log, records=tuple(r for r in log.records if r[1] != lost.value)))
    found = [v for v in check_history(planted).violations if v.invariant == "acknowledged-lost"]
    assert [v.evidence[0] for v in found] == [f"produced.jsonl: {to_line(lost)}"]


def test_a_broker_naming_an_old_leader_after_the_heal_is_found() -> None:
    stale = StaleMetadata(broker=0, topic=TOPIC, partition=1, leader=0, leader_epoch=8,
                          zookeeper_leader=2, zookeeper_leader_epoch=9)
    report = check_history(replace(clean_history(), metadata=(stale,)))
    assert only(report, "metadata-stale") == [f"metadata.jsonl: {to_line(stale)}"]
    assert "broker 0 names broker 0 (epoch 8) as leader of t-1" in report.violations[0].summary
