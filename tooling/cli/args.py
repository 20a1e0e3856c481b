"""Argument types and options shared by the ``odradek`` subcommands' parsers (tooling/cli/*.py),
so every command words a bad number the same way and takes ``--bootstrap`` alike."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from client.admin import Admin
from client.errors import ConfigError
from client.group_admin import GroupAdmin
from client.security import SecurityConfig, SecurityOptions

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (``--config``, ``-X``): the key and the value."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def command_config(text: str) -> SecurityConfig:
    """``--command-config FILE``: Kafka's client properties (security.protocol=SASL_SSL ...)."""
    try:
        return SecurityConfig.from_file(Path(text))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config", dest="command_config", type=command_config, metavar="FILE",
        help="client properties for a secured listener, in Kafka's format: "
        "security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-256, sasl.jaas.config=... "
        "username=\"...\" password=\"...\", ssl.truststore.location=ca.pem (docs/security.md)",
    )


def security_options(args: argparse.Namespace) -> SecurityOptions:
    """The security keyword arguments of the clients from ``--command-config`` (none: PLAINTEXT)."""
    config: SecurityConfig | None = getattr(args, "command_config", None)
    if config is None:
        return {}
    return config.options()


def admin_client(args: argparse.Namespace) -> Admin:
    """The Admin client of a command: --bootstrap, --api-timeout-ms and --command-config."""
    return Admin(args.bootstrap, timeout_ms=args.api_timeout_ms, **security_options(args))


def group_admin_client(args: argparse.Namespace) -> GroupAdmin:
    """``admin_client`` with the group tools (describe, lag, reset)."""
    return GroupAdmin(args.bootstrap, timeout_ms=args.api_timeout_ms, **security_options(args))


def client_options() -> argparse.ArgumentParser:
    """The parent parser of every command that talks to brokers: ``--bootstrap``,
    ``--api-timeout-ms`` and ``--command-config``."""
    client = argparse.ArgumentParser(add_help=False)
    client.add_argument(
        "--bootstrap",
        default=os.environ.get("ODRADEK_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        metavar="HOST:PORT[,HOST:PORT...]",
        help="brokers to contact first (default: $ODRADEK_BOOTSTRAP or %(default)s)",
    )
    client.add_argument(
        "--api-timeout-ms",
        dest="api_timeout_ms",
        type=positive_int,
        default=10_000,
        metavar="MS",
        help="how long to wait for brokers to answer (default: %(default)s)",
    )
    add_command_config(client)
    return client


def json_option() -> argparse.ArgumentParser:
    """The parent parser of every command that can print JSON: ``--json``."""
    json_flag = argparse.ArgumentParser(add_help=False)
    json_flag.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return json_flag
