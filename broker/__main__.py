"""``python -m broker start``: run one broker (``odradek broker start`` runs this).

With no arguments it listens on 127.0.0.1:9092 and keeps its data in ./odradek-data. Flags,
``ODRADEK_*`` environment variables and a TOML file (``--config``) override the defaults (see
docs/operations.md). The first line on stdout, flushed, is exactly
``odradek broker <broker_id> listening on <host>:<port>``; logs go to stderr.

Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when the broker cannot start (port in
use, data directory locked or inconsistent), 2 for a bad command line or setting.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import trio

from broker.context import BrokerContext
from broker.gc_policy import GcPolicy
from broker.server import StartupError, run_broker
from broker.settings import SETTINGS, SettingsError, load_settings
from broker.structured_log import configure_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek broker", description="Run an odradek broker.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    start = commands.add_parser(
        "start",
        help="run one broker until SIGTERM or SIGINT",
        description="Run one broker. Every setting also has an ODRADEK_<NAME> environment "
        "variable and a key in the --config file; see docs/operations.md.",
    )
    for setting in SETTINGS:
        if setting.flag is not None:
            start.add_argument(
                setting.flag,
                dest=setting.name,
                metavar=setting.name.upper(),
                help=f"{setting.meaning} (default: {setting.shown_default})",
            )
    start.add_argument(
        "--config", type=Path, metavar="odradek.toml", help="a TOML file of settings"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags = {s.name: getattr(args, s.name) for s in SETTINGS if s.flag is not None}
    try:
        settings = load_settings(
            config_file=args.config,
            env=os.environ,
            overrides={name: value for name, value in flags.items() if value is not None},
        )
    except SettingsError as exc:
        print(f"odradek broker: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    gc_policy = GcPolicy()  # collections scan only what is new (broker/gc_policy.py)
    gc_policy.install()
    # Outside the broker's own signal handling (before it opens the data directory, and after
    # it has closed everything) SIGTERM and SIGINT simply end the process with status 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_quietly)
    try:
        trio.run(partial(run_broker, settings, on_listening=_announce, gc_policy=gc_policy))
    except Exception as exc:
        cause = _only_cause(exc)
        if not isinstance(cause, StartupError):
            raise
        print(f"odradek broker: cannot start: {cause}", file=sys.stderr)
        return 1
    return 0


def _exit_quietly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _announce(ctx: BrokerContext) -> None:
    """The first listener's line; with several listeners, one line for each after it, and one
    for each Kafka-protocol listener (``kafka listener PLAINTEXT on 127.0.0.1:9093``)."""
    endpoints = ctx.settings.endpoints
    first = endpoints[0]
    lines = [f"odradek broker {ctx.broker_id} listening on {first.host}:{ctx.port}"]
    if len(endpoints) > 1:
        lines += [f"odradek broker {ctx.broker_id} listener {e.name} on {e.host}:"
                  f"{ctx.listener_ports[e.name]}" for e in endpoints]
    lines += [f"odradek broker {ctx.broker_id} kafka listener {e.protocol.value} on {e.host}:"
              f"{ctx.listener_ports[e.name]}" for e in ctx.settings.kafka_endpoints]
    print("\n".join(lines), flush=True)


def _only_cause(exc: BaseException) -> BaseException:
    """The one exception inside nested exception groups, or the group itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


if __name__ == "__main__":
    sys.exit(main())
