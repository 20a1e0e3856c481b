"""The coordinator's server settings, with their defaults and Kafka names."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, kw_only=True)
class CoordinatorConfig:
    """Group coordinator settings. Each field names its Kafka (or seed 001) equivalent.

    ``group_initial_rebalance_delay_ms`` defaults to 300 ms, not Kafka's 3 s. The delay exists so
    that consumers started together land in one round instead of one rebalance each; each new
    member extends the wait by the delay again (capped by the rebalance timeout), so a staggered
    start still lands in one round as long as consecutive members start less than 300 ms apart --
    which covers processes launched together by a script or supervisor, whose first JoinGroup
    follows interpreter start-up by tens of milliseconds. A lone consumer pays 0.3 s once, at the
    group's first round, instead of 3 s.
    """

    #: Kafka group.min.session.timeout.ms. Lower session timeouts -> INVALID_SESSION_TIMEOUT.
    group_min_session_timeout_ms: int = 6_000
    #: Kafka group.max.session.timeout.ms; seed 001 max.session.timeout ("SessionTimeoutTooHigh").
    group_max_session_timeout_ms: int = 300_000
    #: Kafka group.initial.rebalance.delay.ms (3 000 there); see the class docstring.
    group_initial_rebalance_delay_ms: int = 300
    #: Seed 001 partition.assignment.strategies: the strategy names members may ask for.
    partition_assignment_strategies: tuple[str, ...] = ("range", "roundrobin", "sticky")
    #: Kafka offsets.topic.num.partitions (50 there): partitions of __consumer_offsets.
    offsets_topic_partitions: int = 16
    #: Kafka offset.metadata.max.bytes: longer commit metadata -> OFFSET_METADATA_TOO_LARGE.
    offset_metadata_max_bytes: int = 4096
    #: Kafka offsets.retention.minutes (10080), in ms: how long an Empty group keeps offsets.
    offsets_retention_ms: int = 7 * DAY_MS
    #: Kafka offsets.retention.check.interval.ms: how often expired offsets are looked for.
    offsets_retention_check_interval_ms: int = 600_000

    def __post_init__(self) -> None:
        if not 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ValueError(
                "need 0 < group_min_session_timeout_ms <= group_max_session_timeout_ms, got "
                f"{self.group_min_session_timeout_ms} and {self.group_max_session_timeout_ms}"
            )
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group_initial_rebalance_delay_ms must be >= 0")
        if not self.partition_assignment_strategies:
            raise ValueError("partition_assignment_strategies must name at least one strategy")
        if self.offsets_topic_partitions < 1:
            raise ValueError("offsets_topic_partitions must be >= 1")
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset_metadata_max_bytes must be >= 0")
        if self.offsets_retention_ms < 1 or self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offsets_retention_ms and its check interval must be >= 1")
