"""``odradek quotas set|describe|delete`` (Kafka's kafka-configs --entity-type users/clients):
produce and fetch byte-rate quotas of users, client ids, or a user's client id.

``quotas set --user alice --producer-byte-rate 1048576`` sets alice's quota; ``--client-id``
alone sets a client id's, both together the quota of that user's client; ``--user-default``
and ``--client-id-default`` name the default entity. ``add_quotas_parser`` adds the commands
to the ``odradek`` parser (tooling/cli/main.py), sharing its client options and ``--json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from client.admin import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from protocol.errors import InvalidRequestError
from tooling.cli.args import admin_client, positive_int
from tooling.cli.output import Output

QUOTA_COLUMNS = ("USER", "CLIENT-ID", "PRODUCER-BYTE-RATE", "CONSUMER-BYTE-RATE")
_KEYS = {"producer": PRODUCER_BYTE_RATE, "consumer": CONSUMER_BYTE_RATE}


def add_quotas_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options and --json."""
    quotas = subparsers.add_parser(
        "quotas", help="set, describe and delete byte-rate quotas of users and client ids")
    actions = quotas.add_subparsers(dest="quotas_command", metavar="ACTION", required=True)
    set_ = actions.add_parser(
        "set", parents=parents, help="set quotas",
        description="A client over its quota has its responses held back (throttle_time_ms), "
        "never disconnected. Needs AlterConfigs on the cluster.")
    _entity_options(set_, required=True)
    set_.add_argument("--producer-byte-rate", type=positive_int, metavar="BYTES_PER_S")
    set_.add_argument("--consumer-byte-rate", type=positive_int, metavar="BYTES_PER_S")
    set_.set_defaults(run=cmd_quotas_set)
    describe = actions.add_parser(
        "describe", parents=parents, help="show quotas",
        description="The quotas of the entity named, or of every entity. Needs "
        "DescribeConfigs on the cluster.")
    _entity_options(describe, required=False)
    describe.set_defaults(run=cmd_quotas_describe)
    delete = actions.add_parser(
        "delete", parents=parents, help="delete quotas",
        description="Delete an entity's quotas (both, unless one is named).")
    _entity_options(delete, required=True)
    delete.add_argument("--quota", choices=sorted(_KEYS), action="append", default=[],
                        help="only this quota (repeatable; default: both)")
    delete.set_defaults(run=cmd_quotas_delete)


def _entity_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--user", help="a user name (the principal without User:)")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = parser.add_mutually_exclusive_group()
    client.add_argument("--client-id", help="a client id")
    client.add_argument("--client-id-default", action="store_true",
                        help="the default client id")
    parser.set_defaults(entity_required=required)


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    if args.user is not None or args.user_default:
        entity["user"] = args.user
    if args.client_id is not None or args.client_id_default:
        entity["client-id"] = args.client_id
    if args.entity_required and not entity:
        raise InvalidRequestError(
            "name a user (--user / --user-default), a client id (--client-id / "
            "--client-id-default), or both")
    return entity


def _named(entity: dict[str, str | None], key: str) -> str:
    if key not in entity:
        return ""
    name = entity[key]
    return "<default>" if name is None else name


def cmd_quotas_set(args: argparse.Namespace, output: Output) -> int:
    entity = _entity(args)
    values = {PRODUCER_BYTE_RATE: args.producer_byte_rate,
              CONSUMER_BYTE_RATE: args.consumer_byte_rate}
    values = {k: v for k, v in values.items() if v is not None}
    if not values:
        raise InvalidRequestError("give --producer-byte-rate, --consumer-byte-rate or both")
    with admin_client(args) as admin:
        admin.alter_client_quotas(entity, values)
    output.note(f"set {', '.join(f'{k}={v}' for k, v in values.items())} for "
                f"user {_named(entity, 'user') or '-'}, client-id "
                f"{_named(entity, 'client-id') or '-'}")
    return 0


def cmd_quotas_describe(args: argparse.Namespace, output: Output) -> int:
    entity = _entity(args)
    with admin_client(args) as admin:
        quotas = admin.describe_client_quotas(entity or None)
    if args.json:
        output.json([{"entity": q.entity, "values": q.values} for q in quotas])
        return 0
    output.table("Client quotas", QUOTA_COLUMNS, [
        (_named(q.entity, "user"), _named(q.entity, "client-id"),
         q.values.get(PRODUCER_BYTE_RATE, ""), q.values.get(CONSUMER_BYTE_RATE, ""))
        for q in quotas])
    return 0


def cmd_quotas_delete(args: argparse.Namespace, output: Output) -> int:
    entity = _entity(args)
    keys = [_KEYS[q] for q in args.quota] or list(_KEYS.values())
    with admin_client(args) as admin:
        admin.alter_client_quotas(entity, remove=keys)
    output.note(f"deleted {', '.join(keys)} of user {_named(entity, 'user') or '-'}, "
                f"client-id {_named(entity, 'client-id') or '-'}")
    return 0
