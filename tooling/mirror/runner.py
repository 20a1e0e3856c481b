"""A mirror process: its streams (threads, each its own consumer and producer in the one
group), the topic sync they share, and the progress line every ``progress_interval``.

Several processes with the same ``--group`` share the partitions through the source's group
coordinator exactly as threads of one process do: one killed, the others take its partitions
from its last commit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from client.admin import Admin
from client.errors import ConfigError
from protocol.errors import OdradekError
from tooling.mirror.naming import Renaming, TopicSelection
from tooling.mirror.progress import Progress
from tooling.mirror.stream import MirrorStream, StreamConfig
from tooling.mirror.topic_sync import TopicSync

log = logging.getLogger("odradek.mirror")
_TICK = 0.2  # seconds between the supervisor's looks at the streams and the clock


@dataclass(frozen=True)
class MirrorOptions:
    stream: StreamConfig
    selection: TopicSelection
    renaming: Renaming = field(default_factory=Renaming)
    num_streams: int = 1
    progress_interval: float = 10.0  # 0: no progress line
    sync_interval: float = 30.0  # new source topics and partitions are looked for this often
    api_timeout_ms: int = 30_000


class Mirror:
    def __init__(self, options: MirrorOptions, note: Callable[[str], None]) -> None:
        if options.num_streams < 1:
            raise ConfigError(f"--num-streams {options.num_streams}: at least 1")
        self.options = options
        self.progress = Progress()
        self._note = note
        config = options.stream
        self._source = Admin(config.source, timeout_ms=options.api_timeout_ms,
                             **config.source_security)
        self._target = Admin(config.target, timeout_ms=options.api_timeout_ms,
                             **config.target_security)
        self._sync = TopicSync(self._source, self._target, options.selection, options.renaming,
                               note)
        self._lock = threading.Lock()  # the admins and the sync are one thread's at a time
        self._errors: list[BaseException] = []
        self._stop = threading.Event()

    def target_of(self, topic: str, partition: int) -> str:
        """The target topic of a source topic, synced first when it is new or grew."""
        known = self._sync.topics.get(topic)
        if known is None or partition >= known.partitions:
            with self._lock:
                known = self._sync.sync().get(topic)
            if known is None or partition >= known.partitions:
                raise ConfigError(f"source topic {topic!r} has no partition {partition} to "
                                  "mirror, or is no longer selected")
        return known.target

    def run(self, stopping: Callable[[], bool]) -> None:
        """Mirror until ``stopping()`` (checked every 0.2 s) or a stream fails; every stream
        then commits what the target acknowledged and leaves the group."""
        threads: list[threading.Thread] = []
        try:
            with self._lock:
                topics = self._sync.sync()
            count = f"{len(topics)} topic" + ("" if len(topics) == 1 else "s")
            self._note(f"mirror: {count} from {self.options.stream.source} to "
                       f"{self.options.stream.target}: " + ", ".join(
                           f"{t.source} -> {t.target} ({t.partitions})"
                           for t in topics.values()))
            for i in range(self.options.num_streams):
                threads.append(self._start(i))
            self._supervise(stopping)
        finally:
            self._stop.set()
            for thread in threads:
                thread.join()
            self._source.close()
            self._target.close()
        if self._errors:
            raise self._errors[0]

    def _start(self, index: int) -> threading.Thread:
        stream = MirrorStream(self.options.stream, self.options.selection, self.target_of,
                              self.progress, name=f"stream-{index}", note=self._note)
        # a daemon: a second Ctrl-C or SIGTERM ends the process even while a stream still
        # waits for a target that does not answer
        thread = threading.Thread(target=self._run_stream, args=(stream,),
                                  name=f"mirror-stream-{index}", daemon=True)
        thread.start()
        return thread

    def _run_stream(self, stream: MirrorStream) -> None:
        try:
            stream.run(self._stop.is_set)
        except BaseException as exc:  # reported by the supervisor, which stops the others
            self._errors.append(exc)
            self._stop.set()

    def _supervise(self, stopping: Callable[[], bool]) -> None:
        now = time.monotonic()
        interval = self.options.progress_interval
        next_line = now + interval if interval else float("inf")
        next_sync = now + self.options.sync_interval
        self.progress.line(now)  # the rates of the first line count from here
        while not stopping() and not self._stop.is_set():
            time.sleep(_TICK)  # a supervisor's pace, not a wait for anything
            now = time.monotonic()
            if now >= next_line:
                self._note(self.progress.line(now))
                next_line = now + interval
            if now >= next_sync:
                next_sync = now + self.options.sync_interval
                try:
                    with self._lock:
                        self._sync.sync()
                except OdradekError as exc:  # the streams go on; the next look may succeed
                    log.warning("mirror_sync_failed error=%s", exc)
