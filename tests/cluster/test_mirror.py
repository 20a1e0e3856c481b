"""``odradek mirror`` between real clusters, each in a ZooKeeper chroot of its own (one session
ZooKeeper): messages keep their partition number, order, keys, values and timestamps; stored
compressed wrappers reach the target as the source stored them; target topics follow the
source's partitions and kept configs; ``mirror status`` reads lag 0 once the mirror caught up;
two processes in one group share the partitions and one killed loses nothing; two sources
renamed into one SASL_SSL target do not collide."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from broker.log import layout
from client.admin import Admin
from client.consumer import Consumer
from client.group_admin import GroupAdmin
from client.offsets import LATEST
from client.producer import Producer
from client.records import TopicPartition
from client.security import SecurityConfig, SecurityOptions
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.cluster.conftest import Cluster, until
from tests.cluster.mirror_process import MirrorProcess
from tests.cluster.test_durability import NumberedProducer
from tests.cluster.test_security_cluster import sasl_ssl_cluster
from tests.security.support import PASSWORD, properties_file
from tooling.local.cluster import ZooKeeperServer
from tooling.mirror.naming import Renaming
from tooling.mirror.status import mirror_status

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: commits every 200 ms, no progress line: the tests wait on ``mirror status``
MIRROR_ARGS = ("--commit-interval-ms", "200", "--progress-interval-s", "0",
               "--api-timeout-ms", "20000")
#: a lone broker keeps a mirror group's offsets (__consumer_offsets) on itself
LONE = {"offsets_topic_replication_factor": 1}
#: explicit create times, far from now, so a message stamped by a broker would show
BASE_TIMESTAMP = 1_500_000_000_000

#: (offset, key, value, timestamp) of each message of a partition, in log order
Log = list[tuple[int, bytes | None, bytes | None, int]]


def chroot(zookeeper: ZooKeeperServer) -> str:
    """Another cluster's own chroot of the session's ZooKeeper."""
    return f"{zookeeper.connect}/t-{uuid.uuid4().hex}"


def start_all(*clusters: Cluster) -> None:
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
        for future in [pool.submit(c.start) for c in clusters]:
            future.result()


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str] | None = None,
                 security: SecurityOptions | None = None) -> None:
    with Admin(bootstrap, timeout_ms=20_000, **(security or {})) as admin:
        admin.create_topic(name, partitions, replication_factor, configs)

        def led() -> bool:
            (info,) = admin.describe_topics([name])
            return len(info.partitions) == partitions and all(
                p.leader >= 0 for p in info.partitions.values())

        until(led, 20, f"every partition of {name!r} led")


def produce(bootstrap: str, topic: str, count: int, *, compression: str = "none",
            prefix: str = "", first: int = 0) -> dict[int, Log]:
    """Messages ``first`` to ``first + count``, even ones keyed (seven keys), odd ones keyless,
    every third with headers, each with its own create time; what the source acknowledged, by
    partition."""
    sent = []
    with Producer(bootstrap, acks="all", compression=compression, linger_ms=20) as producer:
        for i in range(first, first + count):
            key = b"key-%d" % (i % 7) if i % 2 == 0 else None
            value = f"{prefix}{topic}-{i}-".encode() * (1 + i % 5)
            timestamp = BASE_TIMESTAMP + 1_000 * i
            headers = [("n", b"%d" % i), ("none", None)] if i % 3 == 0 else None
            sent.append((key, value, timestamp, producer.send(topic, value, key,
                                                              timestamp=timestamp,
                                                              headers=headers)))
        producer.flush(30)
    acked: dict[int, Log] = {}
    for key, value, timestamp, future in sent:
        meta = future.result(0)
        acked.setdefault(meta.partition, []).append((meta.offset, key, value, timestamp))
    return {p: sorted(log) for p, log in acked.items()}


def read_all(bootstrap: str, topic: str, security: SecurityOptions | None = None,
             timeout: float = 30.0) -> dict[int, Log]:
    """Every message of every partition of ``topic``, up to the ends when it starts."""
    with Admin(bootstrap, **(security or {})) as admin:
        (info,) = admin.describe_topics([topic])
    tps = [TopicPartition(topic, p) for p in sorted(info.partitions)]
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", request_timeout_ms=5_000,
                        default_api_timeout_ms=int(timeout * 1000), **(security or {}))
    try:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: dict[int, Log] = {tp.partition: [] for tp in tps}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read up to {ends} in {timeout} s"
            for r in consumer.poll(200):
                if r.offset < ends[TopicPartition(topic, r.partition)]:
                    got[r.partition].append((r.offset, r.key, r.value, r.timestamp))
        return got
    finally:
        consumer.close()


def caught_up(source: str, target: str, group: str, ends: dict[TopicPartition, int], *,
              renaming: Renaming | None = None,
              target_security: SecurityOptions | None = None) -> bool:
    """Whether the group has committed every partition of ``ends`` up to its end."""
    with GroupAdmin(source, timeout_ms=5_000) as source_admin, \
            Admin(target, timeout_ms=5_000, **(target_security or {})) as target_admin:
        rows = mirror_status(source_admin, target_admin, group, renaming or Renaming())
    return {r.source: r.committed for r in rows} == ends


def status_json(source: str, target: str, group: str, *extra: str) -> list[dict[str, Any]]:
    """``odradek mirror status --json``'s rows."""
    done = subprocess.run(
        [sys.executable, "-m", "tooling.cli", "mirror", "status", "--source", source,
         "--target", target, "--group", group, "--json", *extra],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def end_all(*mirrors: MirrorProcess) -> None:
    """SIGKILL the mirrors a failed test left running."""
    for mirror in mirrors:
        if mirror.running():
            mirror.kill()


def ends_of(logs: dict[str, dict[int, Log]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, p): len(log) for t, by_p in logs.items() for p, log in by_p.items()}


def partition_count(bootstrap: str, topic: str) -> tuple[int, int]:
    """(partitions, replicas of each) of ``topic``."""
    with Admin(bootstrap) as admin:
        (info,) = admin.describe_topics([topic])
    replicas = {len(p.replicas) for p in info.partitions.values()}
    assert len(replicas) == 1, info
    return len(info.partitions), replicas.pop()


def topic_overrides(bootstrap: str, topic: str) -> dict[str, str | None]:
    with Admin(bootstrap) as admin:
        return {c.name: c.value for c in admin.describe_configs([topic])[topic]
                if c.source == "topic"}


def first_segment(broker: BrokerProcess, topic: str, partition: int) -> Path:
    return layout.segment_path(broker.data_dir / layout.partition_dir_name(topic, partition), 0,
                               layout.LOG)


#: what a copied record batch does not keep of its source's: the producer identity (stripped,
#: so the CRC changes with it) and the partition leader epoch (the target leader's)
NOT_COPIED = ("crc", "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch")


def dump_batches(processes: Sequence[tuple[BrokerProcess, str, int]]
                 ) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """``odradek log dump --deep --json`` of each (broker, topic, partition)'s first segment:
    the record batches, as that broker stored them (without the file's name), their records
    (offsets, timestamps, sizes, headers) and all."""
    paths = {str(first_segment(b, t, p)): (t, p) for b, t, p in processes}
    done = subprocess.run(
        [sys.executable, "-m", "tooling.cli", "log", "dump", "--deep", "--json", *paths],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[tuple[str, int], list[dict[str, Any]]] = {tp: [] for tp in paths.values()}
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if record["kind"] == "batch":
            out[paths[record.pop("file")]].append(record)
    return out


def without(fields: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in names}


# ------------------------------------------------------------------------- two hops, four codecs

TOPICS = {  # name: (codec, replication factor on the source, retention_ms override)
    "plain": ("none", 3, "3600000"),
    "zipped": ("gzip", 2, "7200000"),
    "framed": ("lz4", 3, "10800000"),
    "squeezed": ("zstd", 2, "14400000"),  # record batches only: v1 cannot carry zstd
}
PARTITIONS = 3


@pytest.mark.timeout(150)
def test_two_hops_keep_partitions_order_timestamps_and_stored_wrappers(
        make_cluster: Callable[..., Cluster], zookeeper: ZooKeeperServer) -> None:
    first = make_cluster(3, start=False)
    second = make_cluster(1, start=False, settings=LONE, zk_connect=chroot(zookeeper))
    third = make_cluster(1, start=False, zk_connect=chroot(zookeeper))
    start_all(first, second, third)
    a, b, c = (x.brokers[0].bootstrap for x in (first, second, third))

    produced = {}
    for topic, (codec, replicas, retention) in TOPICS.items():
        create_topic(a, topic, PARTITIONS, replicas, {"retention_ms": retention})
        produced[topic] = produce(a, topic, 240, compression=codec)
    assert all(len(produced[t]) == PARTITIONS for t in TOPICS)  # keyed ones reach all three

    hop1 = MirrorProcess(a, b, [*(arg for t in TOPICS for arg in ("--topic", t)), *MIRROR_ARGS],
                         group="hop-1")
    hop2 = MirrorProcess(b, c, ["--topics", ".*", *MIRROR_ARGS], group="hop-2")
    try:
        hop1.start()
        hop2.start()  # the first hop created the topics on b before its first line
        for topic, (codec, _, _) in TOPICS.items():  # more while both hops run
            for p, log in produce(a, topic, 120, compression=codec, first=240).items():
                produced[topic][p] += log
        ends = ends_of(produced)
        until(lambda: caught_up(a, b, "hop-1", ends), 60, "hop 1 committed every end")
        until(lambda: caught_up(b, c, "hop-2", ends), 60, "hop 2 committed every end")
        for source, target, group in ((a, b, "hop-1"), (b, c, "hop-2")):
            rows = status_json(source, target, group)
            assert {(r["topic"], r["partition"]) for r in rows} == {
                (tp.topic, tp.partition) for tp in ends}
            for r in rows:
                end = ends[TopicPartition(r["topic"], r["partition"])]
                assert (r["lag"], r["committed"], r["source_end"], r["target_end"],
                        r["target_topic"]) == (0, end, end, end, r["topic"]), r
        codes = (hop1.stop(), hop2.stop())
    finally:
        end_all(hop1, hop2)
    assert codes == (0, 0), hop1.text() + hop2.text()
    assert "stopped;" in hop1.text() and "stopped;" in hop2.text()

    for topic, (_, replicas, retention) in TOPICS.items():
        logs = {name: read_all(bootstrap, topic) for name, bootstrap in (
            ("first", a), ("second", b), ("third", c))}
        assert logs["first"] == produced[topic]  # the source holds what it acknowledged
        assert logs["second"] == produced[topic], f"hop 1 changed {topic}"
        assert logs["third"] == produced[topic], f"hop 2 changed {topic}"
        assert partition_count(a, topic) == (PARTITIONS, replicas)
        for bootstrap in (b, c):  # one broker: the replication factor capped at one
            assert partition_count(bootstrap, topic) == (PARTITIONS, 1)
            assert topic_overrides(bootstrap, topic) == {"retention_ms": retention}

    # the stored record batches are the source leader's -- same offsets, sizes and positions,
    # codecs, timestamps, records and headers -- but for the producer identity: both logs
    # started at offset 0, and the records section of each batch went on unopened
    leaders = {t: first.leaders(t) for t in TOPICS}
    at_source = dump_batches([(first.brokers[leaders[t][p]], t, p)
                              for t in TOPICS for p in range(PARTITIONS)])
    source_batches = [b for batches in at_source.values() for b in batches]
    assert all(b["producer_id"] >= 0 for b in source_batches)  # the idempotent producer's
    for other in (second, third):
        copied = dump_batches([(other.brokers[0], t, p) for t in TOPICS
                               for p in range(PARTITIONS)])
        assert {tp: [without(b, NOT_COPIED) for b in batches] for tp, batches in
                copied.items()} == {tp: [without(b, NOT_COPIED) for b in batches]
                                    for tp, batches in at_source.items()}
        assert {(b["producer_id"], b["producer_epoch"], b["base_sequence"], b["valid"])
                for batches in copied.values() for b in batches} == {(-1, -1, -1, True)}
    for topic, (codec, _, _) in TOPICS.items():
        batches = [b for p in range(PARTITIONS) for b in at_source[(topic, p)]]
        assert {b["codec"] for b in batches} == {codec}
        assert max(len(b["inner"]) for b in batches) > 1  # several records, not opened
        assert sum(len(b["inner"]) for b in batches) == 360
        headers = [r["headers"] for b in batches for r in b["inner"] if r["headers"]]
        assert len(headers) == 120 and all(h[1] == {"key": "none", "value": None}
                                           for h in headers)


# -------------------------------------------------------------- two processes, one killed

SHARED_SOURCE = {**LONE, "group_min_session_timeout_ms": 1_000}
#: a killed member's partitions move after its 3 s session
SHORT_SESSION = ("--source-property", "session_timeout_ms=3000",
                 "--source-property", "heartbeat_interval_ms=500")


@pytest.mark.timeout(150)
def test_two_processes_share_a_group_and_one_killed_loses_nothing(
        make_cluster: Callable[..., Cluster], zookeeper: ZooKeeperServer) -> None:
    source = make_cluster(1, start=False, settings=SHARED_SOURCE)
    target = make_cluster(1, start=False, zk_connect=chroot(zookeeper))
    start_all(source, target)
    s, t = source.brokers[0].bootstrap, target.brokers[0].bootstrap
    partitions = list(range(6))
    create_topic(s, "events", len(partitions), 1)
    tps = [TopicPartition("events", p) for p in partitions]

    producer = NumberedProducer(s, "events", partitions, rate=25)
    producer.start()
    args = ["--topic", "events", *MIRROR_ARGS, *SHORT_SESSION]
    victim = MirrorProcess(s, t, args, group="shared")
    survivor = MirrorProcess(s, t, args, group="shared")
    try:
        victim.start()
        survivor.start()

        def shared() -> tuple[list[TopicPartition], ...] | None:
            with GroupAdmin(s, timeout_ms=5_000) as admin:
                group = admin.describe_group("shared")
            owned = tuple(sorted(m.assignment) for m in group.members)
            if group.state != "Steady" or len(owned) != 2 or not all(owned):
                return None
            return owned if sorted(tp for o in owned for tp in o) == tps else None

        owned = until(shared, 30, "two members of 'shared', each owning some partitions")
        print(f"assignment: {owned}")

        def committed() -> dict[TopicPartition, int]:
            with GroupAdmin(s, timeout_ms=5_000) as admin:
                return {tp: c.offset for tp, c in admin.committed_offsets("shared").items()}

        until(lambda: all(committed().get(tp, 0) > 0 for tp in tps), 30,
              "both processes committed some of every partition")
        victim.kill()
        at_kill = committed()
        acked_at_kill = producer.acked_count()
        with GroupAdmin(s, timeout_ms=5_000) as admin:  # at least what the victim had read
            read_by_kill = {tp: o.offset for tp, o in admin.list_offsets(
                dict.fromkeys(tps, LATEST)).items()}
        # copied again after the kill: at most what the victim had not committed
        window = sum(read_by_kill[tp] - at_kill[tp] for tp in tps)

        def taken_over() -> bool:
            with GroupAdmin(s, timeout_ms=5_000) as admin:
                group = admin.describe_group("shared")
            return group.state == "Steady" and len(group.members) == 1 and sorted(
                group.members[0].assignment) == tps

        until(taken_over, 30, "the survivor owns all six partitions")
        until(lambda: all(committed().get(tp, 0) > at_kill[tp] for tp in tps), 30,
              "the survivor commits beyond the victim's last commit on every partition")
        outcome = producer.stop(60)
        assert len(outcome.acked) > acked_at_kill  # produced on while the victim was dead
        assert not outcome.failed

        ends = {TopicPartition("events", p): 1 + max(
            o for (q, _), o in outcome.acked.items() if q == p) for p in partitions}
        until(lambda: caught_up(s, t, "shared", ends), 60, "the survivor committed every end")
        assert survivor.stop() == 0, survivor.text()
    finally:
        if producer.is_alive():
            producer.stop(60)
        end_all(victim, survivor)

    stored = read_all(s, "events")
    copied = read_all(t, "events")
    lost, duplicates, unlike_source = [], 0, []
    for p in partitions:
        at_source = [v for _, _, v, _ in stored[p]]
        values = [v for _, _, v, _ in copied[p]]
        # in its source partition, in the source's order, once at least (copied again after
        # the kill from the victim's last commit on)
        if list(dict.fromkeys(values)) != list(dict.fromkeys(at_source)):
            unlike_source.append(p)
        duplicates += sum((Counter(values) - Counter(at_source)).values())  # the mirror's
        on_target = set(values)
        lost += [(p, seq) for (q, seq) in outcome.acked
                 if q == p and f"{p}:{seq}".encode() not in on_target]
    print(f"acknowledged {len(outcome.acked)}, lost {len(lost)}, duplicates {duplicates} "
          f"(uncommitted at the kill: {window})")
    assert lost == []
    assert unlike_source == []
    assert duplicates <= window


# ---------------------------------------------------------- two sources, one secured target


@pytest.mark.timeout(150)
def test_two_sources_renamed_into_one_sasl_ssl_target(
        make_cluster: Callable[..., Cluster], zookeeper: ZooKeeperServer, zk_connect: str,
        tmp_path: Path) -> None:
    target, tls = sasl_ssl_cluster(make_cluster, zk_connect, tmp_path, ("broker", "mirror"))
    east = make_cluster(1, start=False, settings=LONE, zk_connect=chroot(zookeeper))
    west = make_cluster(1, start=False, settings=LONE, zk_connect=chroot(zookeeper))
    start_all(target, east, west)
    login = SecurityConfig(security_protocol="SASL_SSL", ssl_cafile=str(tls.ca),
                           sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="mirror",
                           sasl_plain_password=PASSWORD)
    config = properties_file(tmp_path / "target.properties", login)
    secured = f"127.0.0.1:{target.brokers[0].listener_ports['SASL_SSL']}"
    sources = {"east": east.brokers[0].bootstrap, "west": west.brokers[0].bootstrap}

    produced = {}
    for alias, bootstrap in sources.items():
        create_topic(bootstrap, "orders", 2, 1)
        produced[alias] = produce(bootstrap, "orders", 80, compression="gzip",
                                  prefix=f"{alias}:")
    renaming = {alias: Renaming("{source}.{topic}", alias) for alias in sources}
    mirrors = [MirrorProcess(bootstrap, secured, [
        "--topic", "orders", "--rename", "{source}.{topic}", "--source-alias", alias,
        "--target-config", str(config), *MIRROR_ARGS], group=f"to-{alias}")
        for alias, bootstrap in sources.items()]
    try:
        for mirror in mirrors:
            mirror.start()
        for alias, bootstrap in sources.items():
            until(partial(caught_up, bootstrap, secured, f"to-{alias}",
                          ends_of({"orders": produced[alias]}), renaming=renaming[alias],
                          target_security=login.options()),
                  60, f"the mirror from {alias} committed every end")
            rows = status_json(bootstrap, secured, f"to-{alias}", "--rename", "{source}.{topic}",
                               "--source-alias", alias, "--target-config", str(config))
            assert sorted((r["partition"], r["target_topic"], r["lag"], r["target_end"])
                          for r in rows) == [
                (p, f"{alias}.orders", 0, len(produced[alias][p])) for p in (0, 1)]
        codes = [m.stop() for m in mirrors]
    finally:
        end_all(*mirrors)
    assert codes == [0, 0], "".join(m.text() for m in mirrors)

    with Admin(secured, **login.options()) as admin:
        names = {i.name for i in admin.describe_topics() if not i.internal}
    assert names == {"east.orders", "west.orders"}
    for alias in sources:
        assert read_all(secured, f"{alias}.orders", login.options()) == produced[alias]
