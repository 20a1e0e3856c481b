"""A producer of uniquely numbered messages in its own process, for the chaos campaign:
``python -m tests.chaos.producer --bootstrap B --topic T --name p0 --first 0 --out FILE``.

The native Producer, acks=all, letting the producer choose each message's partition (so
partitions added during the run are written too); outcomes as tests/chaos/sending.py says.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from client import Producer
from client.batch import RecordFuture
from tests.chaos.sending import Outcomes, main, paced


def produce(args: argparse.Namespace, outcomes: Outcomes, stopping: Callable[[], bool]) -> None:
    producer = Producer(args.bootstrap, acks="all", retry_backoff_ms=100, linger_ms=5,
                        request_timeout_ms=5_000, delivery_timeout_ms=120_000,
                        max_block_ms=60_000, client_id=args.name)

    def settle(value: int, future: RecordFuture) -> None:
        error = future.exception()
        if error is None:
            outcomes.acked(value, future.value.partition, future.value.offset)
        else:
            outcomes.failed(value, f"{type(error).__name__}: {error}")

    def send(value: int) -> None:
        future = producer.send(args.topic, str(value).encode())
        future.add_done_callback(functools.partial(settle, value))

    try:  # a send without metadata within max_block_ms raises: never sent
        paced(args, outcomes, stopping, send, producer.poll, refused=(Exception,))
        producer.flush(150)
    finally:
        producer.close(30)


if __name__ == "__main__":
    sys.exit(main(__doc__, produce))
