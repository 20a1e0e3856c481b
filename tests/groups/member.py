"""A group member in its own process, for integration tests: ``python -m tests.groups.member``.

It subscribes, polls, and prints one JSON object per line on stdout for everything a test checks:
``assigned`` / ``revoked`` (with generation, member id and what it owns after), ``records``
([partition key, offset, value] triples), ``committed``, ``commit_failed``, ``state`` changes.
SIGTERM closes it cleanly (commit, leave); SIGUSR1 makes it stop calling ``poll()`` for
``--pause-ms``, then commit -- a consumer that stalled past its session timeout. ``--out FILE``
appends every event to FILE too (flushed per line: what a killed member processed is there), and
``--process-ms`` spends that long on each batch before committing it, as a consumer with work to
do. ``--commit-each-generation`` (with ``--commit sync``) also commits once in each generation the
member is part of, with nothing new processed: a member whose partitions were consumed to their
end before they came to it shows all the same that its commits are accepted.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from typing import IO, Any

from client import (
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerState,
    TopicPartition,
)

OUT: IO[str] | None = None  # --out


def emit(**event: Any) -> None:
    line = json.dumps(event) + "\n"
    if OUT is not None:
        OUT.write(line)
        OUT.flush()
    sys.stdout.write(line)
    sys.stdout.flush()


def tp_key(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


class Reporter(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: Consumer | None = None

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        assert self.consumer is not None
        emit(event="revoked", generation=self.consumer.generation,
             partitions=sorted(map(tp_key, revoked)), owned=self._owned(), t=time.monotonic())

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        """``partitions``: everything it owns now (incremental rebalancing tells the listener
        of the new ones only: ``added``)."""
        assert self.consumer is not None
        emit(event="assigned", generation=self.consumer.generation,
             member=self.consumer.member_id, partitions=self._owned(),
             added=sorted(map(tp_key, assigned)), t=time.monotonic())

    def _owned(self) -> list[str]:
        assert self.consumer is not None
        return sorted(map(tp_key, self.consumer.assignment()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", nargs="*", default=[])
    parser.add_argument("--pattern")
    parser.add_argument("--commit", choices=["sync", "auto"], default="sync")
    parser.add_argument("--session-timeout-ms", type=int, default=3_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=300)
    parser.add_argument("--metadata-max-age-ms", type=int, default=300_000)
    parser.add_argument("--max-poll-records", type=int, default=200)
    parser.add_argument("--pause-ms", type=int, default=0)
    parser.add_argument("--rebalance-timeout-ms", type=int)
    parser.add_argument("--request-timeout-ms", type=int, default=30_000)
    parser.add_argument("--process-ms", type=int, default=0)
    parser.add_argument("--commit-each-generation", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--rebalance-protocol", default="incremental")
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--log", action="store_true",
                        help="the client's own log (state changes with reasons) on stderr")
    args = parser.parse_args()
    if args.log:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(created).3f %(name)s %(levelname)s %(message)s")
    global OUT
    if args.out:
        OUT = open(args.out, "a", encoding="utf-8")  # noqa: SIM115 -- open until the process ends

    stop = False
    pause = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    def on_usr1(signum: int, frame: object) -> None:
        nonlocal pause
        pause = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    reporter = Reporter()
    consumer = Consumer(
        args.bootstrap,
        group_id=args.group,
        client_id=f"member-{args.group}",
        auto_offset_reset="earliest",
        enable_auto_commit=args.commit == "auto",
        auto_commit_interval_ms=500,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        request_timeout_ms=args.request_timeout_ms,
        metadata_max_age_ms=args.metadata_max_age_ms,
        max_poll_records=args.max_poll_records,
        rebalance_protocol=args.rebalance_protocol,
        partition_assignment_strategy=args.strategy,
        fetch_max_wait_ms=100,
    )
    reporter.consumer = consumer
    if args.pattern:
        consumer.subscribe(pattern=args.pattern, listener=reporter)
    else:
        consumer.subscribe(args.topics, listener=reporter)
    emit(event="started")
    state = None
    # what commit() stores for the partitions of the batches not yet committed: past their
    # last record; a failed commit (the group rebalancing) is tried again once it is over
    pending: dict[str, int] = {}
    committed_in = None  # the generation of the last accepted commit
    try:
        while not stop:
            if pause:
                pause = False
                emit(event="paused")
                time.sleep(args.pause_ms / 1000)  # deliberately not polling: no heartbeats
                try:
                    consumer.commit()
                    emit(event="committed_after_pause")
                except CommitFailedError as exc:
                    emit(event="commit_failed", error=type(exc).__name__, message=str(exc))
            records = consumer.poll(timeout_ms=100)
            if consumer.state.value != state:
                state = consumer.state.value
                emit(event="state", state=state, generation=consumer.generation)
            if records:
                emit(event="records", generation=consumer.generation, t=time.monotonic(),
                     records=[[f"{r.topic}-{r.partition}", r.offset, (r.value or b"").decode()]
                              for r in records])
                if args.process_ms:
                    time.sleep(args.process_ms / 1000)  # the work done on the batch
                pending.update((f"{r.topic}-{r.partition}", r.offset + 1) for r in records)
            elif consumer.state is not ConsumerState.PART_OF_GROUP:
                continue  # a retry waits for the rebalance to end
            unconfirmed = (args.commit_each_generation and committed_in != consumer.generation
                           and consumer.state is ConsumerState.PART_OF_GROUP)
            if args.commit != "sync" or not (pending or unconfirmed):
                continue
            owned = {tp_key(tp) for tp in consumer.assignment()}
            offsets = {p: o for p, o in pending.items() if p in owned}
            sent, generation = time.monotonic(), consumer.generation
            try:
                consumer.commit()
                emit(event="committed", t=time.monotonic(), sent=sent, generation=generation,
                     offsets=offsets)
                pending = {}
                committed_in = generation
            except CommitFailedError as exc:
                emit(event="commit_failed", error=type(exc).__name__, message=str(exc))
                pending = offsets
    finally:
        consumer.close()
        emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
