"""Helpers for the observability tests: a broker with its metrics listener, and scraping it."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import wait_for

#: no 3 s wait for more members before a new group's first round
QUICK_GROUPS = {"group_initial_rebalance_delay_ms": 0}


def start_with_metrics(make_broker: Callable[..., BrokerProcess], **settings: Any
                       ) -> tuple[BrokerProcess, str]:
    """A broker whose metrics listener took a free port; (broker, metrics URL)."""
    broker = make_broker(settings={"metrics_listener": "127.0.0.1:0", **QUICK_GROUPS,
                                   **settings})
    port = wait_for(lambda: metrics_port(broker.log_text()), timeout=10,
                    what="the metrics.listening log line")
    return broker, f"http://127.0.0.1:{port}/metrics"


def metrics_port(log_text: str) -> int | None:
    """The port of the newest metrics.listening line in a broker's log."""
    found = re.findall(r"metrics\.listening.*?port=(\d+)", log_text)
    return int(found[-1]) if found else None


#: every sample of a scrape: (name, sorted labels) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample, parsed by prometheus_client's own parser: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def labelled(samples: Samples, **labels: str) -> list[str]:
    """The names of the samples carrying each of ``labels`` (among others)."""
    return sorted({name for name, pairs in samples if set(labels.items()) <= set(pairs)})
