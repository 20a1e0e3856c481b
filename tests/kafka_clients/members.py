"""A consumer-group member of one of Kafka's clients, as a process a test can SIGKILL:

    python -m tests.kafka_clients.members CLIENT BOOTSTRAP GROUP TOPIC

It prints one JSON line ``{"p": partition, "o": offset, "v": value}`` for each message once it
is processed and its offset committed (kcat: once printed; librdkafka commits it within
100 ms), and runs until it is killed or sent SIGTERM (it then leaves the group).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType

KAFKAJS_SCRIPT = Path(__file__).resolve().parent / "kafkajs" / "client.js"
SESSION_TIMEOUT_MS = 6000
_stopping = False


def _stop(signum: int, frame: FrameType | None) -> None:
    global _stopping
    _stopping = True


def _emit(partition: int, offset: int, value: bytes) -> None:
    print(json.dumps({"p": partition, "o": offset, "v": value.decode()}), flush=True)


def confluent_member(bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": SESSION_TIMEOUT_MS,
                         "heartbeat.interval.ms": 500})
    consumer.subscribe([topic])
    while not _stopping:
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        consumer.commit(message=message, asynchronous=False)
        _emit(message.partition(), message.offset(), message.value())
    consumer.close()


def kafka_python_member(bootstrap: str, group: str, topic: str) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=500)
    while not _stopping:
        for tp, records in consumer.poll(timeout_ms=200).items():
            for record in records:
                consumer.commit({tp: OffsetAndMetadata(record.offset + 1, None, -1)})
                _emit(tp.partition, record.offset, record.value)
    consumer.close()


def kcat_member(bootstrap: str, group: str, topic: str) -> None:
    """kcat runs in this process's place (a SIGKILL reaches it) and prints the JSON lines
    itself; librdkafka commits what it handed out every 100 ms."""
    os.execvp("kcat", [
        "kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
        "-X", "auto.commit.interval.ms=100", "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}",
        "-X", "heartbeat.interval.ms=500", "-u", "-f", '{"p": %p, "o": %o, "v": "%s"}\\n', topic])


def kafkajs_member(bootstrap: str, group: str, topic: str) -> None:
    """node runs in this process's place, so a SIGKILL reaches the member itself."""
    read, write = os.pipe()
    os.write(write, json.dumps({"topic": topic, "group": group}).encode())
    os.close(write)
    os.dup2(read, 0)
    os.environ["KAFKAJS_NO_PARTITIONER_WARNING"] = "1"
    os.execvp("node", ["node", str(KAFKAJS_SCRIPT), "member", bootstrap])


def aiokafka_member(bootstrap: str, group: str, topic: str) -> None:
    asyncio.run(_aiokafka_member(bootstrap, group, topic))


async def _aiokafka_member(bootstrap: str, group: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=SESSION_TIMEOUT_MS,
                                heartbeat_interval_ms=500)
    await consumer.start()
    try:
        while not _stopping:
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                for record in records:
                    await consumer.commit({tp: record.offset + 1})
                    _emit(tp.partition, record.offset, record.value)
    finally:
        await consumer.stop()


MEMBERS = {"confluent-kafka": confluent_member, "kafka-python": kafka_python_member,
           "kcat": kcat_member, "kafkajs": kafkajs_member, "aiokafka": aiokafka_member}

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    client, bootstrap, group, topic = sys.argv[1:5]
    MEMBERS[client](bootstrap, group, topic)
