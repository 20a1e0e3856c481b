"""A librdkafka (confluent-kafka) producer of uniquely numbered messages in its own process,
for the chaos campaign: ``python -m tests.chaos.kafka_producer --bootstrap B --topic T --name k0
--first N --out FILE``, talking to the brokers' Kafka listeners. The same contract as
tests/chaos/producer.py: acks=all, retries, one line per outcome appended to FILE (a delivery
report is the outcome), SIGTERM stops sending and waits for what is in flight. Idempotence is
off: the Kafka listener speaks message format v1."""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer


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
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "acks": "all", "enable.idempotence": False,
        "retries": 2_147_483_647, "retry.backoff.ms": 100, "request.timeout.ms": 5_000,
        "message.timeout.ms": 120_000, "linger.ms": 5, "client.id": args.name,
    })
    unsettled = 0
    with open(args.out, "a", encoding="utf-8") as out:

        def record(value: int, **outcome: object) -> None:
            line = {"t": time.monotonic(), "producer": args.name, "topic": args.topic,
                    "value": str(value), **outcome}
            out.write(json.dumps(line) + "\n")
            out.flush()

        def report(value: int, error: KafkaError | None, message: Message) -> None:
            nonlocal unsettled
            unsettled -= 1
            if error is None:
                record(value, partition=message.partition(), acked=True,
                       offset=message.offset(), error=None)
            else:
                record(value, partition=-1, acked=False, offset=None, error=str(error))

        value, interval = args.first, 1.0 / args.rate
        next_send = time.monotonic()
        while not stop:
            now = time.monotonic()
            if now < next_send or unsettled >= args.max_unsettled:
                producer.poll(min(max(next_send - now, 0.001), 0.05))
                continue
            try:
                producer.produce(args.topic, str(value).encode(),
                                 on_delivery=functools.partial(report, value))
                unsettled += 1
            except (BufferError, KafkaException) as exc:  # never sent
                record(value, partition=-1, acked=False, offset=None, error=repr(exc))
            value += 1
            next_send = max(next_send + interval, now - 1.0)  # no burst to catch up
            producer.poll(0)
        producer.flush(150)
    return 0


if __name__ == "__main__":
    sys.exit(main())
