"""The ``odradek`` CLI: help everywhere, argument errors, and produce/consume round trips
against the in-memory fake broker."""

from __future__ import annotations

import io
import json
import re
import socket
import sys

import pytest

from client import cli
from tests.client.fake_broker import FakeBroker

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
    assert out == "=b\n"


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
