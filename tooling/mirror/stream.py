"""One mirror stream: a consumer in the mirror's group on the source, a producer on the target.

Pass-through (the default): ``Consumer.poll_sets`` hands out stored message sets and
``Producer.send_set`` appends each, unopened, to the same partition number of the target topic
-- about one fetch and one produce of the same bytes per message (seed 001: no
"decompression/recompression in mirror maker"). Sets fetched while their partition's last send
is unanswered wait and go joined as one (``waiting``), so a backlog drains in large requests.
With ``recompress`` the messages are decoded and produced again with that codec, as Kafka's
MirrorMaker does.

Nothing acknowledged is lost: a source offset is committed only once the target acknowledged
every message before it. Per partition the sends settle in order (the producer sends one
request per partition at a time), so the *acknowledged* offset moves past the ones done; a set
the target refuses fails the sets queued after it (``Producer.send_set``), so it is the last of
its partition to land. Commits go every ``commit_interval``, when
partitions are revoked (after waiting for the producer: the next owner starts from there) and
at the end. A mirror killed at any point restarts from its last commit, so the target holds
every message the source acknowledged, and at most the uncommitted window twice.

A send the target refuses for good (its producer gave up: ``delivery_timeout_ms``, or an error
that retrying cannot fix) ends the stream with ``MirrorError``: the offsets before it are
committed, it and what follows are neither committed nor sent, so a restart tries them again
in order. (Recompressed records have no such guard: after a refused batch, later batches of its
partition may land before the mirror stops -- duplicates on restart, never a loss.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from client.consumer import Consumer
from client.errors import CommitFailedError
from client.message_sets import FetchedSet
from client.producer import Producer
from client.records import ConsumerRecord, TopicPartition
from client.security import SecurityOptions
from client.subscription import ConsumerRebalanceListener
from protocol.compression import Codec
from protocol.errors import OdradekError
from tooling.mirror.acks import Acknowledgements, RefusedSend
from tooling.mirror.naming import TopicSelection
from tooling.mirror.progress import Progress
from tooling.mirror.waiting import WaitingSets

log = logging.getLogger("odradek.mirror")


class MirrorError(OdradekError):
    """The target refused a message for good; the mirror stopped with the offsets before it
    committed."""


@dataclass(frozen=True)
class StreamConfig:
    source: str
    target: str
    group: str = "odradek-mirror"
    source_security: SecurityOptions = field(default_factory=dict)  # type: ignore[assignment]
    target_security: SecurityOptions = field(default_factory=dict)  # type: ignore[assignment]
    source_properties: dict[str, Any] = field(default_factory=dict)  # Consumer keyword args
    target_properties: dict[str, Any] = field(default_factory=dict)  # Producer keyword args
    acks: str = "all"
    recompress: Codec | None = None
    commit_interval: float = 5.0
    from_latest: bool = False  # where nothing is committed (default: the earliest offset)
    #: how often the source's metadata is refreshed: a --topics pattern sees new topics then
    metadata_max_age_ms: int = 30_000
    client_id: str = "odradek-mirror"


#: bytes waiting for the target's acknowledgement above which no more sets are taken
_PAUSE_BYTES = 16 * 1024 * 1024
#: sets fetched while their partition's send is unanswered are joined up to one fetch of a
#: partition (the consumer's ``partition_fetch_bytes``, this by default): never larger than
#: the set a fetch of a backlog gives anyway
_JOIN_BYTES = 1024 * 1024

#: resolves a source topic (and a partition it must have) to the target topic
TargetOf = Callable[[str, int], str]


class MirrorStream:
    def __init__(self, config: StreamConfig, selection: TopicSelection, target_of: TargetOf,
                 progress: Progress, *, name: str = "stream-0",
                 note: Callable[[str], None] = log.info) -> None:
        self._config = config
        self.note = note  # what the mirror's user is told: partitions gained and lost
        self._target_of = target_of
        self._progress = progress
        self.name = name
        self._acks = Acknowledgements()
        self._next_commit = time.monotonic() + config.commit_interval
        consumer_settings: dict[str, Any] = {
            "client_id": f"{config.client_id}-{name}",
            "auto_offset_reset": "latest" if config.from_latest else "earliest",
            "metadata_max_age_ms": config.metadata_max_age_ms,
            **config.source_properties,
            **config.source_security,
            # what the mirror's correctness rests on: not for properties to change
            "group_id": config.group, "enable_auto_commit": False,
            "message_sets": config.recompress is None,
        }
        self.consumer = Consumer(config.source, **consumer_settings)
        self._waiting = WaitingSets(consumer_settings.get("partition_fetch_bytes", _JOIN_BYTES))
        largest_set = consumer_settings.get("max_partition_fetch_bytes", 16 * 1024 * 1024)
        self.producer = Producer(config.target, **{
            "client_id": f"{config.client_id}-{name}",
            # a set is one fetched chunk, at most as large as the consumer fetches
            "max_request_bytes": max(largest_set, 1024 * 1024) + 1024,
            **config.target_properties,
            **config.target_security,
            "acks": config.acks, "compression": config.recompress or Codec.NONE,
        })
        listener = _Listener(self)
        if selection.pattern is not None:
            self.consumer.subscribe(pattern=selection.pattern, listener=listener)
        else:
            self.consumer.subscribe(sorted(selection.names), listener=listener)

    # ------------------------------------------------------------------------------ loop

    def run(self, stopping: Callable[[], bool]) -> None:
        """Mirror until ``stopping()`` says so; then commit what the target acknowledged and
        leave the group. ``MirrorError`` when the target refused a message for good."""
        try:
            while not stopping():
                self.turn()
        finally:
            self.close()

    def turn(self) -> None:
        """One round: settle acknowledgements, commit when due, fetch and send."""
        self._settle()
        if time.monotonic() >= self._next_commit:
            self._commit()
        self._release()
        waiting = self._acks.waiting
        wait = 10 if waiting else 200
        # while the target is behind, polls only keep the group's membership (heartbeats):
        # the sets wait in the consumer, one fetched chunk per partition at most
        held = self.producer.buffered_bytes + self._waiting.bytes
        limit = None if held < _PAUSE_BYTES else 0
        if self._config.recompress is None:
            for s in self.consumer.poll_sets(timeout_ms=wait, max_sets=limit):
                self._take_set(s)
        else:
            self._send_records(self.consumer.poll(timeout_ms=wait, max_records=limit))
        self.producer.poll(0)
        self._progress.set_lag(self._lags(), [])

    def _take_set(self, s: FetchedSet) -> None:
        """Send a fetched set, or hold it while its partition's last send is unanswered."""
        tp = TopicPartition(s.topic, s.partition)
        if tp in self._waiting or self._acks.unanswered(tp):
            self._waiting.add(s)
        else:
            self._send_set(s)

    def _release(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Send the held sets, joined, of the partitions whose sends are all answered (or of
        ``partitions``, answered or not: revoked, or the end)."""
        for tp in self._waiting if partitions is None else partitions:
            if partitions is None and self._acks.unanswered(tp):
                continue
            for s in self._waiting.take(tp):
                self._settle()  # a send refused meanwhile: nothing may land after it
                self._send_set(s)

    def _send_set(self, s: FetchedSet) -> None:
        tp = TopicPartition(s.topic, s.partition)
        future = self.producer.send_set(self._target_of(s.topic, s.partition), s.partition,
                                        s.data)
        self._acks.sent(tp, s.offset, s.next_offset, (future,))
        self._progress.sent(s.topic, s.next_offset - s.offset, len(s.data))

    def _send_records(self, records: list[ConsumerRecord]) -> None:
        """Decoded messages produced again (``recompress``), a partition's run at a time."""
        runs: dict[TopicPartition, list[ConsumerRecord]] = {}
        for r in records:
            runs.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        send = self.producer.send
        for tp, run in runs.items():
            target = self._target_of(tp.topic, tp.partition)
            futures = [send(target, r.value, r.key, r.partition, r.timestamp) for r in run]
            self._acks.sent(tp, run[0].offset, run[-1].offset + 1, futures)
            self._progress.sent(tp.topic, len(run),
                                sum(len(r.value or b"") + len(r.key or b"") for r in run))

    def _settle(self) -> None:
        """Count what the target acknowledged; the first refused send ends the stream."""
        try:
            self._progress.add(acknowledged=self._acks.settle())
        except RefusedSend as exc:
            target = self._target_of(exc.tp.topic, exc.tp.partition)
            raise MirrorError(
                f"the target refused a message of {exc.tp} (target topic {target!r}): "
                f"{exc.error}; the offsets before it are committed"
            ) from exc.error

    def _commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit the acknowledged offsets that moved since the last commit."""
        self._next_commit = time.monotonic() + self._config.commit_interval
        offsets = self._acks.to_commit(partitions)
        if not offsets:
            return
        try:
            self.consumer.commit(offsets)
        except CommitFailedError as exc:
            # the group is rebalancing (the next commit carries these offsets too), or it
            # moved on without this member: the partitions' new owners start from the last
            # commit, so what was sent since is sent again (counted as duplicates)
            log.warning("mirror_commit_failed stream=%s error=%s", self.name, exc)
            return
        self._acks.committed(offsets)
        self._progress.add(commits=1)

    def _lags(self) -> dict[TopicPartition, int]:
        out = {}
        for tp in self.consumer.assignment():
            high = self.consumer.highwater(tp)
            done = self._acks.acknowledged(tp)
            if high is not None and done is not None:
                out[tp] = max(high - done, 0)
        return out

    # ------------------------------------------------------------------------- hand-over

    def hand_over(self, revoked: list[TopicPartition]) -> None:
        """Partitions are revoked: wait for the target to acknowledge what was sent, commit
        it, and forget them -- their next owner starts where this one's acknowledgements end."""
        self._release(revoked)
        self.producer.flush()
        self._settle()
        self._commit(revoked)
        self._acks.forget(revoked)
        self._progress.set_lag({}, revoked)

    def close(self) -> None:
        """Wait for the target's acknowledgements, commit them and leave the group (a refused
        send is raised after the commit of the offsets before it)."""
        error: BaseException | None = None
        try:
            self._release(list(self._waiting))
            self.producer.flush()
            self._settle()
        except (MirrorError, OdradekError) as exc:
            error = exc
        try:
            self._commit()
        finally:
            self.consumer.close()
            self.producer.close(0)
        if error is not None:
            raise error


class _Listener(ConsumerRebalanceListener):
    def __init__(self, stream: MirrorStream) -> None:
        self._stream = stream

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self._stream.hand_over(revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # incremental rebalancing names only the new partitions: say what the stream has now
        owned = ", ".join(map(str, sorted(self._stream.consumer.assignment()))) or "none"
        self._stream.note(f"mirror: {self._stream.name} mirrors {owned}")
