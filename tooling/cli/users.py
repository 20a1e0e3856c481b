"""``odradek users add|delete|list``: SCRAM credentials (Kafka's ``kafka-configs --alter
--add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``).

Over the wire (AlterUserScramCredentials, KIP-554) the credential is derived here from the
password under a fresh salt, so the password never leaves this process. The password comes from
``--password-file`` (its first line) or a prompt, never from the command line (where ``ps`` and
the shell history would keep it).

The first user of a cluster whose only listeners need a login cannot be added over the wire:
``--data-dir DIR`` (an embedded broker's data directory, the broker stopped) or
``--zookeeper HOST:PORT[/chroot]`` (cluster mode) write the credential store directly, as
``kafka-configs --zookeeper`` did -- through the broker's own stores
(broker/security/credentials.py), so the file and the znodes are written as a broker writes them.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from client.errors import ConfigError
from protocol.scram import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialFormatError,
    ScramCredential,
)
from tooling.cli.args import admin_client, positive_int
from tooling.cli.output import Output

if TYPE_CHECKING:
    from broker.security.credentials import Credentials, CredentialStore

T = TypeVar("T")


def add_users_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    users = subparsers.add_parser(
        "users", help="add, delete and list SCRAM users (SASL logins)",
        description="SCRAM credentials, stored salted and hashed by the brokers. Over the wire "
        "by default (--bootstrap, --command-config); --data-dir or --zookeeper write the store "
        "directly, for the first user (docs/security.md).")
    commands = users.add_subparsers(dest="users_command", metavar="COMMAND", required=True)
    offline = argparse.ArgumentParser(add_help=False)
    where = offline.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, metavar="DIR",
                       help="write the embedded broker's store in DIR directly (broker stopped)")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                       help="write the cluster's store in ZooKeeper directly")

    add = commands.add_parser("add", parents=[*parents, offline],
                              help="add a user, or change their password")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--mechanism", choices=SCRAM_MECHANISMS, default="SCRAM-SHA-256",
                     help="default: %(default)s")
    add.add_argument("--iterations", type=positive_int, default=MIN_ITERATIONS,
                     help="PBKDF2 iterations, 4096-16384 (default: %(default)s)")
    add.add_argument("--password-file", type=Path, metavar="FILE",
                     help="read the password from FILE's first line (default: prompt)")
    add.set_defaults(run=cmd_users_add)

    delete = commands.add_parser("delete", parents=[*parents, offline],
                                 help="delete a user's credentials")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", choices=SCRAM_MECHANISMS,
                        help="only this mechanism's credential (default: all of them)")
    delete.set_defaults(run=cmd_users_delete)

    listing = commands.add_parser("list", parents=[*parents, offline],
                                  help="users and their mechanisms (never salts or keys)")
    listing.set_defaults(run=cmd_users_list)


def cmd_users_add(args: argparse.Namespace, output: Output) -> int:
    password = _password(args.password_file)
    try:
        credential = ScramCredential.derive(args.mechanism, password, iterations=args.iterations)
    except CredentialFormatError as exc:
        raise ConfigError(str(exc)) from None
    if _offline(args):
        def add(current: Credentials) -> Credentials:
            return {**current, args.mechanism: credential}

        _in_store(args, lambda store: store.alter(args.name, add), writes=True)
    else:
        with admin_client(args) as admin:
            admin.upsert_user_scram_credential(args.name, args.mechanism, password,
                                               iterations=args.iterations)
    output.note(f"user {args.name!r}: {args.mechanism} credential set")
    return 0


def cmd_users_delete(args: argparse.Namespace, output: Output) -> int:
    if _offline(args):
        gone: list[str] = []

        def remove(current: Credentials) -> Credentials:
            gone[:] = [args.mechanism] if args.mechanism else list(current)
            if not gone or any(m not in current for m in gone):
                raise ConfigError(f"user {args.name!r} has no such credential")
            return {m: c for m, c in current.items() if m not in gone}

        _in_store(args, lambda store: store.alter(args.name, remove), writes=True)
    else:
        with admin_client(args) as admin:
            gone = ([args.mechanism] if args.mechanism else
                    list(admin.describe_user_scram_credentials([args.name])[args.name]))
            for mechanism in gone:
                admin.delete_user_scram_credential(args.name, mechanism)
    output.note(f"user {args.name!r}: {', '.join(gone)} deleted")
    return 0


def cmd_users_list(args: argparse.Namespace, output: Output) -> int:
    if _offline(args):
        stored = _in_store(args, lambda store: store.users(), writes=False)
        users = {name: {m: c.iterations for m, c in creds.items()}
                 for name, creds in stored.items() if creds}
    else:
        with admin_client(args) as admin:
            users = admin.describe_user_scram_credentials()
    if getattr(args, "json", False):
        output.json([{"user": name, "mechanisms": sorted(mechs)}
                     for name, mechs in sorted(users.items())])
    else:
        output.table("users", ["USER", "MECHANISMS"],
                     [(name, ", ".join(sorted(mechs))) for name, mechs in sorted(users.items())])
    return 0


def _offline(args: argparse.Namespace) -> bool:
    return args.data_dir is not None or args.zookeeper is not None


def _password(path: Path | None) -> str:
    if path is not None:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"--password-file {path}: {exc.strerror}") from None
        if not lines or not lines[0]:
            raise ConfigError(f"--password-file {path}: the first line is empty")
        return lines[0]
    if not sys.stdin.isatty():
        raise ConfigError("no terminal to ask for the password: use --password-file")
    first = getpass.getpass("password: ")
    if not first or first != getpass.getpass("password again: "):
        raise ConfigError("the passwords are empty or differ")
    return first


def _in_store(args: argparse.Namespace, work: Callable[[CredentialStore], Awaitable[T]], *,
              writes: bool) -> T:
    """``work`` done on the store --data-dir or --zookeeper names, the broker's own, in a trio
    run of its own. The broker's modules are imported here, not with the CLI: only these
    offline commands need them (and trio). Their log lines (a ZooKeeper session connected,
    then closed) would mix with the command's output: only warnings are shown, on stderr."""
    import trio

    from broker.security.credentials import FileCredentialStore
    from broker.structured_log import configure_logging

    configure_logging("warning")
    if args.data_dir is None:
        return trio.run(_in_zookeeper, args, work)
    store = FileCredentialStore(args.data_dir)
    try:
        if writes:
            args.data_dir.mkdir(parents=True, exist_ok=True)
        return trio.run(work, store)
    except CredentialFormatError as exc:  # it names the file
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{store.path}: {exc}") from None


async def _in_zookeeper(args: argparse.Namespace,
                        work: Callable[[CredentialStore], Awaitable[T]]) -> T:
    from broker.cluster.zookeeper import ZooKeeper, ZooKeeperUnavailableError
    from broker.security.credentials import ZooKeeperCredentialStore

    timeout_ms = args.api_timeout_ms
    try:
        zoo = ZooKeeper(args.zookeeper, session_timeout_ms=timeout_ms,
                        connection_timeout_ms=timeout_ms)
    except ValueError:
        raise ConfigError(f"--zookeeper {args.zookeeper!r} names no host:port") from None
    try:
        await zoo.start()
    except ZooKeeperUnavailableError:
        raise ConfigError(f"--zookeeper {args.zookeeper}: no ZooKeeper server answered within "
                          f"--api-timeout-ms={timeout_ms}") from None
    try:
        return await work(ZooKeeperCredentialStore(zoo))
    except CredentialFormatError as exc:  # it names the znode
        raise ConfigError(str(exc)) from None
    finally:
        await zoo.stop()
