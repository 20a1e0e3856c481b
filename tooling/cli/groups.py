"""``odradek groups list`` and ``odradek groups describe GROUP...`` (or ``--all-groups``):
enough to watch the coordinator's machines work.

``describe`` has the three views of Kafka's ``kafka-consumer-groups --describe``, with its
column names: by default one row per partition (committed offset, log end, lag and owner) under
the group's state (and how long it has been in it), generation, strategy and coordinator (the
broker FindCoordinator names); ``--members`` one row per member; ``--state`` one row for the
group. ``--json`` prints the same data as JSON. A group without
members gets a note on stderr, as Kafka's tool prints; a group that does not exist is an error
naming it (exit 1).

``add_groups_parser`` adds them (and those of tooling/cli/group_changes.py) to the ``odradek``
parser (tooling/cli/main.py), sharing its ``--bootstrap`` / ``--api-timeout-ms`` / ``--json``
options; the handlers print through its ``Output``: rich tables, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from client.durations import duration_text
from client.group_admin import GroupDescription, MemberDescription, PartitionLag
from protocol.errors import GroupIdNotFoundError
from tooling.cli.args import group_admin_client
from tooling.cli.group_changes import add_group_change_parsers
from tooling.cli.group_watch import add_watch_parser
from tooling.cli.output import Output

OFFSET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "MEMBER-ID", "HOST", "CLIENT-ID")
MEMBER_COLUMNS = ("GROUP", "MEMBER-ID", "INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                  "ASSIGNMENT")
STATE_COLUMNS = ("GROUP", "COORDINATOR", "STRATEGY", "STATE", "IN-STATE-FOR", "GENERATION",
                 "#MEMBERS")


def add_groups_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """``parents``: the parsers holding the client options (--bootstrap, --api-timeout-ms)
    and --json."""
    groups = subparsers.add_parser(
        "groups", help="list, describe, watch, reset the offsets of and delete consumer groups"
    )
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", parents=parents, help="every group with its state and coordinator"
    )
    listing.set_defaults(run=cmd_groups_list)
    describe = actions.add_parser(
        "describe",
        parents=parents,
        help="a group's offsets and lag per partition, its members, or its state",
        description="Without options: the group's coordinator (the broker FindCoordinator "
        "names, as HOST:PORT (ID)), strategy, state, how long it has been in that state, "
        "generation and member count, then per partition " + ", ".join(OFFSET_COLUMNS[1:])
        + ".",
    )
    describe.add_argument("groups", nargs="*", metavar="GROUP", help="the group ids")
    describe.add_argument(
        "--all-groups", action="store_true",
        help="every group any broker coordinates (ListGroups to each broker), instead of "
        "naming groups; --json then prints a list, one entry per group",
    )
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true",
                      help="one row per member: " + ", ".join(MEMBER_COLUMNS[1:]))
    view.add_argument("--state", action="store_true",
                      help="one row for the group: " + ", ".join(STATE_COLUMNS[1:]))
    describe.set_defaults(run=cmd_groups_describe, describe_parser=describe)
    remove = actions.add_parser(
        "remove-members", parents=parents,
        help="remove static members at once, by instance id",
        description="Remove static members (consumers with a group_instance_id) from GROUP at "
        "once, as Kafka's RemoveMembersFromGroup does: a static member's own LeaveGroup keeps "
        "its place until its session times out, so that a restart takes it back without a "
        "rebalance; this ends that wait.",
    )
    remove.add_argument("group", metavar="GROUP", help="the group id")
    remove.add_argument("--instance-id", dest="instance_ids", action="append", required=True,
                        metavar="ID", help="a static member's instance id (repeatable)")
    remove.set_defaults(run=cmd_groups_remove_members)
    add_group_change_parsers(actions, parents)  # reset-offsets, delete
    add_watch_parser(actions, parents[0])  # the client options; it prints no JSON


def cmd_groups_remove_members(args: argparse.Namespace, output: Output) -> int:
    with group_admin_client(args) as admin:
        results = admin.remove_members(args.group, args.instance_ids)
    if args.json:
        output.json({i: None if e is None else str(e) for i, e in results.items()})
    else:
        output.table(f"group {args.group}", ("INSTANCE-ID", "RESULT"),
                     [(i, "removed" if e is None else str(e)) for i, e in results.items()])
    return 1 if any(results.values()) else 0


def cmd_groups_list(args: argparse.Namespace, output: Output) -> int:
    with group_admin_client(args) as admin:
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
    """One group named: its tables, or its JSON value. Several named, or ``--all-groups``:
    each group's tables in turn, or a JSON list of their values (``--all-groups`` with no
    groups: an empty list). A group that goes between ListGroups and describing it is left
    out; a named group that does not exist is an error."""
    if bool(args.groups) == args.all_groups:
        args.describe_parser.error("name the groups to describe, or give --all-groups "
                                   "(not both)")
    with group_admin_client(args) as admin:
        if args.all_groups:
            group_ids = [g.group_id for g in admin.list_groups()]
        else:
            group_ids = list(dict.fromkeys(args.groups))
        described: list[tuple[GroupDescription, list[dict[str, Any]]]] = []
        for group_id in group_ids:
            try:
                group = admin.describe_group(group_id)
            except GroupIdNotFoundError:
                if not args.all_groups:
                    raise
                continue  # deleted (or expired) since ListGroups
            # only the default view asks for committed offsets and log ends
            described.append((group, [] if args.members or args.state
                              else _offsets(group, admin.group_lag(group))))
    values = [_describe_one(args, output, group, offsets) for group, offsets in described]
    if args.json:
        output.json(values if args.all_groups or len(group_ids) > 1 else values[0])
    return 0


def _describe_one(args: argparse.Namespace, output: Output, group: GroupDescription,
                  offsets: list[dict[str, Any]]) -> Any:
    """Print the group's tables (unless --json) and notes; return its JSON value."""
    if not group.members and not args.state:
        output.note(f"consumer group {group.group_id!r} has no active members")
    state = _state(group)
    if args.state:
        if not args.json:
            output.table(f"group {group.group_id}", STATE_COLUMNS, [_state_row(state)])
        return state
    members = [_member(group.group_id, m) for m in group.members]
    if args.members:
        if not args.json:
            output.table(f"members of group {group.group_id}", MEMBER_COLUMNS, [
                (m["group"], m["member_id"], m["instance_id"] or "-", m["host"],
                 m["client_id"], m["partitions"], _partitions_text(m["assignment"]))
                for m in members
            ])
        return members
    if args.json:
        return {**state, "members": members, "offsets": offsets}
    output.table(f"group {group.group_id}", STATE_COLUMNS, [_state_row(state)])
    output.table(f"offsets and lag of group {group.group_id}", OFFSET_COLUMNS, [
        (o["group"], o["topic"], o["partition"], _or_dash(o["committed_offset"]),
         _or_dash(o["log_end_offset"]), _or_dash(o["lag"]), _or_dash(o["member_id"]),
         _or_dash(o["host"]), _or_dash(o["client_id"]))
        for o in offsets
    ])
    return {**state, "members": members, "offsets": offsets}


# The JSON forms; the tables show the same fields.

def _state(group: GroupDescription) -> dict[str, Any]:
    """``state_since_ms``: when the group entered its state (the coordinator's clock, ms since
    the epoch), ``in_state_ms``: how long ago that is by this machine's clock; both None when
    the coordinator does not say."""
    return {
        "group": group.group_id,
        "coordinator": {"node_id": group.coordinator.node_id, "host": group.coordinator.host,
                        "port": group.coordinator.port},
        "strategy": group.strategy,
        "state": group.state,
        "state_since_ms": group.state_since_ms,
        "in_state_ms": group.in_state_ms(int(time.time() * 1000)),
        "generation": group.generation,
        "member_count": len(group.members),
    }


def _member(group_id: str, member: MemberDescription) -> dict[str, Any]:
    return {
        "group": group_id, "member_id": member.member_id, "instance_id": member.instance_id,
        "host": member.client_host,
        "client_id": member.client_id, "session_timeout_ms": member.session_timeout_ms,
        "subscription": list(member.subscription), "partitions": len(member.assignment),
        "assignment": [{"topic": tp.topic, "partition": tp.partition}
                       for tp in sorted(member.assignment)],
    }


def _offsets(group: GroupDescription, lag: list[PartitionLag]) -> list[dict[str, Any]]:
    """One row per partition the group owns or has committed; the owner's host and client id
    are None where no member owns it."""
    by_id = {m.member_id: m for m in group.members}
    rows = []
    for p in lag:
        owner = by_id.get(p.owner) if p.owner is not None else None
        rows.append({
            "group": group.group_id, "topic": p.partition.topic,
            "partition": p.partition.partition,
            "committed_offset": None if p.committed is None else p.committed.offset,
            "metadata": None if p.committed is None else p.committed.metadata,
            "log_end_offset": p.log_end, "lag": p.lag,
            "member_id": p.owner,
            "host": None if owner is None else owner.client_host,
            "client_id": None if owner is None else owner.client_id,
        })
    return rows


def _state_row(state: dict[str, Any]) -> tuple[object, ...]:
    coordinator = state["coordinator"]
    return (state["group"], f"{coordinator['host']}:{coordinator['port']} "
            f"({coordinator['node_id']})", state["strategy"] or "-", state["state"],
            duration_text(state["in_state_ms"]), state["generation"], state["member_count"])


def _partitions_text(assignment: Sequence[dict[str, Any]]) -> str:
    """``t: 0,1,2; u: 3`` -- each topic's partitions, in the (sorted) order given."""
    by_topic: dict[str, list[int]] = {}
    for a in assignment:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return "; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def _or_dash(value: object) -> object:
    return "-" if value is None else value
