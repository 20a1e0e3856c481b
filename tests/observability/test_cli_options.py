"""The console's options: its shorter broker timeout is its own (other commands keep theirs),
and a --listen it cannot use is a one-line error."""

from __future__ import annotations

import socket

import pytest

from tooling.cli.main import build_parser, main


def test_the_console_timeout_does_not_leak_into_other_commands() -> None:
    parser = build_parser()
    assert parser.parse_args(["console"]).api_timeout_ms == 2_000
    assert parser.parse_args(["console"]).listen == "127.0.0.1:8080"
    assert parser.parse_args(["groups", "watch", "g"]).api_timeout_ms == 10_000
    assert parser.parse_args(["groups", "list"]).api_timeout_ms == 10_000


def test_a_listen_address_in_use_or_out_of_range_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["console", "--listen", f"127.0.0.1:{port}"]) == 1
    assert f"cannot listen on --listen 127.0.0.1:{port}: " in capsys.readouterr().err
    assert main(["console", "--listen", "127.0.0.1:70000"]) == 2
    assert "--listen '127.0.0.1:70000' is not HOST:PORT" in capsys.readouterr().err
