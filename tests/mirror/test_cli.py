"""``odradek mirror``'s arguments: mistakes are refused before any broker is contacted."""

from __future__ import annotations

import pytest

from tooling.cli.main import main

# nothing listens here: a command that got as far as connecting would hang or fail otherwise
NOWHERE = ["--source", "127.0.0.1:1", "--target", "127.0.0.1:1"]


def test_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["mirror", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for option in ("--topics", "--topic", "--rename", "--source-alias", "--source-config",
                   "--target-config", "--num-streams", "--recompress", "--metrics-listener",
                   "--commit-interval-ms", "status"):
        assert option in text, option


@pytest.mark.parametrize(("args", "message"), [
    ([], "name the topics to mirror: --topics PATTERN or --topic T"),
    (["--topics", "("], "--topics '(' is not a regular expression"),
    (["--topic", "t", "--rename", "{source}.{topic}"], "uses {source}: give --source-alias"),
    (["--topic", "t", "--rename", "copy"], "must contain {topic}"),
])
def test_usage_mistakes_fail_in_one_line(args: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mirror", *NOWHERE, *args]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("odradek: error: ") and message in line


@pytest.mark.parametrize("args", [["--recompress", "zstd"], ["--topics", "a", "--topic", "b"],
                                  ["--num-streams", "0"]])
def test_invalid_values_are_argparse_errors(args: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["mirror", *NOWHERE, *args])
    assert exited.value.code == 2
    assert "odradek mirror: error:" in capsys.readouterr().err
