"""``odradek groups watch GROUP``: one group live in the terminal, redrawn as it changes.

The header line says the group's state, generation, strategy, coordinator and total lag; then a
table of members with the partitions each owns, a table of partitions with the committed offset,
log end offset and lag, and the timeline of the last state changes seen (client/group_view.py).
While the coordinator cannot be reached the header says ``disconnected`` and why, and the last
tables stay. Ctrl-C (or SIGTERM) leaves cleanly, exit status 0.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from client.group_view import GroupSnapshot, GroupView, member_name
from tooling.cli.args import group_admin_client, positive_int
from tooling.cli.output import Output

STATE_STYLES = {"Steady": "bold green", "PrepareRebalance": "bold yellow",
                "Rebalancing": "bold yellow", "Empty": "bold blue", "Dead": "bold red",
                "disconnected": "bold red", "none": "bold red"}


def add_watch_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    client: argparse.ArgumentParser,
) -> None:
    watch = actions.add_parser(
        "watch", parents=[client],
        help="a live view of one group: state, members, offsets and lag, state changes",
        description="Redraw the group's state, generation, members with their partitions, "
        "and per partition the committed offset, log end offset and lag, as they change, "
        "with a timeline of the last state changes. Ctrl-C leaves.",
    )
    watch.add_argument("group", metavar="GROUP", help="the group id")
    watch.add_argument("--interval-ms", type=positive_int, default=250, metavar="MS",
                       help="how often to ask the coordinator (default: %(default)s)")
    watch.set_defaults(run=cmd_groups_watch)


def cmd_groups_watch(args: argparse.Namespace, output: Output) -> int:
    console = Console(file=output.out)
    with group_admin_client(args) as admin:
        view = GroupView(admin, args.group)
        try:
            with Live(console=console, auto_refresh=False, transient=False) as live:
                while True:
                    if view.poll():
                        live.update(render(view), refresh=True)
                    time.sleep(args.interval_ms / 1000)
        except KeyboardInterrupt:
            return 0


def render(view: GroupView) -> RenderableType:
    snapshot = view.snapshot
    assert snapshot is not None, "poll() first"
    parts: list[RenderableType] = [_header(snapshot)]
    group = snapshot.group
    if group is not None:
        members = Table(title="members", title_justify="left")
        for column in ("MEMBER", "CLIENT-ID", "HOST", "PARTITIONS"):
            members.add_column(column)
        for m in group.members:
            owned = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(m.assignment))
            members.add_row(member_name(group.group_id, m.member_id), m.client_id,
                            m.client_host, owned or "-")
        parts.append(members)
        offsets = Table(title="partitions", title_justify="left")
        for column in ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                       "MEMBER"):
            offsets.add_column(column, justify="right" if column != "TOPIC" else "left")
        for p in snapshot.lag:
            offsets.add_row(
                p.partition.topic, str(p.partition.partition),
                _or_dash(None if p.committed is None else p.committed.offset),
                _or_dash(p.log_end), _or_dash(p.lag),
                "-" if p.owner is None else member_name(group.group_id, p.owner))
        parts.append(offsets)
    timeline = Text("timeline\n", style="italic")
    for entry in view.timeline:
        timeline.append(entry.text() + "\n")
    parts.append(timeline)
    return Group(*parts)


def _header(snapshot: GroupSnapshot) -> Text:
    text = Text(f"group {snapshot.group_id}  state ")
    text.append(snapshot.state, style=STATE_STYLES.get(snapshot.state, "bold"))
    group = snapshot.group
    if group is not None:
        coordinator = group.coordinator
        text.append(f"  generation {group.generation}  strategy {group.strategy or '-'}  "
                    f"members {len(group.members)}  coordinator {coordinator.host}:"
                    f"{coordinator.port} ({coordinator.node_id})  lag {snapshot.total_lag}")
    elif snapshot.missing:
        text.append("  (the group does not exist; waiting for it)")
    if snapshot.error is not None:
        text.append(f"  {snapshot.error}", style="red")
    return text


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
