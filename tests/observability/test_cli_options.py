"""The console's shorter broker timeout is its own: other commands keep theirs."""

from __future__ import annotations

from client.cli import build_parser


def test_the_console_timeout_does_not_leak_into_other_commands() -> None:
    parser = build_parser()
    assert parser.parse_args(["console"]).api_timeout_ms == 2_000
    assert parser.parse_args(["console"]).listen == "127.0.0.1:8080"
    assert parser.parse_args(["groups", "watch", "g"]).api_timeout_ms == 10_000
    assert parser.parse_args(["groups", "list"]).api_timeout_ms == 10_000
