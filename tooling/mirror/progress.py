"""What a mirror has done: counts per source topic, lag per source partition, the periodic
line and the Prometheus metrics (``--metrics-listener``). Streams run in threads of their own,
so every count goes through one lock; the line and a scrape read a copy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from client.records import TopicPartition


@dataclass
class TopicCounts:
    messages: int = 0  # offsets copied (a compacted source has gaps: then a little more)
    bytes: int = 0  # stored bytes sent (compressed, as they are on the source)


@dataclass
class Progress:
    topics: dict[str, TopicCounts] = field(default_factory=dict)
    lag: dict[TopicPartition, int] = field(default_factory=dict)  # high watermark - position
    acknowledged: int = 0  # messages the target acknowledged
    commits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last: tuple[float, int, int] = (0.0, 0, 0)  # time, messages, bytes at the last line

    def sent(self, topic: str, messages: int, size: int) -> None:
        with self._lock:
            counts = self.topics.get(topic)
            if counts is None:
                counts = self.topics[topic] = TopicCounts()
            counts.messages += messages
            counts.bytes += size

    def set_lag(self, lags: dict[TopicPartition, int], released: list[TopicPartition]) -> None:
        with self._lock:
            self.lag.update(lags)
            for tp in released:
                self.lag.pop(tp, None)

    def add(self, *, acknowledged: int = 0, commits: int = 0) -> None:
        with self._lock:
            self.acknowledged += acknowledged
            self.commits += commits

    def totals(self) -> tuple[int, int]:
        with self._lock:
            return (sum(c.messages for c in self.topics.values()),
                    sum(c.bytes for c in self.topics.values()))

    def line(self, now: float | None = None) -> str:
        """``mirror: 12,345 msgs/s 3.1 MB/s since the last line; lag orders=0 events=12``."""
        now = time.monotonic() if now is None else now
        messages, size = self.totals()
        then, last_messages, last_bytes = self._last
        self._last = (now, messages, size)
        elapsed = max(now - then, 1e-9) if then else 0.0
        rate = (messages - last_messages) / elapsed if elapsed else 0.0
        byte_rate = (size - last_bytes) / elapsed if elapsed else 0.0
        with self._lock:
            by_topic: dict[str, int] = {}
            for tp, lag in self.lag.items():
                by_topic[tp.topic] = by_topic.get(tp.topic, 0) + lag
        lags = " ".join(f"{t}={n:,}" for t, n in sorted(by_topic.items())) or "(no partitions)"
        return (f"mirror: {rate:,.0f} msgs/s {byte_rate / 1e6:,.1f} MB/s, {messages:,} messages "
                f"sent, {self.acknowledged:,} acknowledged; lag {lags}")


class _Collector:
    """The mirror's metrics, read from ``Progress`` at scrape time."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def collect(self) -> Iterator[Metric]:
        progress = self._progress
        messages = CounterMetricFamily("odradek_mirror_messages", "Messages sent to the "
                                       "target, by source topic", labels=["topic"])
        sent_bytes = CounterMetricFamily("odradek_mirror_bytes", "Stored bytes sent to the "
                                         "target, by source topic", labels=["topic"])
        lag = GaugeMetricFamily("odradek_mirror_lag", "Source high watermark minus the "
                                "mirror's position", labels=["topic", "partition"])
        with progress._lock:
            for topic, counts in sorted(progress.topics.items()):
                messages.add_metric([topic], counts.messages)
                sent_bytes.add_metric([topic], counts.bytes)
            for tp, n in sorted(progress.lag.items()):
                lag.add_metric([tp.topic, str(tp.partition)], n)
            acknowledged = progress.acknowledged
            commits = progress.commits
        yield messages
        yield sent_bytes
        yield lag
        yield CounterMetricFamily("odradek_mirror_acknowledged_messages", "Messages the target "
                                  "acknowledged", value=acknowledged)
        yield CounterMetricFamily("odradek_mirror_commits", "Source offset commits",
                                  value=commits)


def serve_metrics(progress: Progress, host: str, port: int) -> tuple[str, int]:
    """Serve the metrics over HTTP (a daemon thread); the address it listens on."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Collector(progress))
    server, _ = start_http_server(port, addr=host, registry=registry)
    address = server.server_address
    return str(address[0]), int(address[1])
