"""A librdkafka (confluent-kafka) producer of uniquely numbered messages in its own process,
for the chaos campaign: ``python -m tests.chaos.kafka_producer --bootstrap B --topic T --name k0
--first N --out FILE``, talking to the brokers' Kafka listeners. acks=all with retries and
idempotence (the listeners speak Kafka 0.11's table: record batches, InitProducerId); a
delivery report is an outcome (tests/chaos/sending.py)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from tests.chaos.sending import Outcomes, main, paced


def produce(args: argparse.Namespace, outcomes: Outcomes, stopping: Callable[[], bool]) -> None:
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "acks": "all", "enable.idempotence": True,
        "retries": 2_147_483_647, "retry.backoff.ms": 100, "request.timeout.ms": 5_000,
        "message.timeout.ms": 120_000, "linger.ms": 5, "client.id": args.name,
    })

    def report(value: int, error: KafkaError | None, message: Message) -> None:
        partition, offset = message.partition(), message.offset()
        if error is None and partition is not None and offset is not None:
            outcomes.acked(value, partition, offset)
        else:
            outcomes.failed(value, str(error or "acknowledged without an offset"))

    def send(value: int) -> None:
        producer.produce(args.topic, str(value).encode(),
                         on_delivery=functools.partial(report, value))

    paced(args, outcomes, stopping, send, producer.poll, refused=(BufferError, KafkaException))
    producer.flush(150)


if __name__ == "__main__":
    sys.exit(main(__doc__, produce))
