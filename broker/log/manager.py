"""Every partition log of a data directory, and the periodic pass that maintains them.

At start the manager opens each ``<topic>-<partition>`` directory under the data directory and
takes an exclusive lock on it, so that two brokers never share one. ``run_maintenance`` flushes
(``flush_ms``), deletes by retention and compacts; the server calls it from a timer, directly or
in a worker thread (see ``PartitionLog`` on threads).

With ``replicated=True`` (a broker of a cluster), every log's high watermark is kept by
replication: ``checkpoint_high_watermarks`` writes them to ``replication-offset-checkpoint`` in
the data directory (Kafka's format: version 0, the count, then ``topic partition offset``
lines), after every maintenance pass and at close, and each log starts from its checkpointed
one when opened. A single broker (the default) neither reads nor writes the file: its logs'
high watermarks follow their log end offsets.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker.log import layout
from broker.log.config import LogConfig
from broker.log.errors import CorruptCheckpointError, LogClosedError
from broker.log.partition_log import DELETING_SUFFIX, PartitionLog, RecoveryLoss

log = structlog.get_logger(__name__)

LOCK_FILE = ".lock"


@dataclass(frozen=True)
class MaintenanceResult:
    flushed: int = 0  # logs flushed because of flush_ms
    segments_deleted: int = 0
    compacted: int = 0  # logs compacted
    high_watermarks_checkpointed: bool = False  # replication-offset-checkpoint rewritten


class DataDirectoryInUseError(RuntimeError):
    """Another process holds the data directory."""


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        clock: Callable[[], float] = time.time,
        replicated: bool = False,
    ) -> None:
        self._data_dir = Path(data_dir)
        self._replicated = replicated
        self._checkpoint_lock = threading.Lock()
        self._checkpointed: dict[tuple[str, int], int] | None = None  # as last written
        self._default_config = default_config
        self._topic_configs = dict(topic_configs or {})
        self._clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.Lock()
        #: called with the duration in seconds of each flush of these logs, from whichever
        #: thread flushed (the broker's metrics)
        self.flush_observers: list[Callable[[float], None]] = []
        #: called with a topic's name once the last of its partition logs here is deleted (the
        #: broker's metrics drop the topic's series, as Kafka does)
        self.topic_removed_listeners: list[Callable[[str], None]] = []
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = os.open(
            self._data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644
        )
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise DataDirectoryInUseError(f"{self._data_dir} is used by another process") from None
        high_watermarks = self._read_high_watermarks() if replicated else {}
        #: the logs opening cut because they were damaged: what each lost, and the high
        #: watermark checkpointed before (-1: none). A replica of a cluster that lost entries
        #: may lack acknowledged messages: it must not lead with the hole while an in-sync
        #: replica has them (``broker.cluster.damaged``).
        self.damaged: dict[tuple[str, int], tuple[RecoveryLoss, int]] = {}
        for path in sorted(self._data_dir.iterdir()):
            if path.is_dir() and path.name.endswith(DELETING_SUFFIX):
                shutil.rmtree(path)  # a deletion a crash interrupted
                continue
            parsed = layout.parse_partition_dir(path.name)
            if parsed is not None and path.is_dir():
                topic, _partition = parsed
                self._logs[parsed] = PartitionLog.open(
                    path,
                    self.config_for(topic),
                    clock=clock,
                    replicated=replicated,
                    high_watermark=high_watermarks.get(parsed),
                    on_flush=self._flushed,
                )
                loss = self._logs[parsed].recovery_loss
                if loss is not None:
                    self._damaged(parsed, loss, high_watermarks.get(parsed, -1))
        log.info("log.manager.opened", data_dir=str(self._data_dir), partitions=len(self._logs))

    def _damaged(self, tp: tuple[str, int], loss: RecoveryLoss, high_watermark: int) -> None:
        self.damaged[tp] = (loss, high_watermark)
        if high_watermark > loss.first_offset:
            log.error(
                "log.manager.committed_data_dropped",
                topic=tp[0],
                partition=tp[1],
                first_offset_dropped=loss.first_offset,
                old_log_end_offset=loss.old_end,
                high_watermark=high_watermark,
                reason=loss.reason,
            )

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def replicated(self) -> bool:
        """Whether the logs' high watermarks are kept by replication (see the module doc)."""
        return self._replicated

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self._default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for ``topic``'s partitions, open ones included."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [plog for (t, _p), plog in self._logs.items() if t == topic]
        for plog in logs:
            plog.reconfigure(config)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created empty if it does not exist. A ``config`` becomes the
        topic's config (see ``set_topic_config``)."""
        if config is not None:
            self.set_topic_config(topic, config)
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            directory = self._data_dir / layout.partition_dir_name(topic, partition)
            plog = PartitionLog.open(directory, self.config_for(topic), clock=self._clock,
                                     replicated=self._replicated, on_flush=self._flushed)
            self._logs[(topic, partition)] = plog
            return plog

    def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and its directory; False if there was none."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
            last = not any(t == topic for t, _p in self._logs)
        if plog is None:
            return False
        plog.delete()
        if self._replicated:  # its line must not come back for a partition made anew
            self.checkpoint_high_watermarks()
        if last:
            for listener in self.topic_removed_listeners:
                listener(topic)
        return True

    def _flushed(self, seconds: float) -> None:
        for observe in self.flush_observers:
            observe(seconds)

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def run_maintenance(self, now: float | None = None) -> MaintenanceResult:
        """One pass over every log: flush by ``flush_ms``, retention, compaction, and
        forgetting idle idempotent producers (``producer_id_expiration_ms``)."""
        now = self._clock() if now is None else now
        flushed = deleted = compacted = 0
        with self._lock:
            logs = list(self._logs.values())
        for plog in logs:
            try:
                flushed += plog.maybe_flush(now)
                deleted += plog.enforce_retention(now)
                compacted += plog.compact(now)
                plog.expire_producers(now)
            except LogClosedError:
                continue  # deleted while the pass ran
            except Exception:  # one failing partition must not stop the others' upkeep
                log.exception("log.maintenance.failed", directory=str(plog.directory))
        try:
            checkpointed = self.checkpoint_high_watermarks()
        except Exception:
            log.exception("log.manager.checkpoint_failed", data_dir=str(self._data_dir))
            checkpointed = False
        return MaintenanceResult(flushed, deleted, compacted, checkpointed)

    def checkpoint_high_watermarks(self) -> bool:
        """Write every replicated log's high watermark to ``replication-offset-checkpoint``
        (atomically, fsynced), unless none changed since the last write. Returns whether it
        wrote; a manager that is not ``replicated`` never does."""
        if not self._replicated:
            return False
        with self._checkpoint_lock:  # collected and written in one order: the last one wins
            with self._lock:
                logs = dict(self._logs)
            marks: dict[tuple[str, int], int] = {}
            for (topic, partition), plog in logs.items():
                if not plog.replicated or len(topic.split()) != 1:
                    continue  # a name with whitespace cannot be a legal topic, nor be written
                try:
                    marks[(topic, partition)] = plog.high_watermark
                except LogClosedError:
                    continue  # deleted meanwhile
            if marks == self._checkpointed:
                return False
            layout.write_checkpoint(
                self._data_dir / layout.REPLICATION_OFFSET_CHECKPOINT,
                [(topic, partition, mark) for (topic, partition), mark in sorted(marks.items())],
            )
            self._checkpointed = marks
        return True

    def _read_high_watermarks(self) -> dict[tuple[str, int], int]:
        """The checkpointed high watermarks. A damaged file is ignored with a warning: a high
        watermark that starts low only delays what consumers see until the leader moves it."""
        path = self._data_dir / layout.REPLICATION_OFFSET_CHECKPOINT
        try:
            rows = layout.read_checkpoint(path, 3) or []
            marks = {(topic, int(partition)): int(offset) for topic, partition, offset in rows}
        except (CorruptCheckpointError, ValueError) as exc:
            log.warning("log.manager.high_watermarks_unreadable", path=str(path), error=str(exc))
            return {}
        self._checkpointed = marks
        return marks

    def close(self) -> None:
        """Checkpoint the high watermarks, close every log cleanly and release the data
        directory."""
        try:
            self.checkpoint_high_watermarks()
        except Exception:  # the logs must still be closed cleanly
            log.exception("log.manager.checkpoint_failed", data_dir=str(self._data_dir))
        with self._lock:
            logs, self._logs = list(self._logs.values()), {}
        for plog in logs:
            plog.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
