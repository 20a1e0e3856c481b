"""``odradek acls add|remove|list`` (kafka-acls): the ACLs brokers enforce when
``authorizer_enabled`` is on.

``acls add --allow-principal User:alice --operation Read --topic orders`` adds one ACL per
principal, operation and host given; ``--resource-pattern-type prefixed`` makes the name a
prefix. ``acls remove`` removes the ACLs the same options describe (on the resource, every ACL
when no principal is given); ``acls list`` shows them. ``add_acls_parser`` adds the commands
to the ``odradek`` parser (tooling/cli/main.py), sharing its client options and ``--json``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence

from protocol.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)
from protocol.errors import InvalidRequestError
from tooling.cli.args import admin_client
from tooling.cli.output import Output

ACL_COLUMNS = ("PERMISSION", "PRINCIPAL", "HOST", "OPERATION", "RESOURCE-TYPE", "PATTERN-TYPE",
               "RESOURCE")
OPERATIONS = [op.title for op in AclOperation if op != AclOperation.ANY]


def add_acls_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options and --json."""
    acls = subparsers.add_parser("acls", help="add, remove and list ACLs (kafka-acls)")
    actions = acls.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    add = actions.add_parser(
        "add", parents=parents, help="add ACLs",
        description="One ACL per principal, operation and host given, on the resource. "
        "Needs Alter on the cluster.")
    _acl_options(add)
    add.set_defaults(run=cmd_acls_add)
    remove = actions.add_parser(
        "remove", parents=parents, help="remove ACLs",
        description="Remove the ACLs the options describe; without a principal, every ACL on "
        "the resource. Needs Alter on the cluster.")
    _acl_options(remove)
    remove.set_defaults(run=cmd_acls_remove)
    listing = actions.add_parser(
        "list", parents=parents, help="list ACLs",
        description="Every ACL, or those on a resource or of a principal. Needs Describe on "
        "the cluster.")
    _resource_options(listing, required=False, patterns=[p.title.lower() for p in PatternType])
    listing.add_argument("--principal", help="only this principal's ACLs (User:alice)")
    listing.set_defaults(run=cmd_acls_list)


def _resource_options(parser: argparse.ArgumentParser, *, required: bool,
                      patterns: list[str]) -> None:
    resource = parser.add_mutually_exclusive_group(required=required)
    resource.add_argument("--topic", help="a topic name, a prefix, or * for every topic")
    resource.add_argument("--group", help="a group id, a prefix, or * for every group")
    resource.add_argument("--cluster", action="store_true", help="the cluster")
    default = "any" if "any" in patterns else "literal"
    parser.add_argument("--resource-pattern-type", dest="pattern", choices=patterns,
                        default=default,
                        help="literal: the name itself (* matches all); prefixed: every name "
                        "starting with it; match (list): every ACL that applies to the name "
                        "(default: %(default)s)")


def _acl_options(parser: argparse.ArgumentParser) -> None:
    _resource_options(parser, required=True, patterns=["literal", "prefixed"])
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="allow this principal (User:alice, User:* for all; repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="deny this principal (repeatable)")
    parser.add_argument("--operation", action="append", default=[], type=_operation,
                        metavar="OPERATION",
                        help=f"{', '.join(OPERATIONS)} (repeatable; remove: any if none)")
    parser.add_argument("--host", action="append", default=[], metavar="HOST",
                        help="the client address it applies to (repeatable; default: * any)")


def _operation(text: str) -> AclOperation:
    try:
        op = parse_enum(AclOperation, text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if op == AclOperation.ANY:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(OPERATIONS)}")
    return op


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _principals(args: argparse.Namespace) -> list[tuple[str, AclPermissionType]]:
    return [*((p, AclPermissionType.ALLOW) for p in args.allow_principal),
            *((p, AclPermissionType.DENY) for p in args.deny_principal)]


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    resource_type, name = _resource(args)
    assert name is not None
    if not _principals(args) or not args.operation:
        raise InvalidRequestError(
            "acls add needs --allow-principal or --deny-principal, and --operation")
    pattern = parse_enum(PatternType, args.pattern)
    try:
        return [
            AclBinding(resource_type=resource_type, resource_name=name, pattern_type=pattern,
                       principal=principal, host=host, operation=op, permission=permission)
            for (principal, permission), op, host in itertools.product(
                _principals(args), args.operation, args.host or [WILDCARD])
        ]
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from None


def _show(args: argparse.Namespace, output: Output, title: str, acls: list[AclBinding]) -> None:
    acls = sorted(acls, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type,
                                       a.principal, a.operation, a.permission, a.host))
    if args.json:
        output.json([{
            "permission": a.permission.title, "principal": a.principal, "host": a.host,
            "operation": a.operation.title, "resource_type": a.resource_type.title,
            "pattern_type": a.pattern_type.title, "resource": a.resource_name,
        } for a in acls])
        return
    output.table(title, ACL_COLUMNS, [
        (a.permission.title, a.principal, a.host, a.operation.title, a.resource_type.title,
         a.pattern_type.title, a.resource_name) for a in acls])


def cmd_acls_add(args: argparse.Namespace, output: Output) -> int:
    acls = _bindings(args)
    with admin_client(args) as admin:
        admin.create_acls(acls)
    _show(args, output, "Added ACLs", acls)
    return 0


def cmd_acls_remove(args: argparse.Namespace, output: Output) -> int:
    resource_type, name = _resource(args)
    pattern = parse_enum(PatternType, args.pattern)
    principals: list[tuple[str | None, AclPermissionType]] = [*_principals(args)] or [
        (None, AclPermissionType.ANY)]
    filters = [
        AclBindingFilter(resource_type=resource_type, resource_name=name, pattern_type=pattern,
                         principal=principal, host=host, operation=op, permission=permission)
        for (principal, permission), op, host in itertools.product(
            principals, args.operation or [AclOperation.ANY], args.host or [None])
    ]
    with admin_client(args) as admin:
        removed = admin.delete_acls(filters)
    _show(args, output, "Removed ACLs", removed)
    if not removed:
        output.note("no ACL matched: nothing removed")
    return 0


def cmd_acls_list(args: argparse.Namespace, output: Output) -> int:
    resource_type, name = _resource(args)
    acl_filter = AclBindingFilter(resource_type=resource_type, resource_name=name,
                                  pattern_type=parse_enum(PatternType, args.pattern),
                                  principal=args.principal)
    with admin_client(args) as admin:
        acls = admin.describe_acls(acl_filter)
    _show(args, output, "ACLs", acls)
    return 0
