"""The ``odradek`` CLI: help everywhere, argument errors, and produce/consume round trips
against the in-memory fake broker."""

from __future__ import annotations

import inspect
import io
import json
import re
import socket
import sys

import pytest

from tests.client.fake_broker import FakeBroker
from tooling.cli import consume, produce
from tooling.cli import main as cli

COMMANDS = [
    [],
    ["topics"],
    ["topics", "create"],
    ["topics", "list"],
    ["topics", "describe"],
    ["topics", "delete"],
    ["produce"],
    ["consume"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: odradek")
    if command and command[-1] in ("produce", "consume"):
        assert "--bootstrap" in out and "--json" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "create"],
        ["topics", "create", "t", "--partitions", "0"],
        ["topics", "create", "t", "--config", "novalue"],
        ["produce", "t", "--acks", "2"],
        ["consume", "t", "--max-messages", "x"],
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_broker_and_log_replace_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def execv(path: str, args: list[str]) -> None:
        calls.append((path, args))
        raise SystemExit(0)  # the real execv never returns

    monkeypatch.setattr(cli.os, "execv", execv)
    for argv in (
        ["broker", "start", "--port", "0"],
        ["log", "dump", "some-dir", "--json"],
        ["log", "some-dir"],
    ):
        with pytest.raises(SystemExit):
            cli.main(argv)
    assert calls == [
        (sys.executable, [sys.executable, "-m", "broker", "start", "--port", "0"]),
        (sys.executable, [sys.executable, "-m", "broker.log.dump", "some-dir", "--json"]),
        (sys.executable, [sys.executable, "-m", "broker.log.dump", "some-dir"]),
    ]


def run(argv: list[str], stdin: bytes = b""):
    """Run the CLI in-process, returning (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin))
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr, sys.stdin = out, err, fake_stdin
    try:
        code = cli.main(argv)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def test_produce_then_consume_round_trip(fake: FakeBroker) -> None:
    lines = b"k1:hello\nk2:world\n:no key part\n"
    code, out, err = run(
        ["produce", "t", "--bootstrap", fake.bootstrap, "--key-separator", ":",
         "--compression", "lz4", "--acks", "all"],
        lines,
    )
    assert code == 0, err
    assert "sent 3 messages to 't'" in err and "msgs/s" in err
    code, out, err = run(
        ["consume", "t", "--bootstrap", fake.bootstrap, "--from-beginning",
         "--max-messages", "3", "--json"]
    )
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "k1", "hello"),
        (1, "k2", "world"),
        (2, "", "no key part"),
    ]
    assert set(records[0]) == {"topic", "partition", "offset", "timestamp", "key", "value"}
    assert "processed 3 messages" in err


def test_consume_plain_output_and_idle_timeout(fake: FakeBroker) -> None:
    run(["produce", "three", "--bootstrap", fake.bootstrap, "--partition", "1"], b"a\nb\n")
    code, out, err = run(
        ["consume", "three", "--bootstrap", fake.bootstrap, "--partition", "1",
         "--offset", "1", "--timeout-ms", "300", "--key-separator", "="]
    )
    assert code == 0, err
    assert out == "null=b\n"  # a null key prints as null, as kafka-console-consumer does


def test_produce_with_zstd_to_a_broker_that_takes_record_batches(fake: FakeBroker) -> None:
    fake.api_versions = {}  # Produce v2, Fetch v4
    code, _, err = run(["produce", "t", "--bootstrap", fake.bootstrap, "--compression", "zstd"],
                       b"a\nb\n")
    assert code == 0, err
    code, out, err = run(["consume", "t", "--bootstrap", fake.bootstrap, "--from-beginning",
                          "--max-messages", "2"])
    assert (code, out) == (0, "a\nb\n"), err


def test_produce_json_summary(fake: FakeBroker) -> None:
    code, out, _ = run(["produce", "t", "--bootstrap", fake.bootstrap, "--json"], b"x\ny\n")
    assert code == 0
    summary = json.loads(out)
    assert (summary["topic"], summary["sent"], summary["failed"]) == ("t", 2, 0)


def test_a_line_without_the_key_separator_is_an_error(fake: FakeBroker) -> None:
    code, _, err = run(
        ["produce", "t", "--bootstrap", fake.bootstrap, "--key-separator", "|"], b"a|b\nplain\n"
    )
    assert code == 1
    assert "line 2 has no key separator" in err


def test_consume_names_a_missing_partition(fake: FakeBroker) -> None:
    code, _, err = run(["consume", "three", "--bootstrap", fake.bootstrap, "--partition", "5"])
    assert code == 1
    assert "topic 'three' has no partition 5" in err


def test_an_unknown_topic_is_named_without_a_traceback(fake: FakeBroker) -> None:
    code, _, err = run(
        ["consume", "ghost", "--bootstrap", fake.bootstrap, "--api-timeout-ms", "300"]
    )
    assert code == 1
    assert "ghost" in err and "Traceback" not in err


def test_an_unreachable_broker_is_a_one_line_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the CLI runs: nobody listens
    code, _, err = run(
        ["topics", "list", "--bootstrap", f"127.0.0.1:{port}", "--api-timeout-ms", "300"]
    )
    assert code == 1
    assert f"cannot connect to 127.0.0.1:{port}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_bad_bootstrap_is_named() -> None:
    code, _, err = run(["topics", "list", "--bootstrap", "localhost"])
    assert code == 1
    assert "bootstrap" in err and "HOST:PORT" in err


def test_consume_prints_the_messages_before_a_damaged_one(fake: FakeBroker) -> None:
    run(["produce", "t", "--bootstrap", fake.bootstrap], b"a\nb\nc\nd\n")
    fake.logs[("t", 0)].damage(2)
    consume = ["consume", "t", "--bootstrap", fake.bootstrap, "--from-beginning"]
    code, out, err = run([*consume, "--timeout-ms", "2000"])
    assert (code, out) == (1, "a\nb\n")
    assert re.fullmatch(
        r"odradek: error: t-0: CRC mismatch: stored 0x\w+, computed 0x\w+ "
        r"\(offset 2 at byte position \d+\); --skip-message-on-error skips it\n",
        err,
    )
    code, out, err = run([*consume, "--max-messages", "3", "--skip-message-on-error"])
    assert (code, out) == (0, "a\nb\nd\n")
    assert "odradek: warning: skipping a damaged message: t-0: CRC mismatch" in err
    assert "(offset 2 at" in err and "processed 3 messages" in err


def test_consume_offset_earliest_latest_and_print_fields(fake: FakeBroker) -> None:
    run(["produce", "three", "--bootstrap", fake.bootstrap, "--partition", "2",
         "--key-separator", ":"], b"k:v1\nk:v2\n")
    consume = ["consume", "three", "--bootstrap", fake.bootstrap, "--timeout-ms", "300"]
    code, out, err = run([*consume, "--offset", "earliest", "--print",
                          "partition,offset,key,timestamp"])
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert [line[:3] + line[4:] for line in lines] == [["2", "0", "k", "v1"], ["2", "1", "k", "v2"]]
    assert all(line[3].isdigit() for line in lines)  # the timestamp, in ms
    code, out, err = run([*consume, "--offset", "latest"])
    assert (code, out) == (0, "")
    code, out, err = run([*consume, "--partition", "2", "--offset", "1",
                          "--print", "offset", "--key-separator", "|"])
    assert (code, out) == (0, "1|v2\n")
    code, _, err = run([*consume, "--offset", "1"])
    assert code == 1 and "--offset N needs --partition" in err


def test_consume_bad_offset_or_print_field_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, problem in (
        (["consume", "t", "--offset", "newest"], "'newest' is not earliest, latest or an offset"),
        (["consume", "t", "--print", "key,size"], "unknown field 'size'"),
        (["consume", "t", "--format", "octal"], "invalid choice"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        assert problem in capsys.readouterr().err


def test_tombstones_nulls_and_binary_formats(fake: FakeBroker) -> None:
    code, _, err = run(
        ["produce", "t", "--bootstrap", fake.bootstrap, "--key-separator", ":",
         "--null-marker", "NULL"],
        b"a:\xff\x00ok\nb:NULL\n",
    )
    assert code == 0, err
    consume = ["consume", "t", "--bootstrap", fake.bootstrap, "--offset", "earliest",
               "--max-messages", "2"]
    code, out, err = run([*consume, "--print", "key"])
    assert (code, out) == (0, "a\t\\xff\x00ok\nb\tnull\n")
    code, out, _ = run([*consume, "--print", "key", "--format", "hex"])
    assert out == "61\tff006f6b\n62\tnull\n"
    code, out, _ = run([*consume, "--format", "base64", "--json"])
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"]) for r in records] == [("YQ==", "/wBvaw=="), ("Yg==", None)]


def test_client_properties_reach_the_clients(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, dict] = {}
    for module, name in ((produce, "Producer"), (consume, "Consumer")):
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            seen[_name] = kwargs
            return _real(*args, **kwargs)

        spy.__signature__ = inspect.signature(real)  # what -X checks its keys against
        monkeypatch.setattr(module, name, spy)
    code, _, err = run(
        ["produce", "t", "--bootstrap", fake.bootstrap, "--acks", "1", "-X", "acks=all",
         "-X", "max.request.size=2048", "--property", "linger_ms=2.5",
         "--producer-property", "retries=3"],
        b"x\n",
    )
    assert code == 0, err
    assert {k: seen["Producer"][k] for k in ("acks", "max_request_bytes", "linger_ms",
                                              "retries")} == {
        "acks": "all", "max_request_bytes": 2048, "linger_ms": 2.5, "retries": 3}
    code, _, err = run(
        ["consume", "t", "--bootstrap", fake.bootstrap, "--offset", "earliest",
         "--max-messages", "1", "-X", "max.poll.records=7", "--consumer-property",
         "check_crcs=false"]
    )
    assert code == 0, err
    assert (seen["Consumer"]["max_poll_records"], seen["Consumer"]["check_crcs"]) == (7, False)
    code, _, err = run(["consume", "t", "--bootstrap", fake.bootstrap, "-X",
                        "max_poll_records=0", "--timeout-ms", "100"])
    assert code == 1 and "max_poll_records=0 is invalid" in err


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["consume", "t", "-X", "fetch.wait=5"], "unknown consumer property 'fetch.wait'; known: "),
        (["consume", "t", "-X", "group_id=g"], "unknown consumer property 'group_id'"),
        (["consume", "t", "-X", "check_crcs=maybe"], "'maybe' is not true or false"),
        (["produce", "t", "-X", "max.request.size=big"], "'big' is not a whole number"),
        (["produce", "t", "--property", "nope=1"], "unknown producer property 'nope'"),
    ],
)
def test_an_unknown_or_bad_property_is_named(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert problem in capsys.readouterr().err


def test_produce_reports_what_was_sent_before_an_error_stopped_it(fake: FakeBroker) -> None:
    produce = ["produce", "t", "--bootstrap", fake.bootstrap, "-X", "max_request_bytes=200"]
    code, out, err = run(produce, b"one\ntwo\n" + b"x" * 300 + b"\nnever read\n")
    assert code == 1
    assert "sent 2 messages to 't'" in err
    assert re.search(
        r"odradek: error: stopped after reading 3 lines: 2 sent, 0 failed; stopped by line 3: "
        r"message of \d+ bytes for topic 't' exceeds max_request_bytes=200", err
    ), err
    code, out, err = run([*produce, "--json"], b"a\n" + b"x" * 300 + b"\n")
    summary = json.loads(out)
    assert (summary["sent"], summary["failed"], summary["stopped_at_line"]) == (1, 0, 2)
    assert "max_request_bytes=200" in summary["error"]
    code, out, err = run([*produce, "--key-separator", "|"], b"a|b\nplain\n")
    assert code == 1
    assert "stopped after reading 2 lines: 1 sent, 0 failed; stopped by line 2 has no key" in err
    code, out, _ = run(["consume", "t", "--bootstrap", fake.bootstrap, "--offset", "earliest",
                        "--timeout-ms", "300"])
    assert out == "one\ntwo\na\nb\n"  # what was read before the error did go out
