"""A producer of uniquely numbered messages in its own process, for the chaos campaign:
``python -m tests.chaos.producer --bootstrap B --topic T --name p0 --first 0 --out FILE``.

It sends ``first``, ``first + 1``, ... as text at ``--rate`` messages a second with acks=all,
letting the producer choose each message's partition (so partitions added during the run are
written too), and appends one line per outcome to FILE, flushed at once: the value, and the
partition and offset the cluster acknowledged or the error. A message whose line is missing was
in flight when the process was killed: its outcome is unknown, and the checker never counts it
as acknowledged. SIGTERM stops sending, waits for what is in flight, and exits.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import IO

from client import Producer
from client.batch import RecordFuture


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--first", type=int, required=True, help="the first value sent")
    parser.add_argument("--rate", type=float, default=100.0, help="messages a second")
    parser.add_argument("--max-unsettled", type=int, default=500)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    with open(args.out, "a", encoding="utf-8") as out:
        return _produce(args, out, lambda: stop)


def _produce(args: argparse.Namespace, out: IO[str], stopping: Callable[[], bool]) -> int:
    producer = Producer(args.bootstrap, acks="all", retry_backoff_ms=100, linger_ms=5,
                        request_timeout_ms=5_000, delivery_timeout_ms=120_000,
                        max_block_ms=60_000, client_id=args.name)
    unsettled = 0

    def record(value: int, **outcome: object) -> None:
        line = {"t": time.monotonic(), "producer": args.name, "topic": args.topic,
                "value": str(value), **outcome}
        out.write(json.dumps(line) + "\n")
        out.flush()

    def failed(value: int, error: BaseException) -> None:
        record(value, partition=-1, acked=False, offset=None,
               error=f"{type(error).__name__}: {error}")

    def settle(value: int, future: RecordFuture) -> None:
        nonlocal unsettled
        unsettled -= 1
        error = future.exception()
        if error is None:
            record(value, partition=future.value.partition, acked=True,
                   offset=future.value.offset, error=None)
        else:
            failed(value, error)

    value, interval = args.first, 1.0 / args.rate
    next_send = time.monotonic()
    try:
        while not stopping():
            now = time.monotonic()
            if now < next_send or unsettled >= args.max_unsettled:
                producer.poll(min(max(next_send - now, 0.001), 0.05))
                continue
            try:
                future = producer.send(args.topic, str(value).encode())
            except Exception as exc:  # no metadata within max_block_ms: never sent
                failed(value, exc)
            else:
                unsettled += 1
                future.add_done_callback(functools.partial(settle, value))
            value += 1
            next_send = max(next_send + interval, now - 1.0)  # no burst to catch up
            producer.poll(0)
        producer.flush(150)
    finally:
        producer.close(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
