"""``odradek users add|delete|list``: SCRAM credentials (Kafka's ``kafka-configs --alter
--add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``).

Over the wire (AlterUserScramCredentials, KIP-554) the credential is derived here from the
password under a fresh salt, so the password never leaves this process. The password comes from
``--password-file`` (its first line) or a prompt, never from the command line (where ``ps`` and
the shell history would keep it).

The first user of a cluster whose only listeners need a login cannot be added over the wire:
``--data-dir DIR`` (an embedded broker's data directory, the broker stopped) or
``--zookeeper HOST:PORT[/chroot]`` (cluster mode) write the credential store directly, as
``kafka-configs --zookeeper`` did.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from client.cli_args import admin_client, positive_int
from client.errors import ConfigError
from protocol.scram import (
    CREDENTIALS_FILE,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialFormatError,
    ScramCredential,
    decode_user,
    decode_users,
    encode_user,
    encode_users,
)
from protocol.zk_names import USERS_ZNODE, unescape, user_znode

if TYPE_CHECKING:  # client.cli imports this module
    from client.cli import Output

Credentials = dict[str, ScramCredential]


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
        with _store(args) as users:
            users.setdefault(args.name, {})[args.mechanism] = credential
    else:
        with admin_client(args) as admin:
            admin.upsert_user_scram_credential(args.name, args.mechanism, password,
                                               iterations=args.iterations)
    output.note(f"user {args.name!r}: {args.mechanism} credential set")
    return 0


def cmd_users_delete(args: argparse.Namespace, output: Output) -> int:
    if _offline(args):
        with _store(args) as users:
            current = users.get(args.name, {})
            gone = [args.mechanism] if args.mechanism else list(current)
            if not gone or any(current.pop(m, None) is None for m in gone):
                raise ConfigError(f"user {args.name!r} has no such credential")
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
        with _store(args) as stored:
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


@contextlib.contextmanager
def _store(args: argparse.Namespace) -> Iterator[dict[str, Credentials]]:
    """Every user's credentials from the store named, written back when the block ends."""
    if args.data_dir is not None:
        path = args.data_dir / CREDENTIALS_FILE
        try:
            users = decode_users(path.read_bytes()) if path.exists() else {}
        except (OSError, CredentialFormatError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        yield users
        args.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(encode_users(users))
        os.replace(tmp, path)
        return
    from kazoo.client import KazooClient  # only the offline cluster path needs it
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    hosts, _, chroot = args.zookeeper.partition("/")
    if chroot:
        root = KazooClient(hosts=hosts, timeout=args.api_timeout_ms / 1000)
        root.start(timeout=args.api_timeout_ms / 1000)
        root.ensure_path("/" + chroot)
        root.stop()
    zk = KazooClient(hosts=args.zookeeper, timeout=args.api_timeout_ms / 1000)
    zk.start(timeout=args.api_timeout_ms / 1000)
    try:
        try:
            names = zk.get_children(USERS_ZNODE)
        except NoNodeError:
            names = []
        nodes = {unescape(n): zk.get(f"{USERS_ZNODE}/{n}") for n in names}
        users = {name: decode_user(data) for name, (data, _) in nodes.items()}
        yield users
        for name, creds in users.items():
            data, stat = nodes.get(name, (None, None))
            if stat is not None and creds == decode_user(data):
                continue
            try:  # conditional on what was read: a broker may change the node's quotas
                if stat is not None:
                    zk.set(user_znode(name), encode_user(creds, data), version=stat.version)
                elif creds:
                    zk.create(user_znode(name), encode_user(creds), makepath=True)
            except (BadVersionError, NodeExistsError, NoNodeError):
                raise ConfigError(f"user {name!r} was changed meanwhile in ZooKeeper: run the "
                                  "command again") from None
    finally:
        zk.stop()
