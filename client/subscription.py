"""What a consumer asked to read: topics or a pattern through its group, or partitions by hand.

Seed 001 "Consumer API": a new subscription must be valid with the existing one, else
SubscriptionNotValid. Here the three ways are exclusive -- a topic list, a pattern (seed
"Wildcard Subscription": the consumer finds the matching topics in metadata itself), or manual
``assign`` -- and switching needs ``unsubscribe`` first, as in Kafka. Replacing a topic list with
another, or a pattern with another, is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum

from client.errors import SubscriptionNotValidError
from client.records import TopicPartition


class SubscriptionKind(Enum):
    NONE = "none"
    TOPICS = "topics"
    PATTERN = "pattern"
    MANUAL = "manual"


class ConsumerRebalanceListener:
    """Told about partitions changing hands in a rebalance; override either method.

    Both run inside ``poll()`` (or ``close()``), so they may call the consumer: commit, seek,
    position. ``on_partitions_revoked`` runs after fetching stopped and, with auto-commit, after
    the positions were committed; ``on_partitions_assigned`` after the positions were set from
    the committed offsets, so a ``seek`` there wins."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """The partitions this consumer owned until now (seed: onPartitionDeassigned)."""

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        """The partitions this consumer owns in the new generation (seed: onPartitionAssigned)."""


class Subscription:
    def __init__(self) -> None:
        self.kind = SubscriptionKind.NONE
        self.pattern: re.Pattern[str] | None = None
        self.listener = ConsumerRebalanceListener()
        self._topics: frozenset[str] = frozenset()

    @property
    def topics(self) -> frozenset[str]:
        """The topics the group subscription names (for a pattern: those matching it now)."""
        return self._topics

    @property
    def uses_group(self) -> bool:
        return self.kind in (SubscriptionKind.TOPICS, SubscriptionKind.PATTERN)

    def subscribe_topics(
        self, topics: Iterable[str], listener: ConsumerRebalanceListener | None
    ) -> None:
        names = frozenset(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ValueError(f"subscribe() needs topic names, got {sorted(map(str, names))}")
        self._change(SubscriptionKind.TOPICS, listener)
        self.pattern = None
        self._topics = names

    def subscribe_pattern(
        self, pattern: str | re.Pattern[str], listener: ConsumerRebalanceListener | None
    ) -> None:
        self._change(SubscriptionKind.PATTERN, listener)
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        if compiled != self.pattern:
            self.pattern = compiled
            self._topics = frozenset()

    def assign_manually(self) -> None:
        if self.uses_group:
            raise SubscriptionNotValidError(
                f"assign() cannot be mixed with a group subscription ({self.describe()}); "
                "unsubscribe() first"
            )
        self.kind = SubscriptionKind.MANUAL

    def unsubscribe(self) -> None:
        self.kind = SubscriptionKind.NONE
        self.pattern = None
        self.listener = ConsumerRebalanceListener()
        self._topics = frozenset()

    def match(self, topics: Iterable[str]) -> bool:
        """For a pattern, take the matching topics among ``topics`` (whole-name matches, as
        Kafka's); True when the set changed, which means rejoining."""
        assert self.pattern is not None
        matching = frozenset(t for t in topics if self.pattern.fullmatch(t))
        changed = matching != self._topics
        self._topics = matching
        return changed

    def describe(self) -> str:
        if self.kind is SubscriptionKind.PATTERN:
            assert self.pattern is not None
            return f"pattern {self.pattern.pattern!r}"
        if self.kind is SubscriptionKind.TOPICS:
            return f"topics {', '.join(sorted(self._topics))}"
        return str(self.kind.value)

    def _change(self, kind: SubscriptionKind, listener: ConsumerRebalanceListener | None) -> None:
        if self.kind not in (SubscriptionKind.NONE, kind):
            raise SubscriptionNotValidError(
                f"cannot subscribe to {kind.value} while the consumer uses {self.describe()}; "
                "unsubscribe() first"
            )
        self.kind = kind
        self.listener = listener or ConsumerRebalanceListener()
