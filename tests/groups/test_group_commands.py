"""Committed offsets from the outside: manual-assignment commits, ``odradek consume --group``,
``groups describe``, ``groups reset-offsets`` and ``groups delete`` against a real broker."""

from __future__ import annotations

import io
import json
import sys
import time
from typing import Any

import pytest

from client import Consumer, ConsumerRecord, Producer, TopicPartition
from protocol.errors import UnknownMemberIdError
from tests.groups.support import GROUP_BROKER_SETTINGS, create_topic
from tooling.cli import main as cli

pytestmark = pytest.mark.integration


def run(*argv: str) -> tuple[int, str, str]:
    """The ``odradek`` CLI in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = cli.main(list(argv))
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    code, out, err = run("groups", "describe", group, "--bootstrap", bootstrap, "--json")
    assert code == 0, err
    described: dict[str, Any] = json.loads(out)
    return described


def offsets_of(described: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, Any, Any]]:
    return {
        (o["topic"], o["partition"]): (o["committed_offset"], o["log_end_offset"], o["lag"])
        for o in described["offsets"]
    }


def produce(bootstrap: str, topic: str, values: list[str], partition: int | None = None) -> None:
    with Producer(bootstrap, linger_ms=1) as producer:
        for value in values:
            producer.send(topic, value.encode(), key=value.encode(), partition=partition)
        producer.flush()


def poll_until(consumer: Consumer, count: int, timeout: float = 30.0) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        assert time.monotonic() < deadline, f"{len(records)} of {count} records"
        records += consumer.poll(timeout_ms=100)
    return records


@pytest.fixture
def bootstrap(make_broker) -> str:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    return str(broker.bootstrap)


def test_manual_assignment_commits_while_empty_and_describe_shows_the_lag(bootstrap) -> None:
    create_topic(bootstrap, "ledger", 2)
    produce(bootstrap, "ledger", [f"a{i}" for i in range(10)], partition=0)
    produce(bootstrap, "ledger", [f"b{i}" for i in range(6)], partition=1)
    p0, p1 = TopicPartition("ledger", 0), TopicPartition("ledger", 1)
    with Consumer(bootstrap, group_id="bookkeepers", auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        consumer.assign([p0, p1])
        poll_until(consumer, 16)
        consumer.commit(offsets={p0: 7})
        consumer.commit(offsets={p1: 6})
        assert consumer.committed(p0) == 7

    described = describe(bootstrap, "bookkeepers")
    assert described["state"] == "Empty" and described["members"] == []
    assert offsets_of(described) == {("ledger", 0): (7, 10, 3), ("ledger", 1): (6, 6, 0)}
    code, table, _ = run("groups", "describe", "bookkeepers", "--bootstrap", bootstrap)
    assert code == 0 and "Empty" in table and "ledger" in table


def test_manual_commits_are_refused_while_the_group_has_members(bootstrap) -> None:
    create_topic(bootstrap, "shared", 1)
    tp = TopicPartition("shared", 0)
    with Consumer(bootstrap, group_id="busy", session_timeout_ms=5_000,
                  heartbeat_interval_ms=500) as member:
        member.subscribe(["shared"])
        deadline = time.monotonic() + 30
        while member.assignment() != {tp}:
            assert time.monotonic() < deadline
            member.poll(timeout_ms=100)
        with Consumer(bootstrap, group_id="busy", enable_auto_commit=False) as outsider:
            outsider.assign([tp])
            with pytest.raises(UnknownMemberIdError):
                outsider.commit(offsets={tp: 0})


def test_consume_as_a_group_member_from_the_command_line(bootstrap) -> None:
    create_topic(bootstrap, "lines", 1)
    produce(bootstrap, "lines", [f"line {i}" for i in range(10)])
    code, out, err = run("consume", "lines", "--bootstrap", bootstrap, "--group", "readers",
                         "--from-beginning", "--max-messages", "4", "--json", "--commit", "sync")
    assert code == 0, err
    assert [json.loads(line)["value"] for line in out.splitlines()] == [
        f"line {i}" for i in range(4)]
    assert offsets_of(describe(bootstrap, "readers")) == {("lines", 0): (4, 10, 6)}
    # The next member of the group starts where the last one committed.
    code, out, err = run("consume", "lines", "--bootstrap", bootstrap, "--group", "readers",
                         "--max-messages", "6", "--commit", "async")
    assert code == 0, err
    assert out.splitlines() == [f"line {i}" for i in range(4, 10)]
    assert offsets_of(describe(bootstrap, "readers")) == {("lines", 0): (10, 10, 0)}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pattern"], "--pattern needs --group"),
        (["--group", "g", "--partition", "0"], "--partition cannot be used with --group"),
    ],
)
def test_consume_refuses_contradictory_options(argv: list[str], message: str) -> None:
    code, _, err = run("consume", "t", "--bootstrap", "127.0.0.1:1", *argv)
    assert code == 1 and message in err


def test_reset_offsets_to_earliest_then_the_group_reads_again(bootstrap) -> None:
    create_topic(bootstrap, "replay", 3)
    values = [str(i) for i in range(30)]
    produce(bootstrap, "replay", values)
    reset = ("groups", "reset-offsets", "replayers", "--topic", "replay", "--to-earliest",
             "--bootstrap", bootstrap)
    with Consumer(bootstrap, group_id="replayers", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["replay"])
        assert sorted(r.value.decode() for r in poll_until(consumer, 30)) == sorted(values)
        consumer.commit()
        code, _, err = run(*reset, "--execute")  # refused: the group has a member
        assert code == 1 and "needs an Empty group" in err and "Steady" in err

    ends = {key: c for key, (c, _, _) in offsets_of(describe(bootstrap, "replayers")).items()}
    assert sum(ends.values()) == 30
    code, out, err = run(*reset, "--json")  # a dry run by default
    assert code == 0, err
    plan = json.loads(out)
    assert plan["executed"] is False
    assert {(o["topic"], o["partition"]): (o["current_offset"], o["new_offset"])
            for o in plan["offsets"]} == {key: (c, 0) for key, c in ends.items()}
    assert offsets_of(describe(bootstrap, "replayers")) == {
        key: (c, c, 0) for key, c in ends.items()}

    code, out, err = run(*reset, "--execute")
    assert code == 0, err
    assert "NEW-OFFSET" in out
    assert {c for c, _, _ in offsets_of(describe(bootstrap, "replayers")).values()} == {0}
    with Consumer(bootstrap, group_id="replayers", auto_offset_reset="latest") as consumer:
        consumer.subscribe(["replay"])
        assert sorted(r.value.decode() for r in poll_until(consumer, 30)) == sorted(values)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (["--to-latest"], {0: 8}),
        (["--to-offset", "5"], {0: 5}),
        (["--to-offset", "99"], {0: 8}),  # clamped to the log end
        (["--shift-by", "-2"], {0: 1}),
        (["--shift-by", "-20"], {0: 0}),  # clamped to the earliest
        (["--to-datetime", "1970-01-02T00:00:00+00:00"], {0: 0}),
        (["--to-datetime", "2999-01-01T00:00:00"], {0: 8}),  # nothing that recent: the end
    ],
)
def test_reset_offsets_targets(bootstrap, target: list[str], expected: dict[int, int]) -> None:
    create_topic(bootstrap, "positions", 2)
    produce(bootstrap, "positions", [str(i) for i in range(8)], partition=0)
    with Consumer(bootstrap, group_id="movers", enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition("positions", 0)])
        consumer.commit(offsets={TopicPartition("positions", 0): 3})
    code, out, err = run("groups", "reset-offsets", "movers", "--topic", "positions:0",
                         *target, "--execute", "--json", "--bootstrap", bootstrap)
    assert code == 0, err
    assert {o["partition"]: o["new_offset"] for o in json.loads(out)["offsets"]} == expected
    committed = offsets_of(describe(bootstrap, "movers"))
    assert {p: c for (_, p), (c, _, _) in committed.items()} == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--topic", "ghost", "--to-earliest"], "ghost"),
        (["--topic", "positions:7", "--to-earliest"], "no partition 7"),
        (["--topic", "positions:x", "--to-earliest"], "partitions must be numbers"),
        (["--topic", "positions", "--shift-by", "1"], "needs committed offsets"),
        (["--topic", "positions", "--to-datetime", "yesterday"], "not an ISO date"),
    ],
)
def test_reset_offsets_explains_what_is_wrong(bootstrap, argv: list[str], message: str) -> None:
    create_topic(bootstrap, "positions", 1)
    code, _, err = run("groups", "reset-offsets", "nobody", *argv, "--bootstrap", bootstrap,
                       "--api-timeout-ms", "2000")
    assert code == 1 and message in err


def test_delete_only_an_empty_group(bootstrap) -> None:
    create_topic(bootstrap, "deleting", 1)
    tp = TopicPartition("deleting", 0)
    with Consumer(bootstrap, group_id="doomed", session_timeout_ms=5_000,
                  heartbeat_interval_ms=500) as member:
        member.subscribe(["deleting"])
        deadline = time.monotonic() + 30
        while member.assignment() != {tp}:
            assert time.monotonic() < deadline
            member.poll(timeout_ms=100)
        member.commit(offsets={tp: 0})
        code, _, err = run("groups", "delete", "doomed", "--bootstrap", bootstrap)
        assert code == 1 and "has members" in err
    code, out, err = run("groups", "delete", "doomed", "--bootstrap", bootstrap)
    assert code == 0 and "deleted group 'doomed'" in out, err
    code, _, err = run("groups", "delete", "doomed", "--bootstrap", bootstrap)
    assert code == 1 and "does not exist" in err


def test_reset_offsets_to_current_exports_a_plan_and_from_file_applies_it(
    bootstrap, tmp_path
) -> None:
    """--to-current --export saves where the group is (Kafka's CSV plan file; the log end for
    a partition without a commit); --from-file puts the group back there later."""
    create_topic(bootstrap, "saved", 3)
    produce(bootstrap, "saved", [str(i) for i in range(8)], partition=0)
    produce(bootstrap, "saved", [str(i) for i in range(5)], partition=1)
    p0, p1 = TopicPartition("saved", 0), TopicPartition("saved", 1)
    with Consumer(bootstrap, group_id="savers", enable_auto_commit=False) as consumer:
        consumer.assign([p0, p1])
        consumer.commit(offsets={p0: 3, p1: 4})
    save = ("groups", "reset-offsets", "savers", "--topic", "saved", "--to-current",
            "--bootstrap", bootstrap)
    code, out, err = run(*save, "--json")
    assert code == 0, err
    assert [(o["partition"], o["current_offset"], o["new_offset"])
            for o in json.loads(out)["offsets"]] == [(0, 3, 3), (1, 4, 4), (2, None, 0)]
    code, plan, err = run(*save, "--export")
    assert code == 0, err
    assert plan == "saved,0,3\nsaved,1,4\nsaved,2,0\n"
    assert "dry run" in err
    saved = {key: c for key, (c, _, _) in offsets_of(describe(bootstrap, "savers")).items()}
    assert saved == {("saved", 0): 3, ("saved", 1): 4}  # a dry run commits nothing

    code, _, err = run("groups", "reset-offsets", "savers", "--topic", "saved", "--to-latest",
                       "--execute", "--bootstrap", bootstrap)
    assert code == 0, err
    plan_file = tmp_path / "savers.csv"
    plan_file.write_text(plan)
    restore = ("groups", "reset-offsets", "savers", "--from-file", str(plan_file),
               "--bootstrap", bootstrap)
    code, out, err = run(*restore, "--json")
    assert code == 0, err
    assert [(o["partition"], o["current_offset"], o["new_offset"])
            for o in json.loads(out)["offsets"]] == [(0, 8, 3), (1, 5, 4), (2, 0, 0)]
    code, out, err = run(*restore, "--execute", "--export")
    assert code == 0, err
    assert out == plan and "dry run" not in err
    assert {key: c for key, (c, _, _) in offsets_of(describe(bootstrap, "savers")).items()} \
        == {("saved", 0): 3, ("saved", 1): 4, ("saved", 2): 0}

    # Kafka's several-groups form (group first) is read too; offsets past the end are clamped
    plan_file.write_text("savers,saved,1,99\n\nsavers,saved,0,1\n")
    code, out, err = run(*restore, "--execute", "--json")
    assert code == 0, err
    assert {o["partition"]: o["new_offset"] for o in json.loads(out)["offsets"]} \
        == {0: 1, 1: 5}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("saved,0\n", "is not topic,partition,offset"),
        ("saved,zero,1\n", "must be numbers"),
        ("saved,0,-1\n", "must be numbers >= 0"),
        ("saved,0,1\nsaved,0,2\n", "appears twice"),
        ("others,saved,0,1\n", "group 'others', not 'nobody'"),
        ("\n", "no topic,partition,offset lines"),
        ("saved,4,0\n", "no partition 4"),
    ],
)
def test_reset_offsets_from_file_explains_a_bad_plan(
    bootstrap, tmp_path, lines: str, message: str
) -> None:
    create_topic(bootstrap, "saved", 1)
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(lines)
    code, _, err = run("groups", "reset-offsets", "nobody", "--from-file", str(plan_file),
                       "--bootstrap", bootstrap, "--api-timeout-ms", "2000")
    assert code == 1 and message in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--to-earliest"], "name the partitions with --topic"),
        (["--topic", "t", "--from-file", "plan.csv"], "leave out --topic"),
        (["--topic", "t", "--to-current", "--export", "--json"], "leave out --json"),
    ],
)
def test_reset_offsets_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["groups", "reset-offsets", "g", *argv, "--bootstrap", "127.0.0.1:1"])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_reset_offsets_from_a_missing_file(tmp_path) -> None:
    code, _, err = run("groups", "reset-offsets", "g", "--from-file", str(tmp_path / "none"),
                       "--bootstrap", "127.0.0.1:1")
    assert code == 1 and "--from-file" in err and "No such file" in err
