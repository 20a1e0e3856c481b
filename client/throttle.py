"""How long brokers held this client's responses back for its quota (``throttle_time_ms``):
the client's view of Kafka's produce-throttle-time and fetch-throttle-time metrics."""

from __future__ import annotations

import logging
from dataclasses import dataclass


@dataclass
class ThrottleStats:
    """Totals over the client's life; ``last_ms`` is the latest response's."""

    responses: int = 0  # responses that said how long they were held back
    throttled: int = 0  # of those, how many were held back at all
    last_ms: int = 0
    max_ms: int = 0
    total_ms: int = 0

    def record(self, throttle_ms: int, log: logging.Logger, what: str) -> None:
        self.responses += 1
        self.last_ms = throttle_ms
        if throttle_ms <= 0:
            return
        self.throttled += 1
        self.max_ms = max(self.max_ms, throttle_ms)
        self.total_ms += throttle_ms
        log.debug("%s response held back %d ms by the broker: over the client's quota",
                  what, throttle_ms)
