"""The broker's Prometheus metrics, named after Kafka's JMX metrics (docs/operations.md,
"Watching odradek", lists each with the MBean it follows).

Most values are read from the broker's own state when Prometheus scrapes (a collector walks the
groups, logs, replicas and purgatories then), so the request path pays for nothing it does not
need. What only the request path sees -- requests and their errors and time, bytes and messages
per topic -- is counted into plain dicts and a fixed-bucket latency table there, and turned into
metric families at scrape time. Exposition is ``prometheus_client``'s; the tiny HTTP server
(``serve_metrics``) runs on the broker's trio loop, so a scrape reads a consistent state without
locks.

Lag per group and partition is the coordinator's view: the group's committed offset against the
high watermark of this broker's replica of the partition (partitions with no replica here have
none). ``metrics_partition_series = false`` drops every per-partition series, keeping the
cardinality to groups and topics. Series of a group go with it (they are read from the
coordinator); those of a topic when this broker's last log of it is deleted, as Kafka's do.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog
import trio
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from broker.frames import WithFileSlices
from broker.handlers import HANDLERS, Handler, Reply
from broker.settings import host_port
from coordinator import GroupState
from coordinator.group import Group
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode
from protocol.wire import Request

if TYPE_CHECKING:
    from broker.context import BrokerContext

log = structlog.get_logger(__name__)

PREFIX = "odradek"
#: upper bounds (seconds) of the request latency buckets: 0.5 ms to 30 s
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)
#: rebalances and partition loads take longer
SLOW_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


_ERROR_NAMES = {int(code): code.name for code in ErrorCode}


class _Latencies:
    """Counts per latency bucket and their sum: a histogram without per-observation locks."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)  # the last: above every bound
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    def cumulative(self) -> list[tuple[str, float]]:
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*LATENCY_BUCKETS, float("inf")), self.counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return buckets


class BrokerMetrics:
    """Every metric of one broker, in its own registry."""

    def __init__(self, ctx: BrokerContext, *, connection_count: Callable[[], int]) -> None:
        self._ctx = ctx
        self._connection_count = connection_count
        self._partition_series = ctx.settings.metrics_partition_series
        # no *_created series: counters start with the broker (a process-wide switch, and the
        # broker's process has no other metrics)
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.registry = CollectorRegistry(auto_describe=False)
        # counted on the request path
        self._errors: dict[tuple[str, int], int] = {}  # (API, error code) -> responses
        self._latency: dict[str, _Latencies] = {}
        self._bytes_in: dict[str, int] = {}
        self._bytes_out: dict[str, int] = {}
        self._messages_in: dict[str, int] = {}
        self._conversions: dict[str, int] = {}  # messages down-converted for old readers
        self._conversion_seconds = 0.0
        #: every handler, timed and counted (Connection uses these when metrics are on)
        self.handlers: dict[ApiKey, Handler] = {
            key: partial(self._timed, handler) for key, handler in HANDLERS.items()
        }
        # observed when they happen (rare): prometheus_client's own metrics
        self._flush_time = Histogram(
            f"{PREFIX}_logflushstats_logflush_seconds",
            "Time of each log flush (fsync): Kafka's LogFlushRateAndTimeMs.",
            buckets=LATENCY_BUCKETS, registry=self.registry)
        self._rebalance_time = Histogram(
            f"{PREFIX}_groupcoordinator_rebalance_seconds",
            "Time from a group entering PrepareRebalance to its next Steady.",
            buckets=SLOW_BUCKETS, registry=self.registry)
        self._rebalances = Counter(
            f"{PREFIX}_groupcoordinator_groupcompletedrebalances",
            "Rebalances completed (Rebalancing -> Steady): Kafka's "
            "group-completed-rebalance-count.", registry=self.registry)
        self._load_time = Histogram(
            f"{PREFIX}_groupcoordinator_partitionload_seconds",
            "Time to load one __consumer_offsets partition: Kafka's partition-load-time.",
            buckets=SLOW_BUCKETS, registry=self.registry)
        self._rebalance_started_ms: dict[str, int] = {}
        self.registry.register(self)  # ``collect`` below: the values read at scrape time

    # ------------------------------------------------------------------------ attaching

    def attach(self) -> None:
        """Listen to the coordinator, the offsets loader, and this broker's logs: their flushes,
        and the last log of a topic going (its series go with it)."""
        self._ctx.groups.coordinator.transition_listeners.append(self._group_moved)
        self._ctx.groups.load_listeners.append(self._partition_loaded)
        logs = self._ctx.topics.logs
        logs.flush_observers.append(self._flush_time.observe)
        logs.topic_removed_listeners.append(self._topic_removed)

    def detach(self) -> None:
        logs = self._ctx.topics.logs
        logs.flush_observers.remove(self._flush_time.observe)
        logs.topic_removed_listeners.remove(self._topic_removed)

    def _group_moved(self, group: Group, old: GroupState, new: GroupState, now_ms: int) -> None:
        if new is GroupState.PREPARE_REBALANCE:
            self._rebalance_started_ms.setdefault(group.group_id, now_ms)
        elif new is GroupState.STEADY:
            started = self._rebalance_started_ms.pop(group.group_id, None)
            if old is GroupState.REBALANCING:  # not a round called off (PrepareRebalance)
                self._rebalances.inc()
                if started is not None:
                    self._rebalance_time.observe(max(now_ms - started, 0) / 1000)
        elif new is not GroupState.REBALANCING:
            self._rebalance_started_ms.pop(group.group_id, None)

    def _partition_loaded(self, partition: int, seconds: float) -> None:
        self._load_time.observe(seconds)

    def _topic_removed(self, topic: str) -> None:
        for values in (self._bytes_in, self._bytes_out, self._messages_in):
            values.pop(topic, None)

    # ----------------------------------------------------------------------- request path

    async def _timed(self, handler: Handler, ctx: BrokerContext, request: Request) -> Reply:
        started = time.perf_counter()
        code = 0
        try:
            reply = await handler(ctx, request)
        except BrokerError as exc:
            code = exc.code
            raise
        except Exception:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
            raise
        else:
            body = reply.body if isinstance(reply, WithFileSlices) else reply
            if body is not None:
                code = body.get("error_code", 0)
                if request.api.key is ApiKey.FETCH and request.body["replica_id"] < 0:
                    self._fetched(body)
            return reply
        finally:
            self.answered(request.api.name, time.perf_counter() - started, code)

    def answered(self, api: str, seconds: float, code: int) -> None:
        """One request handled: its latency, and its answer's error code."""
        # the request count is the latency table's count, read at scrape time
        latency = self._latency.get(api)
        if latency is None:
            latency = self._latency[api] = _Latencies()
        latency.observe(seconds)
        key = (api, code)
        self._errors[key] = self._errors.get(key, 0) + 1

    def _fetched(self, body: dict[str, Any]) -> None:
        out = self._bytes_out
        for entry in body["topics"]:
            size = 0
            for p in entry["partitions"]:
                records = p["records"]
                size += len(records) if isinstance(records, bytes) else records.length
            if size:
                out[entry["name"]] = out.get(entry["name"], 0) + size

    def down_converted(self, topic: str, messages: int, seconds: float) -> None:
        """A fetched range was down-converted for a reader below Fetch v4."""
        self._conversions[topic] = self._conversions.get(topic, 0) + messages
        self._conversion_seconds += seconds

    def produced(self, topic: str, size: int, messages: int) -> None:
        """A client's message set was appended (not a follower's, not the coordinator's)."""
        self._bytes_in[topic] = self._bytes_in.get(topic, 0) + size
        self._messages_in[topic] = self._messages_in.get(topic, 0) + messages

    # --------------------------------------------------------------------------- scraping

    def describe(self) -> list[Metric]:
        return []  # the families depend on the state: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        yield from self._request_families()
        yield from self._topic_families()
        yield _gauge("socketservermetrics_connection_count",
                     "Open client connections: Kafka's socket-server-metrics connection-count.",
                     self._connection_count())
        yield self._purgatory_family()
        yield from self._replica_families()
        yield from self._group_families()

    def _request_families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            f"{PREFIX}_requestmetrics_requests", "Requests handled, per API: Kafka's "
            "RequestMetrics RequestsPerSec.", labels=["request"])
        for name, table in sorted(self._latency.items()):
            requests.add_metric([name], sum(table.counts))
        yield requests
        errors = CounterMetricFamily(
            f"{PREFIX}_requestmetrics_errors", "Responses per API and error code (NONE "
            "included): Kafka's RequestMetrics ErrorsPerSec.", labels=["request", "error"])
        for (name, code), count in sorted(self._errors.items()):
            errors.add_metric([name, _ERROR_NAMES.get(int(code)) or str(code)], count)
        yield errors
        latency = HistogramMetricFamily(
            f"{PREFIX}_requestmetrics_totaltime_seconds", "Time from a request being read to "
            "its response being ready, per API: Kafka's RequestMetrics TotalTimeMs (without "
            "the send).", labels=["request"])
        for name, table in sorted(self._latency.items()):
            latency.add_metric([name], table.cumulative(), table.total)
        yield latency

    def _topic_families(self) -> Iterator[Metric]:
        for what, values, meaning in (
            ("bytesin", self._bytes_in, "Bytes of produced message sets appended: Kafka's "
             "BrokerTopicMetrics BytesInPerSec."),
            ("bytesout", self._bytes_out, "Bytes of records sent to consumers (not followers): "
             "Kafka's BrokerTopicMetrics BytesOutPerSec."),
            ("messagesin", self._messages_in, "Messages produced: Kafka's BrokerTopicMetrics "
             "MessagesInPerSec."),
            ("fetchmessageconversions", self._conversions, "Messages of record batches "
             "down-converted for consumers below Fetch v4: Kafka's BrokerTopicMetrics "
             "FetchMessageConversionsPerSec."),
        ):
            family = CounterMetricFamily(f"{PREFIX}_brokertopicmetrics_{what}", meaning,
                                         labels=["topic"])
            for topic, value in sorted(values.items()):
                family.add_metric([topic], value)
            yield family
        yield _counter("requestmetrics_messageconversionstime_seconds", "Time spent "
                       "down-converting fetched record batches: Kafka's RequestMetrics "
                       "MessageConversionsTimeMs (Fetch), summed.", self._conversion_seconds)

    def _purgatory_family(self) -> Metric:
        ctx = self._ctx
        holding = sum(
            sum(1 for m in g.members.values() if m.join is not None) + len(g.new_joins)
            for g in ctx.groups.coordinator.groups()
        )
        family = GaugeMetricFamily(
            f"{PREFIX}_delayedoperationpurgatory_purgatorysize", "Requests waiting: acks=all "
            "produces for their ISR (Produce), fetches for data (Fetch), JoinGroups for their "
            "round (Rebalance): Kafka's DelayedOperationPurgatory PurgatorySize.",
            labels=["delayedoperation"])
        family.add_metric(["Produce"], ctx.cluster.produces_waiting)
        family.add_metric(["Fetch"], ctx.purgatory.parked)
        family.add_metric(["Rebalance"], holding)
        return family

    def _replica_families(self) -> Iterator[Metric]:
        stats = self._ctx.cluster.replica_stats()
        partitions, leaders, under = stats.partitions, stats.leaders, stats.under_replicated
        shrinks, expands = stats.isr_shrinks, stats.isr_expands
        controller, offline = stats.controller, stats.offline
        yield _gauge("replicamanager_partitioncount", "Partitions with a replica on this "
                     "broker: Kafka's ReplicaManager PartitionCount.", partitions)
        yield _gauge("replicamanager_leadercount", "Partitions this broker leads: Kafka's "
                     "ReplicaManager LeaderCount.", leaders)
        yield _gauge("replicamanager_underreplicatedpartitions", "Partitions led here whose "
                     "ISR is smaller than their replica set: Kafka's ReplicaManager "
                     "UnderReplicatedPartitions.", under)
        yield _counter("replicamanager_isrshrinks", "ISR shrinks written by this broker as "
                       "leader: Kafka's ReplicaManager IsrShrinksPerSec.", shrinks)
        yield _counter("replicamanager_isrexpands", "ISR expands written by this broker as "
                       "leader: Kafka's ReplicaManager IsrExpandsPerSec.", expands)
        yield _gauge("controller_activecontrollercount", "1 on the active controller, else 0: "
                     "Kafka's KafkaController ActiveControllerCount.", int(controller))
        yield _gauge("controller_offlinepartitionscount", "Partitions without a live leader "
                     "(on the controller): Kafka's KafkaController OfflinePartitionsCount.",
                     offline)

    def _group_families(self) -> Iterator[Metric]:
        coordinator = self._ctx.groups.coordinator
        groups = sorted(coordinator.groups(), key=lambda g: g.group_id)
        by_state = GaugeMetricFamily(
            f"{PREFIX}_groupmetadatamanager_numgroups", "Groups coordinated here, per state: "
            "Kafka's GroupMetadataManager NumGroups{Stable,PreparingRebalance,...}.",
            labels=["state"])
        for state in GroupState:
            by_state.add_metric([state.value], sum(1 for g in groups if g.state is state))
        yield by_state
        yield _counter("groupcoordinator_offsetcommits", "Offsets committed (one per "
                       "partition): Kafka's group-coordinator-metrics offset-commit-count.",
                       coordinator.counters["offsets.committed"])
        members = GaugeMetricFamily(f"{PREFIX}_group_members", "Members of each group.",
                                    labels=["group"])
        generation = GaugeMetricFamily(f"{PREFIX}_group_generation",
                                       "Generation of each group.", labels=["group"])
        lag_sum = GaugeMetricFamily(
            f"{PREFIX}_consumergroup_lag_sum", "Messages between each group's committed "
            "offsets and the high watermarks, over its partitions.", labels=["group"])
        lag = GaugeMetricFamily(
            f"{PREFIX}_consumergroup_lag", "High watermark minus committed offset, per group "
            "and partition (what Burrow computes).", labels=["group", "topic", "partition"])
        committed = GaugeMetricFamily(
            f"{PREFIX}_consumergroup_committed_offset", "Committed offset per group and "
            "partition.", labels=["group", "topic", "partition"])
        for group in groups:
            members.add_metric([group.group_id], len(group.members))
            generation.add_metric([group.group_id], group.generation)
            total = 0
            for topic, partition, offset, behind in self._lags(group):
                total += behind
                if self._partition_series:
                    labels = [group.group_id, topic, str(partition)]
                    lag.add_metric(labels, behind)
                    committed.add_metric(labels, offset)
            lag_sum.add_metric([group.group_id], total)
        yield from (members, generation, lag_sum)
        if self._partition_series:
            yield from (lag, committed)

    def _lags(self, group: Group) -> Iterable[tuple[str, int, int, int]]:
        """(topic, partition, committed, lag) of each committed partition with a replica
        here."""
        for tp in sorted(group.offsets):
            plog = self._ctx.topics.log(tp.topic, tp.partition)
            if plog is None:
                continue
            offset = group.offsets[tp].offset
            yield tp.topic, tp.partition, offset, max(plog.high_watermark - offset, 0)

    # ---------------------------------------------------------------------------- output

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _gauge(name: str, meaning: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", meaning, value=value)


def _counter(name: str, meaning: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", meaning, value=value)


# ------------------------------------------------------------------------------- listener

#: the most bytes of an HTTP request head read, and how long a scraper may take to send it
MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_S = 10.0
#: the most metrics connections served at once (Prometheus opens one per scrape; a few servers
#: scrape each broker); more are closed at once, so that idle connections cannot pile up
MAX_CONNECTIONS = 4


async def serve_metrics(
    metrics: BrokerMetrics, address: str, *, task_status: trio.TaskStatus[int]
) -> None:
    """Serve ``GET /metrics`` on ``address`` until cancelled; starts with the port bound."""
    host, port = host_port(address)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    log.info("metrics.listening", host=host, port=bound)
    task_status.started(bound)
    slots = trio.CapacityLimiter(MAX_CONNECTIONS)
    await trio.serve_listeners(partial(_answer, metrics, slots), listeners)


async def _answer(
    metrics: BrokerMetrics, slots: trio.CapacityLimiter, stream: trio.SocketStream
) -> None:
    """One HTTP/1.x exchange, then close (Prometheus opens a connection per scrape), if one of
    the ``slots`` is free; else close at once. A scraper that drops its connection is logged
    and forgotten: an error escaping here would end the listener's nursery, and the broker
    with it."""
    async with stream:
        try:
            slots.acquire_nowait()
        except trio.WouldBlock:
            log.warning("metrics.connection_refused", limit=MAX_CONNECTIONS,
                        reason="the metrics listener's connections are all in use")
            return
        try:
            await _exchange(metrics, stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("metrics.connection_broken", reason=str(exc))
        finally:
            slots.release()


async def _exchange(metrics: BrokerMetrics, stream: trio.SocketStream) -> None:
    head = b""
    with trio.move_on_after(HEAD_TIMEOUT_S) as reading:
        while b"\r\n\r\n" not in head and len(head) < MAX_HEAD_BYTES:
            data = await stream.receive_some(MAX_HEAD_BYTES)
            if not data:
                break
            head += data
    if reading.cancelled_caught:  # an idle scraper holds a slot no longer than this
        log.info("metrics.request_timed_out", seconds=HEAD_TIMEOUT_S)
        return
    method, _, rest = head.partition(b" ")
    path = rest.partition(b" ")[0].partition(b"?")[0]
    if method != b"GET":
        status, body, kind = "405 Method Not Allowed", b"GET only\n", "text/plain"
    elif path in (b"/metrics", b"/"):
        status, body, kind = "200 OK", metrics.exposition(), CONTENT_TYPE_LATEST
    else:
        status, body, kind = "404 Not Found", b"see /metrics\n", "text/plain"
    response = (f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}"
                "\r\nConnection: close\r\n\r\n").encode() + body
    with trio.move_on_after(HEAD_TIMEOUT_S):
        await stream.send_all(response)
