"""docs/security.md's tables are the ones made from API_ACLS, every odradek command is in the
command table, and every one that talks to brokers takes ``--command-config``."""

from __future__ import annotations

import argparse
from pathlib import Path

from protocol.acl_docs import CLI_APIS, api_acl_table, cli_acl_table
from tooling.cli.main import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_doc_holds_the_generated_tables() -> None:
    text = DOC.read_text()
    assert api_acl_table() in text
    assert cli_acl_table() in text


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = _commands(sub, f"{prefix}{name} ")
                found |= inner or {f"{prefix}{name}"}
    return found


def test_every_command_says_what_it_needs() -> None:
    assert _commands(build_parser()) == set(CLI_APIS) - {"consume --group"}



def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for word in command.split():
        (choices,) = [a.choices for a in parser._actions
                      if isinstance(a, argparse._SubParsersAction)]
        parser = choices[word]
    return parser


def test_every_command_that_talks_to_brokers_takes_command_config() -> None:
    parser = build_parser()
    for command, apis in CLI_APIS.items():
        if apis and command != "consume --group":
            options = {o for a in _subparser(parser, command)._actions for o in a.option_strings}
            # the mirror talks to two clusters: a file for each
            assert "--command-config" in options or {
                "--source-config", "--target-config"} <= options, command
