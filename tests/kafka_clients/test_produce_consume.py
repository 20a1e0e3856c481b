"""Each of Kafka's clients produces to odradek's Kafka listener with every codec it offers on
message format v1, acks 1 and all, keyed and keyless, and odradek's own Consumer reads exactly
those bytes back; and the other way: what odradek's Producer wrote, each client reads."""

from __future__ import annotations

import pytest

from tests.broker_process import BrokerProcess
from tests.kafka_clients.clients import CODECS, produce, read
from tests.kafka_clients.conftest import native_produce, native_read, unique_topic


def _messages(tag: str) -> list[tuple[bytes | None, bytes]]:
    """Keyed and keyless, in one order; text, since kcat reads lines."""
    return [(None if i % 3 == 0 else f"key-{i}".encode(), f"{tag}-value-{i}-{'x' * i}".encode())
            for i in range(40)]


@pytest.mark.parametrize("acks", [1, -1])
def test_client_produces_every_codec_and_native_reads_it_byte_for_byte(
        kafka_broker: BrokerProcess, kafka_client: str, acks: int) -> None:
    for codec in CODECS[kafka_client]:
        topic = unique_topic(f"in-{kafka_client}-{codec}")
        messages = _messages(f"{kafka_client}-{codec}-{acks}")
        produce(kafka_client, kafka_broker.kafka_bootstrap, topic, messages, codec=codec,
                acks=acks)
        got = native_read(kafka_broker.bootstrap, topic, len(messages))
        if kafka_client == "kcat":  # kcat sends its keyed lines first, then the keyless ones
            messages = [m for m in messages if m[0] is not None] + [
                m for m in messages if m[0] is None]
        assert got == messages, f"{kafka_client} with {codec}, acks={acks}"


def test_native_producer_is_read_by_the_client(
        kafka_broker: BrokerProcess, kafka_client: str) -> None:
    topic = unique_topic(f"out-{kafka_client}")
    messages = _messages("native")
    native_produce(kafka_broker.bootstrap, topic, messages)
    assert read(kafka_client, kafka_broker.kafka_bootstrap, topic, len(messages)) == messages


def test_client_reads_from_an_offset_inside_a_compressed_batch(
        kafka_broker: BrokerProcess, kafka_client: str) -> None:
    """A fetch from inside a compressed wrapper gets the whole wrapper, as from Kafka: the
    client skips the messages before its offset."""
    topic = unique_topic(f"mid-{kafka_client}")
    messages = _messages("mid")
    produce("confluent-kafka", kafka_broker.kafka_bootstrap, topic, messages, codec="gzip")
    got = read(kafka_client, kafka_broker.kafka_bootstrap, topic, 10, offset=25)
    assert got == messages[25:35]
