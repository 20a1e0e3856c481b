"""``odradek groups list`` and ``odradek groups describe GROUP``: enough to watch the
coordinator's machines work -- each group's state, generation, strategy and coordinator, its
members with their subscriptions and assignments, and per partition the owner, committed
offset, log end offset and lag.

``add_groups_parser`` adds them (and those of client/cli_group_changes.py) to the ``odradek``
parser (client/cli.py), sharing its ``--bootstrap`` / ``--api-timeout-ms`` / ``--json``
options; the handlers print through its ``Output``: rich tables, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from client.cli_group_changes import add_group_change_parsers
from client.group_admin import GroupAdmin, GroupDescription, PartitionLag
from client.records import TopicPartition

if TYPE_CHECKING:  # client.cli imports this module
    from client.cli import Output


def add_groups_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options (--bootstrap, --api-timeout-ms)
    and --json."""
    groups = subparsers.add_parser(
        "groups", help="list, describe, reset the offsets of and delete consumer groups"
    )
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", parents=parents, help="every group with its state and coordinator"
    )
    listing.set_defaults(run=cmd_groups_list)
    describe = actions.add_parser(
        "describe",
        parents=parents,
        help="a group's state, generation, strategy, coordinator, members, assignment, "
        "committed offsets, log end offsets and lag",
    )
    describe.add_argument("group", help="the group id")
    describe.set_defaults(run=cmd_groups_describe)
    add_group_change_parsers(actions, parents)  # reset-offsets, delete


def _group_admin(args: argparse.Namespace) -> GroupAdmin:
    return GroupAdmin(args.bootstrap, timeout_ms=args.api_timeout_ms)


def cmd_groups_list(args: argparse.Namespace, output: Output) -> int:
    with _group_admin(args) as admin:
        groups = admin.list_groups()
    if args.json:
        output.json([
            {"group": g.group_id, "state": g.state, "coordinator": g.coordinator} for g in groups
        ])
    else:
        output.table("groups", ("group", "state", "coordinator"),
                     [(g.group_id, g.state, g.coordinator) for g in groups])
    return 0


def cmd_groups_describe(args: argparse.Namespace, output: Output) -> int:
    with _group_admin(args) as admin:
        group = admin.describe_group(args.group)
        lag = admin.group_lag(group)
    described = _described(group, lag)
    if args.json:
        output.json(described)
        return 0
    coordinator = described["coordinator"]
    output.table(f"group {group.group_id}", ("state", "generation", "strategy", "coordinator"), [(
        group.state, group.generation, group.strategy or "-",
        f"{coordinator['node_id']} ({coordinator['host']}:{coordinator['port']})",
    )])
    output.table("members", ("member", "client", "host", "session ms", "subscription",
                             "assignment"), [
        (m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
         ",".join(m.subscription), _partitions_text(m.assignment))
        for m in group.members
    ])
    output.table("offsets", ("topic", "partition", "member", "committed", "log end", "lag"), [
        (p["topic"], p["partition"], _or_dash(p["member"]), _or_dash(p["committed_offset"]),
         _or_dash(p["log_end_offset"]), _or_dash(p["lag"]))
        for p in described["offsets"]
    ])
    return 0


def _described(group: GroupDescription, lag: list[PartitionLag]) -> dict[str, Any]:
    """The ``--json`` form of ``describe`` (the tables show the same)."""
    return {
        "group": group.group_id,
        "state": group.state,
        "generation": group.generation,
        "strategy": group.strategy,
        "coordinator": {"node_id": group.coordinator.node_id, "host": group.coordinator.host,
                        "port": group.coordinator.port},
        "members": [
            {
                "member_id": m.member_id, "client_id": m.client_id,
                "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
                "subscription": list(m.subscription),
                "assignment": [{"topic": tp.topic, "partition": tp.partition}
                               for tp in m.assignment],
            }
            for m in group.members
        ],
        "offsets": [
            {
                "topic": p.partition.topic, "partition": p.partition.partition,
                "member": p.owner,
                "committed_offset": None if p.committed is None else p.committed.offset,
                "metadata": None if p.committed is None else p.committed.metadata,
                "log_end_offset": p.log_end, "lag": p.lag,
            }
            for p in lag
        ],
    }


def _partitions_text(partitions: Sequence[TopicPartition]) -> str:
    """``t: 0,1,2; u: 3`` -- each topic's partitions, sorted."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return "; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def _or_dash(value: object) -> object:
    return "-" if value is None else value
