"""Kafka's own clients driven the same way: produce a list of messages, read a partition back.

Each client runs as its users run it: kcat and kafkajs as processes, confluent-kafka
(librdkafka), kafka-python and aiokafka (on an asyncio loop of its own) in this process.
``produce`` returns once every message is acknowledged (or raises naming the client); ``read``
returns the (key, value) pairs of one partition from an offset, the client's own consumer doing
the reading.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KAFKAJS = HERE / "kafkajs"
KAFKAJS_SCRIPT = KAFKAJS / "client.js"
#: every client and the codecs it offers a 0.11 broker (kafkajs ships gzip alone; its snappy
#: and lz4 are third-party plugins; zstd needs Produce v7, Kafka 2.1)
CODECS: dict[str, tuple[str, ...]] = {
    "kcat": ("none", "gzip", "snappy", "lz4"),
    "confluent-kafka": ("none", "gzip", "snappy", "lz4"),
    "kafka-python": ("none", "gzip", "snappy", "lz4"),
    "kafkajs": ("none", "gzip"),
    "aiokafka": ("none", "gzip", "snappy", "lz4"),
}
CLIENTS = tuple(CODECS)
Message = tuple[bytes | None, bytes]
TIMEOUT_S = 30.0


def available(client: str) -> str | None:
    """Why ``client`` cannot run here, or None."""
    if client == "kcat" and shutil.which("kcat") is None:
        return "kcat is not installed (scripts/check installs Debian's kcat)"
    if client == "kafkajs" and not (KAFKAJS / "node_modules" / "kafkajs").is_dir():
        return "kafkajs is not installed (scripts/check runs npm ci in tests/kafka_clients/kafkajs)"
    return None


class ClientFailed(AssertionError):
    pass


def produce(client: str, bootstrap: str, topic: str, messages: list[Message], *,
            codec: str = "none", acks: int = 1, partition: int = 0) -> None:
    if client == "kcat":
        _kcat_produce(bootstrap, topic, messages, codec, acks, partition)
    elif client == "confluent-kafka":
        _confluent_produce(bootstrap, topic, messages, codec, acks, partition)
    elif client == "kafka-python":
        _kafka_python_produce(bootstrap, topic, messages, codec, acks, partition)
    elif client == "aiokafka":
        asyncio.run(_aiokafka_produce(bootstrap, topic, messages, codec, acks, partition))
    else:
        _kafkajs("produce", bootstrap, {
            "topic": topic, "partition": partition, "acks": acks, "codec": codec,
            "messages": [[None if k is None else k.decode(), v.decode()] for k, v in messages],
        })


def read(client: str, bootstrap: str, topic: str, count: int, *, partition: int = 0,
         offset: int = 0) -> list[Message]:
    """``count`` messages of the partition from ``offset``, as that client's consumer gives
    them."""
    if client == "kcat":
        return _kcat_read(bootstrap, topic, count, partition, offset)
    if client == "confluent-kafka":
        return _confluent_read(bootstrap, topic, count, partition, offset)
    if client == "kafka-python":
        return _kafka_python_read(bootstrap, topic, count, partition, offset)
    if client == "aiokafka":
        return asyncio.run(_aiokafka_read(bootstrap, topic, count, partition, offset))
    out = _kafkajs("read", bootstrap, {"topic": topic, "partition": partition,
                                        "offset": offset, "count": count})
    return [(None if k is None else k.encode(), v.encode()) for k, v in out["messages"]]


def group_read(client: str, bootstrap: str, group: str, topic: str, count: int, *,
               commit: bool) -> list[int]:
    """As a member of ``group``, the offsets of the first ``count`` messages of the topic's
    partition 0 it is given -- from the group's committed offset -- and, if ``commit``, the
    offset after them committed."""
    if client == "kcat":
        return _kcat_group_read(bootstrap, group, topic, count, commit)
    if client == "confluent-kafka":
        return _confluent_group_read(bootstrap, group, topic, count, commit)
    if client == "kafka-python":
        return _kafka_python_group_read(bootstrap, group, topic, count, commit)
    if client == "aiokafka":
        return asyncio.run(_aiokafka_group_read(bootstrap, group, topic, count, commit))
    out = _kafkajs("group", bootstrap, {"topic": topic, "group": group, "count": count,
                                         "commit": commit})
    offsets: list[int] = out["offsets"]
    return offsets


# ------------------------------------------------------------------------------------- kcat

def _kcat_produce(bootstrap: str, topic: str, messages: list[Message], codec: str, acks: int,
                  partition: int) -> None:
    """kcat reads one message a line, ``key<TAB>value``; keyless lines are produced by a
    second run without -K (a line without the delimiter would be a key-less error)."""
    for keyed in (True, False):
        lines = [(k + b"\t" + v if keyed else v) for k, v in messages if (k is not None) == keyed]
        if not lines:
            continue
        args = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition),
                "-z", codec, "-X", f"acks={acks}", "-X", "api.version.request=true"]
        if keyed:
            args += ["-K", "\t"]
        run = subprocess.run(args, input=b"\n".join(lines) + b"\n", capture_output=True,
                             timeout=TIMEOUT_S)
        if run.returncode != 0 or b"ERROR" in run.stderr:
            raise ClientFailed(f"kcat -P failed ({run.returncode}): {run.stderr.decode()}")


def _kcat_read(bootstrap: str, topic: str, count: int, partition: int,
               offset: int) -> list[Message]:
    run = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", str(offset),
         "-c", str(count), "-e", "-J"], capture_output=True, timeout=TIMEOUT_S)
    if run.returncode != 0:
        raise ClientFailed(f"kcat -C failed ({run.returncode}): {run.stderr.decode()}")
    out = []
    for line in run.stdout.decode().splitlines():
        record = json.loads(line)
        key = record["key"]
        out.append((None if key is None else key.encode(), record["payload"].encode()))
    return out


def _kcat_group_read(bootstrap: str, group: str, topic: str, count: int,
                     commit: bool) -> list[int]:
    """kcat's balanced consumer stops after ``-c`` messages and, with auto commit on,
    commits the offset after the last one it handed out as it closes."""
    run = subprocess.run(
        ["kcat", "-b", bootstrap, "-G", group, "-c", str(count), "-f", "%o\\n",
         "-X", "auto.offset.reset=earliest", "-X", f"enable.auto.commit={str(commit).lower()}",
         topic], capture_output=True, timeout=TIMEOUT_S)
    if run.returncode != 0:
        raise ClientFailed(f"kcat -G failed ({run.returncode}): {run.stderr.decode()}")
    return [int(line) for line in run.stdout.decode().split()]


# ---------------------------------------------------------------------------- confluent-kafka

def _confluent_produce(bootstrap: str, topic: str, messages: list[Message], codec: str,
                       acks: int, partition: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "acks": acks, "linger.ms": 5, "enable.idempotence": False})
    errors: list[Any] = []
    for key, value in messages:
        producer.produce(topic, value=value, key=key, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    left = producer.flush(TIMEOUT_S)
    if left or errors:
        raise ClientFailed(f"confluent-kafka: {left} unsent, errors {errors[:3]}")


def _confluent_read(bootstrap: str, topic: str, count: int, partition: int,
                    offset: int) -> list[Message]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-clients-reader",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        out: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(out), timeout=1.0):
                if message.error():
                    raise ClientFailed(f"confluent-kafka consumer: {message.error()}")
                out.append((message.key(), message.value()))
        return out
    finally:
        consumer.close()


def _confluent_group_read(bootstrap: str, group: str, topic: str, count: int,
                          commit: bool) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        offsets: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(offsets) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                offsets.append(message.offset())
        if commit and offsets:
            consumer.commit(offsets=[TopicPartition(topic, 0, offsets[-1] + 1)],
                            asynchronous=False)
        return offsets
    finally:
        consumer.close()


# ----------------------------------------------------------------------------------- aiokafka

async def _aiokafka_produce(bootstrap: str, topic: str, messages: list[Message], codec: str,
                            acks: int, partition: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks if acks == 1 else "all",
                                compression_type=None if codec == "none" else codec,
                                linger_ms=5, request_timeout_ms=int(TIMEOUT_S * 1000))
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        futures = [await producer.send(topic, value=v, key=k, partition=partition)
                   for k, v in messages]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
    finally:
        await producer.stop()


async def _aiokafka_read(bootstrap: str, topic: str, count: int, partition: int,
                         offset: int) -> list[Message]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                out += [(r.key, r.value) for r in records]
        return out[:count]
    finally:
        await consumer.stop()


async def _aiokafka_group_read(bootstrap: str, group: str, topic: str, count: int,
                               commit: bool) -> list[int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        offsets: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(offsets) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=count - len(offsets))
            for records in batches.values():
                offsets += [r.offset for r in records]
        offsets = offsets[:count]
        if commit and offsets:
            await consumer.commit({TopicPartition(topic, 0): offsets[-1] + 1})
        return offsets
    finally:
        await consumer.stop()


# ------------------------------------------------------------------------------- kafka-python

def _kafka_python_produce(bootstrap: str, topic: str, messages: list[Message], codec: str,
                          acks: int, partition: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks if acks == 1 else "all",
                             compression_type=None if codec == "none" else codec,
                             linger_ms=5, enable_idempotence=False)
    try:
        futures = [producer.send(topic, value=v, key=k, partition=partition)
                   for k, v in messages]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)


def _kafka_python_read(bootstrap: str, topic: str, count: int, partition: int,
                       offset: int) -> list[Message]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                out += [(r.key, r.value) for r in records]
        return out[:count]
    finally:
        consumer.close()


def _kafka_python_group_read(bootstrap: str, group: str, topic: str, count: int,
                             commit: bool) -> list[int]:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        offsets: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(offsets) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=count - len(offsets)
                                         ).values():
                offsets += [r.offset for r in records]
        offsets = offsets[:count]
        if commit and offsets:
            consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offsets[-1] + 1, None,
                                                                          -1)})
        return offsets
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------ kafkajs

def _kafkajs(command: str, bootstrap: str, request: dict[str, Any]) -> dict[str, Any]:
    run = subprocess.run(["node", str(KAFKAJS_SCRIPT), command, bootstrap],
                         input=json.dumps(request).encode(), capture_output=True,
                         timeout=TIMEOUT_S * 2,
                         env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})
    if run.returncode != 0:
        raise ClientFailed(f"kafkajs {command} failed ({run.returncode}): "
                           f"{run.stderr.decode()[-2000:]}")
    answer: dict[str, Any] = json.loads(run.stdout.decode().splitlines()[-1])
    return answer
