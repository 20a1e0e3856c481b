"""The mirror's progress line and Prometheus metrics."""

from __future__ import annotations

import urllib.request

from client.records import TopicPartition
from tooling.mirror.progress import Progress, serve_metrics


def test_the_line_gives_rates_since_the_last_line_and_lag_per_topic() -> None:
    progress = Progress()
    progress.line(100.0)
    progress.sent("orders", 5_000, 2_000_000)
    progress.sent("payments", 1_000, 500_000)
    progress.add(acknowledged=4_000)
    progress.set_lag({TopicPartition("orders", 0): 7, TopicPartition("orders", 1): 3,
                      TopicPartition("payments", 0): 0}, [])
    line = progress.line(102.0)
    assert line == ("mirror: 3,000 msgs/s 1.2 MB/s, 6,000 messages sent, 4,000 acknowledged; "
                    "lag orders=10 payments=0")
    progress.set_lag({}, [TopicPartition("payments", 0)])
    assert progress.line(104.0).endswith("0 msgs/s 0.0 MB/s, 6,000 messages sent, 4,000 "
                                         "acknowledged; lag orders=10")


def test_the_metrics_listener_serves_the_counts() -> None:
    progress = Progress()
    progress.sent("orders", 12, 3_400)
    progress.set_lag({TopicPartition("orders", 2): 5}, [])
    progress.add(acknowledged=12, commits=2)
    host, port = serve_metrics(progress, "127.0.0.1", 0)
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    assert 'odradek_mirror_messages_total{topic="orders"} 12.0' in text
    assert 'odradek_mirror_bytes_total{topic="orders"} 3400.0' in text
    assert 'odradek_mirror_lag{partition="2",topic="orders"} 5.0' in text
    assert "odradek_mirror_acknowledged_messages_total 12.0" in text
    assert "odradek_mirror_commits_total 2.0" in text
