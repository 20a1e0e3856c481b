"""What replication costs, on three brokers: ``python -m benchmarks.replication [--quick]``.

Starts a standalone ZooKeeper and three brokers in cluster mode (``benchmarks.cluster.Cluster``:
``zookeeper_session_timeout_ms`` 6000 by default, automatic leader rebalance off, every other
setting at its default) and prints one JSON line per case, for three configurations of a topic
of 6 partitions (leaders spread over the brokers):

- ``rf1_acks1``: replication factor 1, acks=1;
- ``rf3_acks1``: replication factor 3, acks=1 (followers copy behind the producer's back);
- ``rf3_acks_all``: replication factor 3, acks=all, topic config ``min_insync_replicas`` 2.

Cases:

- ``producer``: messages/s and MB/s (value bytes, 10**6) of 100-byte values from one
  ``Producer`` with throughput.py's settings (``linger_ms=5``, ``batch_bytes=256 KiB``, no
  compression), until the last batch is acknowledged; ``replicated_msgs_per_s`` until the high
  watermarks (what consumers may read) cover every message; ``ratio`` = msgs/s over
  ``rf1_acks1``'s. Kafka's anchor (0.8.1, three machines, one producer thread, 100-byte
  records: 821,557 records/s without replication, 786,980 with 3x async, 421,823 with 3x sync
  replication; ratio 0.51) is in ``kafka``. ``where_time_goes``: CPU seconds of each broker,
  of this process (the producer), of ZooKeeper and of everything else on the machine (from
  /proc/PID/stat and /proc/stat) over the case, broker CPU microseconds per message, how busy
  the producer's thread (``client_busy``, share of one core) and the machine's cores
  (``cores_busy``, of ``cpus``) were, and broker-to-broker requests per second (the followers' Fetch
  requests, plus the controller's rare ones) with messages per request: counted as the
  ``data_segs_out`` of each broker's outgoing sockets to other brokers (``ss -ti``), one segment
  per request (a request is one small write on a TCP_NODELAY socket).
- ``latency``: end-to-end latency (send to ``poll`` return in another process) at a fixed
  1,000 messages/s, ``linger_ms=0``, spread over the partitions, p50/p99/max ms; with RF 3 a
  consumer only sees a message once the in-sync followers have it, so that wait is part of it.
  ``ack_p50_ms``/``ack_p99_ms``: send to acknowledgement in the producer; ``where_time_goes``
  as above (the clients are the consumer and the producer's process).
- ``leader_failover_acks_all``: RF 3, min ISR 2. SIGKILL to the leader of one partition (a
  broker that is not the controller); then Produce probes (raw requests, at most one in flight
  per broker and kind, one every 10 ms) to the surviving brokers: milliseconds until one accepts
  an acks=1 produce (a leader was elected) and until one answers an acks=all produce without
  error (the new ISR has it). The session timeout and ZooKeeper's detection window are stated:
  a kill is noticed only when the dead broker's session expires. ``where_time_goes``: from the
  brokers' logs, when the controller noticed the broker gone, elected the new leader, and the
  remaining follower first appended in the new leader epoch.
- ``replication_cost``: ``ratio`` of rf3_acks_all's msgs/s to rf1_acks1's beside Kafka's 0.51,
  and a sentence on where the time went: which bound each producer case (the producer's thread
  when it was busy 90% of the time, else the cores when 90% busy, else waiting).

Sizes: 1,000,000 messages per producer case, the three cases run round-robin 3 times and each
keeps its best round (``msgs_per_s_rounds`` lists them all), and 10 s latency runs
(``--quick``: 200,000 messages, one round, 2 s; ``--messages``, ``--rounds``,
``--latency-seconds`` and ``--latency-rate`` set them). ``others_cpu_s`` tells how much the
rest of the machine disturbed a case.

All three brokers, ZooKeeper and the clients share this machine's cores (``cpus``), where Kafka's
anchor had a machine per broker: every copy a follower makes takes CPU from the leaders and the
producer here. Every process started here is stopped by its PID at the end, also on an error or
Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.cluster import (
    BenchError,
    Cluster,
    bench_workdir,
    detection_window,
    metadata_from,
    start_or_report_missing,
    stop_on_signals,
)
from benchmarks.codec import sample_records
from benchmarks.servers import REPO_ROOT
from client import Admin, Consumer, Producer, TopicPartition
from client.future import Future
from client.metadata import ClusterMetadata
from client.network import NetworkClient, parse_bootstrap
from client.offsets import LATEST
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messageset import encode_message_set

BROKERS = 3
PARTITIONS = 6
VALUE_BYTES = 100
SESSION_MS = 6_000
PRODUCE_N = 1_000_000
QUICK_PRODUCE_N = 200_000
ROUNDS = 3  # producer cases run round-robin this often; each keeps its best round
QUICK_ROUNDS = 1
LATENCY_RATE = 1_000  # msgs/s: moderate, well under every configuration's throughput
LATENCY_S = 10.0
QUICK_LATENCY_S = 2.0
PROBE_INTERVAL = 0.010
READY_TIMEOUT = 30.0
FLUSH_TIMEOUT = 120.0
REPLICATED_TIMEOUT = 60.0
NODE_COPY = 1000  # a probe network's node id for a second connection to broker i: i + this
EXTRA_WAIT = 60.0  # s beyond the session timeout before a failover counts as never completed
CLIENT_ID = "bench-replication"
_STAMP = struct.Struct(">q")
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PID = re.compile(r"pid=(\d+)")
_SEGS_OUT = re.compile(r"\bdata_segs_out:(\d+)")

# Kafka 0.8.1, three machines (6 cores, 32 GB, 6 disks each), one producer thread, 100-byte
# records: J. Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap
# Machines)", 2014.
KAFKA_RECORDS_PER_S = {"rf1_acks1": 821_557, "rf3_acks1": 786_980, "rf3_acks_all": 421_823}
KAFKA_NOTE = ("Kafka 0.8.1 on three machines, one producer thread, 100-byte records: no "
              "replication 821,557 records/s, 3x async 786,980, 3x sync (acks=all) 421,823 "
              "(ratio 0.51); each broker had its own machine there")


@dataclass(frozen=True)
class Config:
    name: str
    replication_factor: int
    acks: int | str
    min_insync_replicas: int | None = None

    def topic_configs(self) -> dict[str, str]:
        if self.min_insync_replicas is None:
            return {}
        return {"min_insync_replicas": str(self.min_insync_replicas)}

    def describe(self) -> dict[str, Any]:
        line: dict[str, Any] = {"config": self.name, "replication_factor": self.replication_factor,
                                "acks": self.acks}
        if self.min_insync_replicas is not None:
            line["min_insync_replicas"] = self.min_insync_replicas
        return line


CONFIGS = (
    Config("rf1_acks1", 1, 1),
    Config("rf3_acks1", 3, 1),
    Config("rf3_acks_all", 3, "all", 2),
)


def progress(text: str) -> None:
    print(f"replication: {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ the cluster


def bootstrap_of(cluster: Cluster) -> str:
    return ",".join(b.address for b in cluster.live().values())


def new_topic(cluster: Cluster, prefix: str, config: Config, partitions: int = PARTITIONS
              ) -> tuple[str, ClusterMetadata]:
    """Create a topic for ``config``; return it once every live broker names a leader for each
    partition and every replica is in the ISR."""
    topic = f"{prefix}-{config.name}-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap_of(cluster), client_id=CLIENT_ID) as admin:
        admin.create_topic(topic, partitions, config.replication_factor,
                           configs=config.topic_configs())
    cluster.wait_ready(topic)
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        views = [metadata_from(b.address, [topic]) for b in cluster.live().values()]
        lagging = [(p, info.isr, info.replicas) for v in views
                   for p, info in v.topics[topic].partitions.items()
                   if sorted(info.isr) != sorted(info.replicas)]
        if not lagging:
            return topic, views[0]
        if time.monotonic() > deadline:
            raise BenchError(f"{topic}: replicas not all in sync after {READY_TIMEOUT:g} s: "
                             f"{lagging[:6]}\n{cluster.logs()}")
        time.sleep(0.05)


def leaders_of(view: ClusterMetadata, topic: str) -> dict[int, int]:
    """How many of the topic's partitions each broker leads."""
    return dict(sorted(Counter(i.leader for i in view.topics[topic].partitions.values()).items()))


# ------------------------------------------------------------------------- where time goes


def process_cpu_s(pid: int) -> float | None:
    """utime + stime of a process, in seconds (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # fields 14 and 15 of stat


def machine_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, over all cores."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already in user
    return (total - idle) / _CLK_TCK, total / _CLK_TCK


def outgoing_broker_segments(broker_pids: Mapping[int, int], ports: set[int]
                             ) -> dict[tuple[int, str, str], int] | None:
    """``data_segs_out`` of every established socket a broker (``{pid: broker_id}``) opened to
    another broker's listening port, by (broker id, local, peer); None without ``ss``."""
    if shutil.which("ss") is None:
        return None
    try:
        out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True,
                             text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_ss(out, broker_pids, ports)


def parse_ss(out: str, broker_pids: Mapping[int, int], ports: set[int]
             ) -> dict[tuple[int, str, str], int]:
    """``ss -tinpH state established``: a socket's line (Recv-Q Send-Q local peer users:...),
    then an indented line of its counters."""
    found: dict[tuple[int, str, str], int] = {}
    current: tuple[int, str, str] | None = None
    for line in out.splitlines():
        if line and not line[0].isspace():
            current = None
            words = line.split()
            pid = _PID.search(line)
            if len(words) < 4 or pid is None or int(pid[1]) not in broker_pids:
                continue
            local, peer = words[2], words[3]
            try:
                local_port = int(local.rsplit(":", 1)[1])
                peer_port = int(peer.rsplit(":", 1)[1])
            except (IndexError, ValueError):
                continue
            if peer_port in ports and local_port not in ports:
                current = (broker_pids[int(pid[1])], local, peer)
        elif current is not None and (segs := _SEGS_OUT.search(line)):
            found[current] = int(segs[1])
            current = None
    return found


@dataclass
class Usage:
    """CPU of our processes and the machine, and broker-to-broker requests, at one moment."""

    at: float
    brokers: dict[int, float | None]
    client: float
    zookeeper: float | None
    machine_busy: float
    machine_total: float
    segments: dict[tuple[int, str, str], int] | None = field(default=None)

    @classmethod
    def now(cls, cluster: Cluster) -> Usage:
        live = cluster.live()
        pids = {b.proc.pid: i for i, b in live.items() if b.proc is not None}
        ports = {int(b.address.rsplit(":", 1)[1]) for b in live.values()}
        segments = outgoing_broker_segments(pids, ports)
        times = os.times()
        busy, total = machine_cpu_s()
        return cls(
            time.monotonic(),
            {i: process_cpu_s(b.proc.pid) if b.proc is not None else None
             for i, b in live.items()},
            times.user + times.system,
            process_cpu_s(cluster.zookeeper.pid) if cluster.zookeeper.running else None,
            busy, total, segments,
        )


def where_time_goes(before: Usage, after: Usage, messages: int, replicas: int,
                    other_client_s: float = 0.0) -> dict[str, Any]:
    """CPU seconds over the interval: each broker, the clients (this process and
    ``other_client_s`` of client processes it started), ZooKeeper, the rest of the machine."""
    wall = after.at - before.at
    brokers = {}
    for i, b in before.brokers.items():
        a = after.brokers.get(i)
        if b is not None and a is not None:
            brokers[str(i)] = round(a - b, 2)
    broker_total = sum(brokers.values())
    client = after.client - before.client + other_client_s
    zookeeper = (after.zookeeper - before.zookeeper
                 if after.zookeeper is not None and before.zookeeper is not None else 0.0)
    machine = after.machine_busy - before.machine_busy
    out: dict[str, Any] = {
        "wall_s": round(wall, 2),
        "broker_cpu_s": brokers,
        "client_cpu_s": round(client, 2),
        "client_busy": round(client / wall, 2) if wall > 0 else None,  # share of one core
        "zookeeper_cpu_s": round(zookeeper, 2),
        "others_cpu_s": round(max(0.0, machine - broker_total - client - zookeeper), 2),
        "cores_busy": round(machine / wall, 2) if wall > 0 else None,  # of os.cpu_count()
        "broker_cpu_us_per_msg": round(broker_total / messages * 1e6, 1),
        "client_cpu_us_per_msg": round(client / messages * 1e6, 1),
    }
    if before.segments is not None and after.segments is not None:
        requests = sum(n - before.segments.get(k, 0) for k, n in after.segments.items())
        out["broker_to_broker_requests_per_s"] = round(requests / wall) if wall > 0 else None
        if replicas > 1 and requests > 0:
            out["msgs_per_follower_fetch"] = round(messages * (replicas - 1) / requests, 1)
    return out


# ------------------------------------------------------------------------------ throughput


def values(count: int = 1000) -> list[bytes]:
    """Log-like values (a little repetitive, as real ones are), as throughput.py sends."""
    return [r[1] or b"" for r in sample_records(count, VALUE_BYTES)]


def high_watermarks(admin: Admin, topic: str) -> int:
    tps = {TopicPartition(topic, p): LATEST for p in range(PARTITIONS)}
    return sum(o.offset for o in admin.list_offsets(tps).values())


def producer_case(cluster: Cluster, config: Config, n: int) -> dict[str, Any]:
    topic, view = new_topic(cluster, "repl-produce", config)
    bootstrap = bootstrap_of(cluster)
    samples = values()
    count = len(samples)
    with Producer(bootstrap, client_id=CLIENT_ID, acks=config.acks, compression="none",
                  linger_ms=5, batch_bytes=256 * 1024, buffer_bytes=64 * 1024 * 1024) as producer, \
            Admin(bootstrap, client_id=CLIENT_ID) as admin:
        for p in range(PARTITIONS):  # metadata and a connection to every leader are ready
            producer.send(topic, samples[p], partition=p).result(30)
        before = Usage.now(cluster)
        start = time.perf_counter()
        send = producer.send
        for i in range(n - PARTITIONS):
            send(topic, samples[i % count])
        producer.flush(FLUSH_TIMEOUT)
        acked = time.perf_counter() - start
        deadline = time.monotonic() + REPLICATED_TIMEOUT
        while (visible := high_watermarks(admin, topic)) < n:
            if time.monotonic() > deadline:
                raise BenchError(f"{topic}: high watermarks cover {visible} of {n} messages "
                                 f"{REPLICATED_TIMEOUT:g} s after the last ack\n{cluster.logs()}")
            time.sleep(0.01)
        replicated = time.perf_counter() - start
        after = Usage.now(cluster)
    return {
        "bench": "producer", **config.describe(), "partitions": PARTITIONS,
        "leaders": leaders_of(view, topic), "messages": n, "value_bytes": VALUE_BYTES,
        "codec": "none", "linger_ms": 5, "batch_bytes": 256 * 1024,
        "msgs_per_s": round(n / acked), "mb_per_s": round(n * VALUE_BYTES / acked / 1e6, 2),
        "replicated_msgs_per_s": round(n / replicated),
        "where_time_goes": where_time_goes(before, after, n, config.replication_factor),
    }


# --------------------------------------------------------------------------------- latency


def latency_producer(bootstrap: str, topic: str, count: int, rate: int, acks: str,
                     partitions: int) -> None:
    """The sending half of the latency case (its own process): ``count`` messages at
    ``rate``/s, round robin over the partitions, each carrying its send time (ns since the
    epoch) in its first 8 bytes; prints the acknowledgement latencies as one JSON line."""
    padding = b"p" * (VALUE_BYTES - _STAMP.size)
    acked: list[float] = []
    failed: Counter[str] = Counter()

    def on_ack(sent_ns: int, future: Any) -> None:
        if future.succeeded():
            acked.append((time.time_ns() - sent_ns) / 1e6)
        else:
            failed[type(future.exception()).__name__] += 1

    # one core would go to spinning in poll() between sends: the brokers share two here
    with Producer(bootstrap, client_id=CLIENT_ID, acks=acks, linger_ms=0) as producer:
        for p in range(partitions):  # connections to every leader; too short to be counted
            producer.send(topic, b"warm", partition=p).result(30)
        start = time.monotonic()
        for i in range(count):
            due = start + i / rate
            while (wait := due - time.monotonic()) > 0:
                began = time.monotonic()
                producer.poll(wait)  # waits for answers while a request is in flight, ...
                if time.monotonic() - began < 0.0001:  # ... else returns at once: no spinning
                    time.sleep(max(0.0, due - time.monotonic()))
            sent = time.time_ns()
            future = producer.send(topic, _STAMP.pack(sent) + padding, partition=i % partitions)
            future.add_done_callback(partial(on_ack, sent))
        producer.flush(FLUSH_TIMEOUT)
    acked.sort()
    times = os.times()
    print(json.dumps({"acked": len(acked), "failed": dict(failed),
                      "cpu_s": times.user + times.system,
                      "ack_p50_ms": round(_percentile(acked, 0.50), 2),
                      "ack_p99_ms": round(_percentile(acked, 0.99), 2)}), flush=True)


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()


def latency_case(cluster: Cluster, config: Config, seconds: float,
                 rate: int = LATENCY_RATE) -> dict[str, Any]:
    topic, view = new_topic(cluster, "repl-latency", config)
    bootstrap = bootstrap_of(cluster)
    count = int(seconds * rate)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    latencies: list[float] = []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with Consumer(bootstrap, client_id=CLIENT_ID, auto_offset_reset="latest",
                  fetch_max_wait_ms=500) as consumer:
        consumer.assign(tps)
        for tp in tps:
            consumer.position(tp, timeout_ms=30_000)
        before = Usage.now(cluster)
        sender = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.replication", "--latency-producer", bootstrap,
             topic, str(count), str(rate), str(config.acks), str(PARTITIONS)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + seconds + 60
            while len(latencies) < count and time.monotonic() < deadline:
                for record in consumer.poll(timeout_ms=100):
                    now = time.time_ns()
                    value = record.value or b""
                    if len(value) == VALUE_BYTES:  # not a warm-up message
                        (sent,) = _STAMP.unpack_from(value)
                        latencies.append((now - sent) / 1e6)
            out, _ = sender.communicate(timeout=max(1.0, deadline - time.monotonic()) + 30)
            after = Usage.now(cluster)
        finally:
            _kill(sender)
    if sender.returncode != 0:
        raise BenchError(f"latency producer ({config.name}) exited with {sender.returncode}")
    acks = json.loads(out.decode().strip().splitlines()[-1])
    latencies.sort()
    line: dict[str, Any] = {
        "bench": "latency", **config.describe(), "partitions": PARTITIONS,
        "leaders": leaders_of(view, topic), "rate_per_s": rate, "linger_ms": 0,
        "messages": len(latencies), "sent": count,
        "p50_ms": round(_percentile(latencies, 0.50), 2),
        "p99_ms": round(_percentile(latencies, 0.99), 2),
        "max_ms": round(latencies[-1], 2) if latencies else None,
        "ack_p50_ms": acks["ack_p50_ms"], "ack_p99_ms": acks["ack_p99_ms"],
        "where_time_goes": where_time_goes(before, after, count, config.replication_factor,
                                           acks["cpu_s"]),
        "note": ("with linger_ms=0 at this rate each message is a produce request of its own; "
                 "with RF 3 each also costs the followers a fetch (broker_to_broker_requests) "
                 "and the consumer waits for the high watermark: broker_cpu_us_per_msg and "
                 "cores_busy show how near the shared cores are to full, where tails grow"),
    }
    if acks["failed"]:
        line["ack_failures"] = acks["failed"]
    return line


# -------------------------------------------------------------------------------- failover


@dataclass
class Probes:
    """Produce probes of one ``acks`` to every broker for one partition: at most one in flight
    per broker, one every ``PROBE_INTERVAL``; the first success after ``since`` is kept."""

    network: NetworkClient
    topic: str
    partition: int
    acks: int
    node_offset: int = 0  # its node ids in ``network``: broker id + this (a connection apart)
    since: float | None = None
    first_ok: float | None = None
    first_broker: int | None = None
    errors: Counter[str] = field(default_factory=Counter)
    busy: set[int] = field(default_factory=set)
    next_at: dict[int, float] = field(default_factory=dict)

    def restart(self, since: float) -> None:
        self.since = since
        self.first_ok = None
        self.first_broker = None
        self.errors.clear()

    def send_due(self, brokers: Sequence[int], now: float) -> None:
        for broker in brokers:
            if broker in self.busy or now < self.next_at.get(broker, 0.0):
                continue
            self.busy.add(broker)
            self.next_at[broker] = now + PROBE_INTERVAL
            records = encode_message_set([(None, b"probe", int(time.time() * 1000))])
            future = self.network.send(broker + self.node_offset, ApiKey.PRODUCE, {
                "acks": self.acks, "timeout_ms": 10_000,
                "topics": [{"name": self.topic, "partitions": [
                    {"partition": self.partition, "records": records}]}],
            })
            future.add_done_callback(partial(self._answered, broker, now))

    def _answered(self, broker: int, sent: float, future: Future[dict[str, Any]]) -> None:
        at = time.monotonic()
        self.busy.discard(broker)
        error = future.exception()
        if error is not None:
            self.errors[type(error).__name__] += 1
            return
        code = future.value["topics"][0]["partitions"][0]["error_code"]
        if code != 0:
            self.errors[_error_name(code)] += 1
        elif self.first_ok is None and self.since is not None and sent >= self.since:
            self.first_ok = at
            self.first_broker = broker


_EVENT = re.compile(r"timestamp='([^']+)' level='\w+' event='([^']+)'(.*)")
_DEAD = re.compile(r"dead=\[([^\]]*)\]")


def log_events(path: Path, since: float) -> list[tuple[float, str, str]]:
    """(Unix time, event, the rest of the line) of a broker log's events from ``since`` on."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    events = []
    for line in text.splitlines():
        match = _EVENT.search(line)
        if match is None:
            continue
        try:
            at = datetime.fromisoformat(match[1]).timestamp()
        except ValueError:
            continue
        if at >= since:
            events.append((at, match[2], match[3]))
    return events


def failover_timeline(controller_log: Path, follower_log: Path | None, topic: str,
                      partition: int, victim: int, killed_at: float) -> dict[str, float]:
    """From the brokers' logs, ms after the kill (Unix time ``killed_at``): the controller
    notices the broker gone (``controller.brokers_changed``), elects the partition's new leader
    (``controller.state_change``), and the remaining follower first appends in the new leader
    epoch (``log.leader_epoch.assigned`` in its log). What is not found is left out."""
    found: dict[str, float] = {}

    def first(name: str, events: list[tuple[float, str, str]],
              test: Callable[[str, str], bool]) -> None:
        for at, event, rest in events:
            if test(event, rest):
                found[name] = round((at - killed_at) * 1000, 1)
                return

    def dead(event: str, rest: str) -> bool:
        match = _DEAD.search(rest)
        return (event == "controller.brokers_changed" and match is not None
                and str(victim) in [w.strip() for w in match[1].split(",")])

    ours = f"topic='{topic}' partition={partition} "
    controller = log_events(controller_log, killed_at)
    first("dead_noticed_ms", controller, dead)
    first("leader_elected_ms", controller, lambda event, rest: (
        event == "controller.state_change" and ours in rest + " "
        and "trigger='leader elected'" in rest))
    if follower_log is not None:
        first("follower_copied_ms", log_events(follower_log, killed_at), lambda event, rest: (
            event == "log.leader_epoch.assigned" and f"{topic}-{partition}{os.sep}" in rest))
    return found


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _probe_network(addresses: Mapping[int, str], copies: int) -> NetworkClient:
    """A client with ``copies`` connections to each broker: node ids broker id + k * 1000."""
    network = NetworkClient(",".join(addresses.values()), client_id=CLIENT_ID,
                            request_timeout_ms=15_000, reconnect_backoff_ms=10,
                            reconnect_backoff_max_ms=100)
    network.set_brokers({i + k * NODE_COPY: parse_bootstrap(a)[0]
                         for i, a in addresses.items() for k in range(copies)})
    return network


def failover_case(cluster: Cluster) -> dict[str, Any]:
    config = CONFIGS[-1]  # RF 3, acks=all, min ISR 2
    topic, view = new_topic(cluster, "repl-failover", config, partitions=BROKERS)
    led = {p: info.leader for p, info in view.topics[topic].partitions.items()}
    candidates = sorted(p for p, leader in led.items() if leader != view.controller_id)
    if not candidates:
        raise BenchError(f"only the controller leads {topic}: {led}")
    partition = candidates[0]
    victim_id = led[partition]
    victim = cluster.brokers[victim_id]
    addresses = {i: b.address for i, b in cluster.live().items()}
    survivors = sorted(i for i in addresses if i != victim_id)
    everything = metadata_from(addresses[victim_id])
    moved = sum(1 for t in everything.topics.values() for i in t.partitions.values()
                if i.leader == victim_id)
    bound = cluster.session_ms / 1000 + EXTRA_WAIT
    # two connections per broker, so an acks=all probe waiting for the ISR delays no acks=1 one
    network = _probe_network(addresses, 2)
    acks_all = Probes(network, topic, partition, -1)
    acks_one = Probes(network, topic, partition, 1, node_offset=NODE_COPY)
    progress(f"kill -9 broker {victim_id}, leader of {topic}-{partition} "
             f"(controller {view.controller_id})")
    try:
        deadline = time.monotonic() + 15.0  # the old leader takes acks=all before the kill
        acks_all.restart(time.monotonic())
        while acks_all.first_ok is None:
            if time.monotonic() > deadline:
                raise BenchError(f"broker {victim_id} accepted no acks=all produce for "
                                 f"{topic}-{partition}: {dict(acks_all.errors)}")
            acks_all.send_due([victim_id], time.monotonic())
            network.poll(PROBE_INTERVAL)
        killed_at, killed_wall = time.monotonic(), time.time()
        victim.signal(signal.SIGKILL)
        acks_all.restart(killed_at)
        acks_one.restart(killed_at)
        deadline = killed_at + bound
        while ((acks_all.first_ok is None or acks_one.first_ok is None)
               and time.monotonic() < deadline):
            now = time.monotonic()
            for probes in (acks_all, acks_one):
                if probes.first_ok is None:
                    probes.send_due(survivors, now)
            network.poll(PROBE_INTERVAL)
    finally:
        network.close()
    victim.kill()
    if acks_all.first_ok is None or acks_one.first_ok is None:
        raise BenchError(
            f"kill of broker {victim_id}: no acks=all produce to {topic}-{partition} within "
            f"{bound:g} s (acks=1 ok: {acks_one.first_ok is not None}); errors: acks=all "
            f"{dict(acks_all.errors)}, acks=1 {dict(acks_one.errors)}\n{cluster.logs()}")
    after = metadata_from(addresses[survivors[0]], [topic]).topics[topic].partitions[partition]
    followers = [i for i in after.isr if i != after.leader]
    timeline = failover_timeline(
        cluster.brokers[view.controller_id].log,
        cluster.brokers[followers[0]].log if followers else None,
        topic, partition, victim_id, killed_wall)
    acks_all_ms = round((acks_all.first_ok - killed_at) * 1000, 1)
    acks_one_ms = round((acks_one.first_ok - killed_at) * 1000, 1)
    return {
        "bench": "leader_failover_acks_all", "trigger": "kill", "brokers": BROKERS,
        "replication_factor": 3, "min_insync_replicas": 2, "victim": "leader, not the controller",
        "old_leader": victim_id, "new_leader": acks_all.first_broker,
        "isr_after": sorted(after.isr),
        "zookeeper_session_timeout_ms": cluster.session_ms,
        "zookeeper_tick_ms": cluster.zookeeper.tick_time_ms,
        "zk_detection_window_ms": detection_window(cluster),
        "probe_interval_ms": round(PROBE_INTERVAL * 1000),
        "partitions_moved": moved,
        "acks_all_time_ms": acks_all_ms,
        "acks_1_time_ms": acks_one_ms,
        "isr_wait_time_ms": round(acks_all_ms - acks_one_ms, 1),
        "where_time_goes": timeline,
        "probe_errors": {"acks_all": dict(acks_all.errors), "acks_1": dict(acks_one.errors)},
        "note": ("a kill -9 is noticed when the broker's ZooKeeper session expires (within "
                 "zk_detection_window_ms), then the controller elects from the ISR; "
                 "acks_1_time_ms: a new leader takes writes; acks_all_time_ms: the remaining "
                 "follower (ISR shrunk to 2 = min_insync_replicas) has one too. where_time_goes "
                 "is read from the brokers' logs (ms after the kill); a follower already "
                 "fetching from the new leader for other partitions adds this one to its next "
                 "Fetch, so the long poll in flight (up to 500 ms) can delay the copy"),
    }


# ------------------------------------------------------------------------------------ main


def producer_rounds(cluster: Cluster, messages: int, rounds: int, cpus: int
                    ) -> list[dict[str, Any]]:
    """The three producer cases ``rounds`` times, interleaved (so a busy spell of the rest of
    the machine does not fall on one configuration only); each keeps its best round, and the
    summary line follows."""
    best: dict[str, dict[str, Any]] = {}
    seen: dict[str, list[int]] = {c.name: [] for c in CONFIGS}
    for round_ in range(rounds):
        for config in CONFIGS:
            progress(f"producer {config.name}, {messages} messages, round {round_ + 1}")
            line = producer_case(cluster, config, messages)
            seen[config.name].append(line["msgs_per_s"])
            if config.name not in best or line["msgs_per_s"] > best[config.name]["msgs_per_s"]:
                best[config.name] = line
    base = best["rf1_acks1"]["msgs_per_s"]
    kafka = KAFKA_RECORDS_PER_S
    lines = []
    for config in CONFIGS:
        line = best[config.name]
        line.update(
            rounds=rounds, msgs_per_s_rounds=seen[config.name], cpus=cpus,
            ratio=round(line["msgs_per_s"] / base, 3),
            kafka={"records_per_s": kafka[config.name],
                   "ratio": round(kafka[config.name] / kafka["rf1_acks1"], 3)},
        )
        lines.append(line)
    return [*lines, summary(lines, cpus)]


def limit(where: Mapping[str, Any], cpus: int) -> str:
    """What bounded a producer case: the producer's one thread, the machine's cores, or
    neither (the time went to waiting)."""
    if (where.get("client_busy") or 0) >= 0.9:
        return "the producer thread"
    if (where.get("cores_busy") or 0) >= 0.9 * cpus:
        return f"the {cpus} cores"
    return "waiting"


def summary(producers: Sequence[Mapping[str, Any]], cpus: int) -> dict[str, Any]:
    """The ratio to Kafka's, and where the time went, in a sentence."""
    by = {line["config"]: line["where_time_goes"] for line in producers}
    base = producers[0]["msgs_per_s"]
    kafka = KAFKA_RECORDS_PER_S

    def each(key: str) -> str:
        return " / ".join(f"{by[c.name].get(key)}" for c in CONFIGS)

    ratio = round(producers[-1]["msgs_per_s"] / base, 3)
    limits = " / ".join(limit(by[c.name], cpus) for c in CONFIGS)
    last = by["rf3_acks_all"]
    return {
        "bench": "replication_cost", "of": "msgs/s of rf3_acks_all over rf1_acks1",
        "ratio": ratio,
        "kafka": {"ratio": round(kafka["rf3_acks_all"] / kafka["rf1_acks1"], 2),
                  "records_per_s": kafka, "note": KAFKA_NOTE},
        "cpus": cpus,
        "where_time_goes": (
            f"rf1_acks1 / rf3_acks1 / rf3_acks_all: broker CPU {each('broker_cpu_us_per_msg')} "
            f"us per message, producer CPU {each('client_cpu_us_per_msg')} us per message "
            f"(its thread busy {each('client_busy')} of the time), cores busy "
            f"{each('cores_busy')} of {cpus}, other processes' CPU {each('others_cpu_s')} s; "
            f"bound by {limits}. With RF 3 two followers fetch and append every message too "
            f"(rf3_acks_all: {last.get('broker_to_broker_requests_per_s')} follower fetches/s, "
            f"{last.get('msgs_per_follower_fetch')} messages each), on the cores the leaders "
            f"and the producer use; acks=all adds the wait for the followers' next fetch to "
            f"move the high watermark, which the producer's other partitions overlap"),
        "note": (f"all three brokers, ZooKeeper and the clients share {cpus} cores of one "
                 f"machine; Kafka's anchor had a machine per broker"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replication", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PRODUCE_N} messages per producer case instead of "
                             f"{PRODUCE_N}, {QUICK_LATENCY_S:g} s latency runs instead of "
                             f"{LATENCY_S:g}")
    parser.add_argument("--messages", type=int, help="messages per producer case")
    parser.add_argument("--rounds", type=int,
                        help=f"rounds of the three producer cases, the best kept (default "
                             f"{ROUNDS}, {QUICK_ROUNDS} with --quick)")
    parser.add_argument("--latency-seconds", type=float, help="seconds per latency case")
    parser.add_argument("--latency-rate", type=int, default=LATENCY_RATE,
                        help="messages/s of the latency cases (default %(default)s)")
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_MS,
                        help="the brokers' zookeeper_session_timeout_ms (default %(default)s)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR (new or empty) and keep it (logs and data)")
    parser.add_argument("--latency-producer", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.latency_producer:
        bootstrap, topic, count, rate, acks, partitions = args.latency_producer
        latency_producer(bootstrap, topic, int(count), int(rate), acks, int(partitions))
        return 0
    messages = args.messages or (QUICK_PRODUCE_N if args.quick else PRODUCE_N)
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    latency_s = args.latency_seconds or (QUICK_LATENCY_S if args.quick else LATENCY_S)
    cpus = os.cpu_count() or 1
    stop_on_signals()
    with contextlib.ExitStack() as stack:
        workdir = bench_workdir(stack, args.keep, "replication", parser)
        cluster = Cluster(workdir, BROKERS, args.session_timeout_ms)
        try:
            if not start_or_report_missing(cluster, "replication"):
                return 0
            for line in producer_rounds(cluster, messages, rounds, cpus):
                cluster.emit(line)
            for config in CONFIGS:
                progress(f"latency {config.name}, {latency_s:g} s at {args.latency_rate}/s")
                cluster.emit(latency_case(cluster, config, latency_s, args.latency_rate))
            cluster.emit(failover_case(cluster))
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
