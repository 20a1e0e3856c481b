"""``odradek groups reset-offsets``, ``delete`` and ``delete-offsets``: the commands that change
a group. The first two are allowed only while the group is Empty (no members -- its consumers
stopped); ``delete-offsets`` also while it has members, for topics they do not subscribe to.

reset-offsets plans first and prints the plan; only ``--execute`` commits it (with generation
-1, which the coordinator accepts only from outside an Empty group, so a group that gained
members meanwhile is refused there too). ``--export`` prints the plan as Kafka's plan file
(CSV ``topic,partition,offset``, no header) instead of the table; ``--from-file`` applies such a
file, so ``--to-current --export`` saves where a group is and ``--from-file`` puts it back.
Exit status: 0 done (or planned), 1 refused or failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from client.consumer import Consumer
from client.offset_reset import (
    OffsetResetError,
    ResetSpec,
    ResetTo,
    parse_datetime_ms,
    parse_reset_plan,
    partitions_to_reset,
    plan_reset,
    plan_topics,
)
from protocol.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NonEmptyGroupError
from tooling.cli.args import group_admin_client, security_options
from tooling.cli.output import Output

EMPTY = "Empty"


def add_group_change_parsers(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
) -> None:
    """Add ``reset-offsets`` and ``delete`` to the ``groups`` sub-commands."""
    reset = actions.add_parser(
        "reset-offsets",
        parents=parents,
        help="move an Empty group's committed offsets",
        description="Move the committed offsets of an Empty group (no running members) for the "
        "partitions --topic names (or the plan file --from-file names). Prints the plan; "
        "--execute commits it. Targets outside a partition's stored range are clamped into it "
        "(except --to-current's, which stay as committed).",
    )
    reset.add_argument("group", help="the group id")
    reset.add_argument(
        "--topic", action="append", metavar="T[:P,...]",
        help="a topic, or some of its partitions as T:0,1,2 (repeatable; required unless "
        "--from-file)",
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true",
                        help="the earliest offset still stored")
    target.add_argument("--to-latest", action="store_true",
                        help="the end of each partition (skip everything stored)")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="the committed offset plus N (N may be negative)")
    target.add_argument("--to-datetime", metavar="ISO",
                        help="the first message at or after this time, e.g. 2026-11-23T10:00:00 "
                        "(local time unless it names an offset such as +00:00)")
    target.add_argument("--to-current", action="store_true",
                        help="the committed offset as it is; the log end where the group has "
                        "committed nothing (Kafka's choice). With --export: save a group's "
                        "position as a plan file")
    target.add_argument("--from-file", metavar="FILE",
                        help="the offsets of a plan file (- for stdin): CSV lines "
                        "topic,partition,offset as --export prints them, or Kafka's "
                        "group,topic,partition,offset; replaces --topic")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument("--export", action="store_true",
                       help="print the plan as CSV topic,partition,offset (Kafka's plan file, "
                       "for --from-file) instead of the table; not with --json")
    reset.set_defaults(run=cmd_groups_reset_offsets, reset_parser=reset)

    delete = actions.add_parser(
        "delete", parents=parents, help="delete Empty groups and their committed offsets"
    )
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(run=cmd_groups_delete)

    delete_offsets = actions.add_parser(
        "delete-offsets",
        parents=parents,
        help="delete a group's committed offsets of a topic",
        description="Delete GROUP's committed offsets of the --topic's partitions (Kafka's "
        "--delete-offsets): of those --partition names, else of every partition the topic has "
        "and every one of it the group committed. Refused while the group's members subscribe "
        "to the topic -- stop its consumers first.",
    )
    delete_offsets.add_argument("group", help="the group id")
    delete_offsets.add_argument("--topic", required=True, metavar="T", help="the topic")
    delete_offsets.add_argument(
        "--partition", dest="partitions", type=int, nargs="+", action="extend", metavar="P",
        help="only these partitions (repeatable)",
    )
    delete_offsets.set_defaults(run=cmd_groups_delete_offsets)


def _spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec(ResetTo.EARLIEST)
    if args.to_latest:
        return ResetSpec(ResetTo.LATEST)
    if args.to_offset is not None:
        return ResetSpec(ResetTo.OFFSET, args.to_offset)
    if args.shift_by is not None:
        return ResetSpec(ResetTo.SHIFT, args.shift_by)
    if args.to_current:
        return ResetSpec(ResetTo.CURRENT)
    if args.from_file is not None:
        return ResetSpec(ResetTo.FILE, plan=parse_reset_plan(
            _read_plan(args.from_file), args.group, args.from_file))
    return ResetSpec(ResetTo.DATETIME, parse_datetime_ms(args.to_datetime))


def _read_plan(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise OffsetResetError(f"--from-file {path!r}: {exc.strerror or exc}") from None


def cmd_groups_reset_offsets(args: argparse.Namespace, output: Output) -> int:
    usage = args.reset_parser
    if args.from_file is None and not args.topic:
        usage.error("name the partitions with --topic (or give a plan with --from-file)")
    if args.from_file is not None and args.topic:
        usage.error("--from-file names its partitions itself: leave out --topic")
    if args.export and args.json:
        usage.error("--export prints CSV: leave out --json")
    spec = _spec(args)
    with group_admin_client(args) as admin:
        try:
            group = admin.describe_group(args.group)
            state, members = group.state, len(group.members)
        except GroupIdNotFoundError:
            state, members = EMPTY, 0  # no group yet: the reset creates its offsets
        if state != EMPTY:
            output.note(
                f"odradek: error: group {args.group!r} is {state} with {members} member(s); "
                "reset-offsets needs an Empty group -- stop its consumers first"
            )
            return 1
        committed = {tp: c.offset for tp, c in admin.committed_offsets(args.group).items()}
    with Consumer(
        args.bootstrap, group_id=args.group, enable_auto_commit=False,
        default_api_timeout_ms=args.api_timeout_ms, **security_options(args),
    ) as consumer:
        partitions = partitions_to_reset(
            consumer, args.topic if spec.plan is None else plan_topics(spec.plan))
        plan = plan_reset(consumer, partitions, committed, spec)
        if args.execute:
            consumer.commit(offsets=plan)
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "current_offset": committed.get(tp),
         "new_offset": offset}
        for tp, offset in sorted(plan.items())
    ]
    if args.export:
        output.out.write("".join(f"{r['topic']},{r['partition']},{r['new_offset']}\n"
                                 for r in rows))
        if not args.execute:
            output.note("dry run: --execute to commit")
    elif args.json:
        output.json({"group": args.group, "executed": bool(args.execute), "offsets": rows})
    else:
        output.table(
            f"group {args.group}: reset {spec.to.value}"
            + ("" if args.execute else " (dry run: --execute to commit)"),
            ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
            [(args.group, r["topic"], r["partition"],
              "-" if r["current_offset"] is None else r["current_offset"], r["new_offset"])
             for r in rows],
        )
    return 0


def cmd_groups_delete(args: argparse.Namespace, output: Output) -> int:
    with group_admin_client(args) as admin:
        results = admin.delete_groups(args.groups)
    if args.json:
        output.json({g: None if e is None else str(e) for g, e in results.items()})
    failed = False
    for group_id, error in results.items():
        if error is None:
            if not args.json:
                output.out.write(f"deleted group {group_id!r}\n")
            continue
        failed = True
        if isinstance(error, NonEmptyGroupError):
            output.note(f"odradek: error: group {group_id!r} has members; delete needs an "
                        "Empty group -- stop its consumers first")
        elif isinstance(error, GroupIdNotFoundError):
            output.note(f"odradek: error: group {group_id!r} does not exist")
        else:
            output.note(f"odradek: error: {error}")
    return 1 if failed else 0


def cmd_groups_delete_offsets(args: argparse.Namespace, output: Output) -> int:
    """One row per partition: deleted, or why not (exit 1 if any was refused)."""
    with group_admin_client(args) as admin:
        try:
            results = admin.delete_offsets(args.group, args.topic, args.partitions)
        except GroupIdNotFoundError:
            output.note(f"odradek: error: group {args.group!r} does not exist")
            return 1
    if not results:
        output.note(f"odradek: error: topic {args.topic!r} does not exist and group "
                    f"{args.group!r} has no offsets of it")
        return 1
    rows = [
        {"topic": tp.topic, "partition": tp.partition,
         "error": None if error is None else str(error)}
        for tp, error in sorted(results.items())
    ]
    if args.json:
        output.json({"group": args.group, "offsets": rows})
    else:
        output.table(f"group {args.group}: delete offsets of {args.topic}",
                     ("GROUP", "TOPIC", "PARTITION", "STATUS"),
                     [(args.group, r["topic"], r["partition"],
                       "deleted" if r["error"] is None else f"error: {r['error']}")
                      for r in rows])
    errors = [e for e in results.values() if e is not None]
    if any(isinstance(e, GroupSubscribedToTopicError) for e in errors):
        output.note(f"odradek: error: group {args.group!r} has members subscribed to topic "
                    f"{args.topic!r}; stop its consumers first")
    elif errors:
        output.note(f"odradek: error: {errors[0]}")
    return 1 if errors else 0
