"""``odradek cluster up / down / status``: a cluster on this machine, and the health of any.

``up`` and ``down`` drive tooling.local.cluster (processes only; the brokers outlive the
command, recorded in DIR/cluster.json). ``status`` asks brokers for metadata like every other
client command and counts what Kafka operators watch (tooling.cluster_health): offline
partitions, under-replicated partitions and preferred-leader imbalance. It also shows the group
coordinator's load, broker by broker: the ``__consumer_offsets`` partitions each leads and the
groups it coordinates with their members (ListGroups and DescribeGroups sent to each broker) --
a group's coordinator follows from its name (crc32 of the id), so a few busy groups can land on
one broker. ``verify-replicas`` compares every replica of each partition byte for byte
(tooling/cli/verify_replicas.py).

``add_cluster_parser`` adds them to the ``odradek`` parser (tooling/cli/main.py); the handlers print
through its ``Output``: rich tables, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from client.admin import Admin
from client.group_admin import CoordinatorLoad, GroupAdmin
from protocol.partitions import OFFSETS_TOPIC, offsets_partition_for
from tooling.cli.args import (
    DEFAULT_BOOTSTRAP,
    add_command_config,
    positive_int,
    security_options,
)
from tooling.cli.output import Output
from tooling.cli.verify_replicas import add_verify_replicas_parser
from tooling.cluster_health import ClusterHealth, PartitionHealth, cluster_health
from tooling.local.cluster import (
    LOOPBACK,
    ClusterRecord,
    LocalCluster,
    LocalClusterError,
    zookeeper_mode,
)

DEFAULT_DIR = "./odradek-cluster"


def add_cluster_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    json_parent: argparse.ArgumentParser,
) -> None:
    """``json_parent``: the parser holding --json."""
    cluster = subparsers.add_parser(
        "cluster",
        help="start or stop a local cluster; show any cluster's brokers and partition health",
        description="`up` starts ZooKeeper and brokers on 127.0.0.1 that keep running after "
        "the command exits; `down` stops them; `status` shows brokers, leaders, replicas, "
        "ISR and the counts operators watch.",
    )
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    directory = argparse.ArgumentParser(add_help=False)
    directory.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help="where the cluster keeps cluster.json, broker data and logs (default: %(default)s)",
    )

    up = actions.add_parser(
        "up",
        parents=[directory, json_parent],
        help="start a local cluster: ZooKeeper and N brokers on 127.0.0.1",
        description="Start a ZooKeeper (an ensemble with --zookeepers; none when --zookeeper "
        "names one) and N brokers "
        "(ids 0..N-1) on 127.0.0.1 with free ports, in their own sessions so they keep "
        "running after this command. Data, logs and cluster.json go to --dir. Prints the "
        "bootstrap list. Refuses when --dir already has a running cluster.",
    )
    up.add_argument(
        "--brokers", type=positive_int, default=3, metavar="N",
        help="how many brokers (default: %(default)s)",
    )
    zookeeper = up.add_mutually_exclusive_group()
    zookeeper.add_argument(
        "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="use this ZooKeeper instead of starting one; the brokers use its chroot "
        "(default chroot: /odradek)",
    )
    zookeeper.add_argument(
        "--zookeepers", type=positive_int, default=1, metavar="N",
        help="start N ZooKeeper servers as one ensemble (3 or 5: it serves while a majority "
        "runs; default: %(default)s, a standalone server)",
    )
    up.add_argument(
        "--rack-count", type=positive_int, metavar="K",
        help="give the brokers racks rack-0..rack-(K-1), round-robin (default: no racks)",
    )
    up.add_argument(
        "--broker-config", type=Path, metavar="TOML",
        help="a settings file passed to every broker with --config (e.g. "
        "zookeeper_session_timeout_ms)",
    )
    up.set_defaults(run=cmd_cluster_up)

    down = actions.add_parser(
        "down",
        parents=[directory, json_parent],
        help="stop the local cluster recorded in --dir",
        description="Stop each broker recorded in DIR/cluster.json (SIGTERM; SIGKILL after a "
        "deadline), then the ZooKeeper server(s) if `up` started them. A recorded PID that "
        "now runs another program is left alone. Data and logs stay.",
    )
    down.set_defaults(run=cmd_cluster_down)

    status = actions.add_parser(
        "status",
        parents=[json_parent],
        help="brokers, controller, partition leaders/replicas/ISR, health counts and the "
        "groups each broker coordinates",
        description="Brokers (and which is controller); per partition its leader, replicas "
        "and ISR; the counts of offline partitions (no leader), under-replicated "
        "partitions (ISR smaller than replicas) and preferred-leader imbalance (leader is not "
        "the first replica); and per broker the __consumer_offsets partitions it leads and "
        "the consumer groups it coordinates (each group's coordinator is the leader of "
        "partition crc32(group id) % partitions), with their state and member counts.",
    )
    where = status.add_mutually_exclusive_group()
    where.add_argument(
        "--bootstrap",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="brokers to ask (default: $ODRADEK_BOOTSTRAP or 127.0.0.1:9092)",
    )
    where.add_argument(
        "--dir", type=Path, help="ask the local cluster recorded in DIR/cluster.json"
    )
    status.add_argument(
        "--api-timeout-ms", dest="api_timeout_ms", type=positive_int, default=10_000,
        metavar="MS", help="how long to wait for brokers to answer (default: %(default)s)",
    )
    add_command_config(status)
    status.set_defaults(run=cmd_cluster_status)

    elect = actions.add_parser(
        "elect-leaders",
        parents=[json_parent],
        help="move leadership back to each partition's preferred (first) replica",
        description="Preferred-leader election (Kafka's kafka-leader-election --election-type "
        "preferred), done by the controller: a partition moves when its first replica is live "
        "and in the ISR.",
    )
    elect.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                       help="only this topic's partitions (repeatable; default: all)")
    elect_where = elect.add_mutually_exclusive_group()
    elect_where.add_argument("--bootstrap", metavar="HOST:PORT[,HOST:PORT...]",
                             help="brokers to ask (default: the local cluster in "
                             f"{DEFAULT_DIR}, else $ODRADEK_BOOTSTRAP or 127.0.0.1:9092)")
    elect_where.add_argument("--dir", type=Path,
                             help="ask the local cluster recorded in DIR/cluster.json")
    elect.add_argument(
        "--api-timeout-ms", dest="api_timeout_ms", type=positive_int, default=10_000,
        metavar="MS", help="how long to wait for brokers to answer (default: %(default)s)",
    )
    add_command_config(elect)
    elect.set_defaults(run=cmd_cluster_elect_leaders)

    add_verify_replicas_parser(actions, json_parent, DEFAULT_DIR, _status_bootstrap)


# ---------------------------------------------------------------------------------- up, down


def cmd_cluster_up(args: argparse.Namespace, output: Output) -> int:
    # absolute: the brokers run in the cluster's directory
    config = args.broker_config
    broker_args = [] if config is None else ["--config", str(config.absolute())]
    cluster = LocalCluster(args.dir, broker_args=broker_args)
    if not args.json:
        output.note(f"starting {args.brokers} broker(s) in {cluster.directory} ...")
    record = cluster.up(args.brokers, zookeeper=args.zookeeper, rack_count=args.rack_count or 0,
                        zookeepers=args.zookeepers)
    if args.json:
        output.json({"dir": str(cluster.directory), **record.to_json()})
        return 0
    output.table(
        f"cluster in {cluster.directory}",
        ("broker", "address", "kafka address", "rack", "pid", "log"),
        [
            (b.broker_id, b.address, b.kafka_address or "-", b.rack or "-", b.process.pid,
             b.log_file)
            for b in record.brokers
        ],
    )
    for line in _zookeeper_lines(record):
        output.out.write(line + "\n")
    output.out.write(f"bootstrap: {record.bootstrap}\n")
    output.out.write(f"Kafka clients (kcat, librdkafka, kafka-python, kafkajs): "
                     f"{record.kafka_bootstrap}\n")
    output.note(f"stop it with: odradek cluster down --dir {args.dir}")
    return 0


def _zookeeper_lines(record: ClusterRecord) -> list[str]:
    if record.zookeeper_servers:
        return [f"zookeeper: {record.zookeeper_connect} (an ensemble of "
                f"{len(record.zookeeper_servers)})"] + [
            f"  server {z.server_id}: {LOOPBACK}:{z.port} (pid {z.process.pid}, log {z.log_file})"
            for z in record.zookeeper_servers
        ]
    if record.zookeeper is None:
        return [f"zookeeper: {record.zookeeper_connect} (not started here)"]
    return [
        f"zookeeper: {record.zookeeper_connect} (pid {record.zookeeper.pid}, "
        f"log {record.zookeeper_log})"
    ]


def cmd_cluster_down(args: argparse.Namespace, output: Output) -> int:
    outcomes = LocalCluster(args.dir).down()
    if args.json:
        output.json([{"process": name, "pid": pid, "outcome": how} for name, pid, how in outcomes])
        return 0
    for name, pid, how in outcomes:
        if how == "not ours":
            output.note(f"{name}: pid {pid} now runs another program; left alone")
        else:
            output.out.write(f"{name} (pid {pid}): {how}\n")
    return 0


# ------------------------------------------------------------------------------------ status


def cmd_cluster_status(args: argparse.Namespace, output: Output) -> int:
    with GroupAdmin(_status_bootstrap(args), timeout_ms=args.api_timeout_ms,
                   **security_options(args)) as admin:
        health = cluster_health(admin.cluster_metadata())
        loads = admin.coordinator_loads()
    coordinators = coordinators_json(health, loads)
    kafka = _kafka_addresses(args)
    ensemble = _zookeeper_servers(args)
    if args.json:
        output.json({**health_json(health, kafka), "group_coordinators": coordinators,
                     **({"zookeeper_servers": ensemble} if ensemble else {})})
        return 0
    _print_health(output, health, kafka)
    _print_coordinators(output, coordinators)
    if ensemble:
        output.table("zookeeper ensemble", ("server", "address", "pid", "mode"), [
            (z["id"], z["address"], z["pid"], z["mode"] or "not serving") for z in ensemble])
    for c in coordinators:
        if c["error"]:
            output.note(f"broker {c['node_id']} did not list its groups: {c['error']}")
    if health.controller_id not in {b.node_id for b in health.brokers}:
        output.note("no live broker is controller")
    if health.absent_replicas:
        ids = ", ".join(map(str, health.absent_replicas))
        output.note(f"brokers named as replicas but not live: {ids}")
    return 0


def _print_health(output: Output, health: ClusterHealth, kafka: Mapping[int, str]) -> None:
    """The brokers, the partitions and the three counts operators watch, as tables; a
    brokers' column of Kafka-protocol listeners when the local cluster's record knows them."""
    kafka_column = ("kafka address",) if kafka else ()
    output.table(
        f"brokers of cluster {health.cluster_id or '-'}",
        ("id", "address", *kafka_column, "controller", "leader of", "replicas"),
        [
            (
                b.node_id,
                f"{b.host}:{b.port}",
                *((kafka.get(b.node_id, "-"),) if kafka else ()),
                "yes" if b.node_id == health.controller_id else "",
                sum(p.leader == b.node_id for p in health.partitions),
                sum(b.node_id in p.replicas for p in health.partitions),
            )
            for b in health.brokers
        ],
    )
    output.table(
        "partitions",
        ("topic", "partition", "leader", "replicas", "isr", "state"),
        [
            (
                p.topic,
                p.partition,
                p.leader,
                ",".join(map(str, p.replicas)),
                ",".join(map(str, p.isr)),
                _state(p),
            )
            for p in health.partitions
        ],
    )
    output.table(
        "health",
        ("offline partitions", "under-replicated partitions", "preferred-leader imbalance"),
        [
            (
                health.offline_partitions,
                health.under_replicated_partitions,
                health.preferred_leader_imbalance,
            )
        ],
    )


def _print_coordinators(output: Output, coordinators: list[dict[str, Any]]) -> None:
    """Each broker's share of group coordination, then its groups (when there are any)."""
    output.table(
        "group coordinators",
        ("broker", f"{OFFSETS_TOPIC} partitions led", "groups", "members"),
        [
            (
                c["node_id"],
                f"{len(c['offsets_partitions'])}: "
                + (",".join(map(str, c["offsets_partitions"])) or "-"),
                "?" if c["error"] else len(c["groups"]),
                "?" if c["error"] else c["member_count"],
            )
            for c in coordinators
        ],
    )
    groups = [(c["node_id"], g) for c in coordinators for g in c["groups"]]
    if groups:
        output.table(
            "groups by coordinator",
            ("broker", "group", "offsets partition", "state", "generation", "members"),
            [
                (node, g["group"], _or_dash(g["offsets_partition"]), g["state"],
                 _or_dash(g["generation"]), _or_dash(g["members"]))
                for node, g in groups
            ],
        )


def cmd_cluster_elect_leaders(args: argparse.Namespace, output: Output) -> int:
    with Admin(_status_bootstrap(args), timeout_ms=args.api_timeout_ms,
                   **security_options(args)) as admin:
        wanted = None
        if args.topic:
            described = admin.describe_topics(args.topic)
            wanted = [(t.name, p) for t in described for p in sorted(t.partitions)]
        elected = admin.elect_leaders(wanted)
    if args.json:
        output.json([{"topic": t, "partition": p} for t, p in elected])
    elif elected:
        for topic, partition in elected:
            output.out.write(f"{topic}-{partition}: leader moved to its preferred replica\n")
    else:
        output.out.write("every partition already has its preferred leader (or it cannot "
                         "take over: not live or not in sync)\n")
    return 0


def _status_bootstrap(args: argparse.Namespace) -> str:
    if args.dir is not None:
        record = LocalCluster(args.dir).read()
        if record is None or not record.bootstrap:
            raise LocalClusterError(f"no cluster recorded in {args.dir / 'cluster.json'}")
        return record.bootstrap
    if args.bootstrap:
        return str(args.bootstrap)
    local = LocalCluster(Path(DEFAULT_DIR)).read()  # `cluster up` with its default dir
    if local is not None and local.bootstrap:
        return local.bootstrap
    return os.environ.get("ODRADEK_BOOTSTRAP", DEFAULT_BOOTSTRAP)


def _zookeeper_servers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The ZooKeeper ensemble the local cluster's record names (as ``_kafka_addresses``
    finds the record), each server with what ``srvr`` says it is now: leader, follower, or
    None while it does not serve (down, or without a majority). Empty without an ensemble."""
    if args.bootstrap:
        return []
    record = LocalCluster(args.dir if args.dir is not None else Path(DEFAULT_DIR)).read()
    if record is None:
        return []
    return [
        {"id": z.server_id, "address": f"{LOOPBACK}:{z.port}", "pid": z.process.pid,
         "mode": zookeeper_mode(z.port) if z.process.is_running() else None}
        for z in record.zookeeper_servers
    ]


def _kafka_addresses(args: argparse.Namespace) -> dict[int, str]:
    """Each broker's Kafka-protocol listener by id, from the local cluster's record (``up``
    reads them off the brokers' stdout; Metadata does not carry them): --dir's, else the
    default directory's unless --bootstrap names the brokers. Empty when there is none."""
    if args.bootstrap:
        return {}
    record = LocalCluster(args.dir if args.dir is not None else Path(DEFAULT_DIR)).read()
    if record is None:
        return {}
    return {b.broker_id: b.kafka_address for b in record.brokers if b.kafka_address}


def _state(p: PartitionHealth) -> str:
    problems = [
        name
        for name, present in (
            ("offline", p.offline),
            ("under-replicated", p.under_replicated),
            ("not preferred leader", not p.preferred_leader),
        )
        if present
    ]
    return ", ".join(problems) or "ok"


def _or_dash(value: object) -> object:
    return "-" if value is None else value


def coordinators_json(health: ClusterHealth, loads: list[CoordinatorLoad]) -> list[dict[str, Any]]:
    """``status --json``'s ``group_coordinators``: per live broker, the ``__consumer_offsets``
    partitions it leads (Metadata) and the groups it coordinates (ListGroups,
    DescribeGroups), each with its offsets partition, state, generation and member count;
    ``error`` says why a broker's groups are unknown (else null)."""
    offsets = [p for p in health.partitions if p.topic == OFFSETS_TOPIC]
    count = len(offsets)
    by_node = {load.node_id: load for load in loads}
    out = []
    for broker in health.brokers:
        load = by_node.get(broker.node_id, CoordinatorLoad(broker.node_id, (), "not asked"))
        out.append({
            "node_id": broker.node_id,
            "offsets_partitions": [p.partition for p in offsets if p.leader == broker.node_id],
            "group_count": len(load.groups),
            "member_count": load.members,
            "groups": [
                {
                    "group": g.group_id,
                    "offsets_partition": offsets_partition_for(g.group_id, count) if count
                    else None,
                    "state": g.state, "generation": g.generation, "members": g.members,
                }
                for g in load.groups
            ],
            "error": load.error,
        })
    return out


def health_json(
    health: ClusterHealth, kafka: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """``status --json``: the same fields as the tables; ``kafka_address`` is null where
    ``kafka`` (the local cluster's record) does not know the broker's Kafka listener."""
    kafka = kafka or {}
    return {
        "cluster_id": health.cluster_id,
        "controller_id": health.controller_id,
        "brokers": [
            {
                "node_id": b.node_id,
                "host": b.host,
                "port": b.port,
                "kafka_address": kafka.get(b.node_id),
                "controller": b.node_id == health.controller_id,
            }
            for b in health.brokers
        ],
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline": p.offline,
                "under_replicated": p.under_replicated,
                "preferred_leader": p.preferred_leader,
            }
            for p in health.partitions
        ],
        "offline_partitions": health.offline_partitions,
        "under_replicated_partitions": health.under_replicated_partitions,
        "preferred_leader_imbalance": health.preferred_leader_imbalance,
        "absent_replicas": list(health.absent_replicas),
    }
