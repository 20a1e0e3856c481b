"""``Consumer``: reads assigned partitions with ``poll`` -- single-threaded, no background work.

Three separate pieces, so group membership can be added without touching the others:

- ``FetchPositions`` (client/positions.py): which partitions, and the position in each;
- ``Fetcher`` (client/fetcher.py): Fetch and ListOffsets requests, decoding, buffering;
- ``poll`` (here): the loop that drives both over non-blocking sockets (``selectors``).

Today partitions come from ``assign`` (the seed's "manual partition assignment") and positions
from ``seek`` or ``auto_offset_reset`` ("manual offset management"). Group membership will sit
in front of the fetch step of the loop -- find the coordinator, join, heartbeat -- and call the
same ``FetchPositions.assign`` on each rebalance.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from types import TracebackType

from client.errors import (
    ClientTimeoutError,
    ConfigError,
    IllegalStateError,
    NoOffsetForPartitionError,
)
from client.fetcher import FetchConfig, Fetcher
from client.metadata import MetadataTracker
from client.network import NetworkClient
from client.offsets import EARLIEST, LATEST, list_offsets
from client.positions import FetchPositions, OffsetReset
from client.records import ConsumerRecord, TopicPartition


class Consumer:
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "127.0.0.1:9092",
        *,
        client_id: str = "odradek-consumer",
        auto_offset_reset: str | OffsetReset = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        partition_fetch_bytes: int = 1024 * 1024,
        max_partition_fetch_bytes: int = 16 * 1024 * 1024,
        max_poll_records: int = 500,
        check_crcs: bool = True,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300_000,
        default_api_timeout_ms: int = 60_000,
    ) -> None:
        for name, value, low in (
            ("fetch_min_bytes", fetch_min_bytes, 0),
            ("fetch_max_wait_ms", fetch_max_wait_ms, 0),
            ("fetch_max_bytes", fetch_max_bytes, 1),
            ("partition_fetch_bytes", partition_fetch_bytes, 1),
            ("max_partition_fetch_bytes", max_partition_fetch_bytes, partition_fetch_bytes),
            ("max_poll_records", max_poll_records, 1),
            ("request_timeout_ms", request_timeout_ms, 1),
            ("retry_backoff_ms", retry_backoff_ms, 0),
            ("default_api_timeout_ms", default_api_timeout_ms, 0),
        ):
            if value < low:
                raise ConfigError(f"{name}={value} is invalid; it must be at least {low}")
        self._max_poll_records = max_poll_records
        self._backoff = retry_backoff_ms / 1000
        self._api_timeout = default_api_timeout_ms / 1000
        try:
            self._network = NetworkClient(
                bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms
            )
        except ValueError as exc:
            raise ConfigError(f"bootstrap: {exc}") from None
        self._metadata = MetadataTracker(
            self._network,
            allow_auto_topic_creation=False,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._positions = FetchPositions(OffsetReset.parse(auto_offset_reset))
        self._fetcher = Fetcher(
            self._metadata,
            self._positions,
            FetchConfig(
                min_bytes=fetch_min_bytes,
                max_wait_ms=fetch_max_wait_ms,
                max_bytes=fetch_max_bytes,
                partition_bytes=partition_fetch_bytes,
                max_partition_bytes=max_partition_fetch_bytes,
                check_crcs=check_crcs,
                retry_backoff_ms=retry_backoff_ms,
            ),
        )
        self._closed = False

    # ------------------------------------------------------------------------- assignment

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (replacing any earlier assignment). Partitions kept
        from the earlier assignment keep their positions; new ones start per
        ``auto_offset_reset`` unless you ``seek`` them first."""
        self._check_open()
        tps = [TopicPartition(*tp) for tp in partitions]
        self._positions.assign(tps)
        self._metadata.set_topics({tp.topic for tp in tps})

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions.assigned())

    def partitions_for(self, topic: str, timeout_ms: int | None = None) -> list[int]:
        """The topic's partitions; raises ``UnknownTopicOrPartitionError`` if it does not
        exist (waiting up to ``timeout_ms``, default ``default_api_timeout_ms``)."""
        self._check_open()
        self._metadata.wait_for_topic(topic, self._timeout(timeout_ms))
        return sorted(self._metadata.current.topics[topic].partitions)

    # -------------------------------------------------------------------------- positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """The next ``poll`` returns ``partition``'s messages from ``offset`` on."""
        self._positions.seek(TopicPartition(*partition), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Start from the earliest offset still stored (all assigned partitions if none given).
        Looked up lazily, at the next ``poll`` or ``position``."""
        self._request_reset(partitions, OffsetReset.EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Start after the last message (only new messages are returned)."""
        self._request_reset(partitions, OffsetReset.LATEST)

    def _request_reset(self, partitions: Sequence[TopicPartition], reset: OffsetReset) -> None:
        for tp in partitions or self._positions.assigned():
            self._positions.request_reset(TopicPartition(*tp), reset)

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next message ``poll`` returns for ``partition``, looking it up
        first if a reset is pending."""
        self._check_open()
        tp = TopicPartition(*partition)
        deadline = time.monotonic() + self._timeout(timeout_ms)
        while (position := self._positions.position(tp)) is None:
            self._fetcher.raise_error()
            self._check_positions()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ClientTimeoutError(f"position of {tp} not found within the timeout")
            self._metadata.poll()
            self._fetcher.send_resets()
            self._network.poll(min(remaining, self._backoff))
        return position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before any fetch)."""
        hw = self._positions.state(TopicPartition(*partition)).high_watermark
        return None if hw < 0 else hw

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The earliest stored offset of each partition (asks the leaders now)."""
        return self._list_offsets(partitions, EARLIEST, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The offset the next message appended to each partition will get."""
        return self._list_offsets(partitions, LATEST, timeout_ms)

    def _list_offsets(
        self, partitions: Iterable[TopicPartition], when: int, timeout_ms: int | None
    ) -> dict[TopicPartition, int]:
        self._check_open()
        specs = {TopicPartition(*tp): when for tp in partitions}
        found = list_offsets(self._metadata, specs, self._timeout(timeout_ms))
        return {tp: answer.offset for tp, answer in found.items()}

    # ------------------------------------------------------------------------------- poll

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``); waits up to ``timeout_ms`` for some, else returns ``[]``.
        Errors met while fetching (an out-of-range offset with ``auto_offset_reset=none``, a
        message too large, a corrupt message) are raised here."""
        self._check_open()
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._fetcher
        timed_out = False
        while True:
            # Group membership (join, heartbeat) will run here, before fetching.
            fetcher.raise_error()
            self._check_positions()
            records = fetcher.take(limit)
            if records:
                fetcher.send_fetches()  # the next chunk travels while the caller works
                return records
            if timed_out:
                return []
            self._metadata.poll()
            fetcher.send_resets()
            fetcher.send_fetches()
            remaining = deadline - time.monotonic()
            timed_out = remaining <= 0  # even poll(0) reads what has arrived, once
            self._network.poll(min(max(remaining, 0.0), self._backoff))

    def _check_positions(self) -> None:
        if self._positions.default_reset is not OffsetReset.NONE:
            return
        missing = [
            tp
            for tp in self._positions.without_position()
            if self._positions.state(tp).reset is None
        ]
        if missing:
            raise NoOffsetForPartitionError(
                f"{', '.join(map(str, missing))}: no position and auto_offset_reset is none; "
                "seek first"
            )

    # ------------------------------------------------------------------------------ close

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._network.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("consumer is closed")

    def _timeout(self, timeout_ms: int | None) -> float:
        return self._api_timeout if timeout_ms is None else timeout_ms / 1000
