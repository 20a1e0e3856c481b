"""Option parsing: Spark's Kafka-source names and defaults, and errors that name the option."""

from __future__ import annotations

import re

import pytest

from client import TopicPartition
from pipeline.options import (
    Assign,
    OptionError,
    Subscribe,
    SubscribePattern,
    parse_read_options,
    parse_write_options,
)
from protocol.compression import BatchCodec, Codec

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:9092"}


def read(streaming: bool = False, **options: str):  # type: ignore[no-untyped-def]
    return parse_read_options({**BOOTSTRAP, **options}, streaming=streaming)


def fails(option: str, *, streaming: bool = False, write: bool = False, **options: str) -> str:
    """Parse, expect an OptionError naming ``option``; return its message."""
    with pytest.raises(OptionError) as caught:
        if write:
            parse_write_options({**BOOTSTRAP, **options})
        else:
            parse_read_options({**BOOTSTRAP, **options}, streaming=streaming)
    assert caught.value.option == option
    assert str(caught.value).startswith(f"option '{option}': ")
    return str(caught.value)


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = read(subscribe="a")
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.fail_on_data_loss is True
    assert batch.min_partitions is None
    assert read(streaming=True, subscribe="a").starting == "latest"


def test_keys_arrive_lower_cased_from_spark() -> None:
    options = parse_read_options(
        {"kafka.bootstrap.servers": "h:1", "subscribepattern": "x.*", "startingoffsets": "latest",
         "maxoffsetspertrigger": "7", "groupid": "g", "failondataloss": "FALSE"},
        streaming=True,
    )
    assert options.bootstrap == "h:1"
    assert isinstance(options.subscription, SubscribePattern)
    assert options.starting == "latest"
    assert options.max_offsets_per_trigger == 7
    assert options.group_id == "g"
    assert options.fail_on_data_loss is False


def test_subscriptions() -> None:
    assert read(subscribe=" a, b ,a,").subscription == Subscribe(("a", "b"))
    pattern = read(subscribePattern="logs-.*").subscription
    assert isinstance(pattern, SubscribePattern)
    assert pattern.matches("logs-1") and not pattern.matches("old-logs-1")
    assert read(assign='{"a": [1, 0], "b": [2]}').subscription == Assign(
        (TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 2))
    )


def test_exactly_one_subscription() -> None:
    assert "assign and subscribe were both given" in fails(
        "subscribe", subscribe="a", assign='{"a": [0]}'
    )
    assert "none was given" in fails("subscribe")
    fails("subscribe", subscribe=" , ")
    fails("subscribePattern", subscribePattern="(")
    fails("assign", assign="{")
    fails("assign", assign='{"a": []}')
    fails("assign", assign='{"a": [-1]}')
    fails("assign", assign="[]")


def test_offsets_json() -> None:
    options = read(
        subscribe="a",
        startingOffsets='{"a": {"0": 5, "1": -2}}',
        endingOffsets='{"a": {"0": 9, "1": -1}}',
    )
    assert options.starting == {TopicPartition("a", 0): 5, TopicPartition("a", 1): -2}
    assert options.ending == {TopicPartition("a", 0): 9, TopicPartition("a", 1): -1}
    assert "malformed JSON" in fails("startingOffsets", subscribe="a", startingOffsets='{"a":')
    fails("endingOffsets", subscribe="a", endingOffsets='{"a": {"x": 1}}')
    fails("startingOffsets", subscribe="a", startingOffsets='{"a": {"0": -3}}')
    fails("startingOffsets", subscribe="a", startingOffsets="{}")
    fails("startingOffsets", subscribe="a", startingOffsets="newest")


def test_a_batch_query_needs_a_known_start_and_end() -> None:
    fails("startingOffsets", subscribe="a", startingOffsets="latest")
    fails("startingOffsets", subscribe="a", startingOffsets='{"a": {"0": -1}}')
    fails("endingOffsets", subscribe="a", endingOffsets="earliest")
    fails("endingOffsets", subscribe="a", endingOffsets='{"a": {"0": -2}}')


def test_unknown_and_misplaced_options() -> None:
    assert "unknown option" in fails("subscibe", subscibe="a")
    fails("endingOffsets", streaming=True, subscribe="a", endingOffsets="latest")
    fails("maxOffsetsPerTrigger", subscribe="a", maxOffsetsPerTrigger="10")
    fails("groupId", subscribe="a", groupId="g")
    fails("subscribe", write=True, subscribe="a")
    fails("topic", subscribe="a", topic="t")


def test_numbers_and_flags() -> None:
    assert read(subscribe="a", minPartitions="8").min_partitions == 8
    fails("minPartitions", subscribe="a", minPartitions="0")
    fails("minPartitions", subscribe="a", minPartitions="many")
    fails("maxOffsetsPerTrigger", streaming=True, subscribe="a", maxOffsetsPerTrigger="-5")
    fails("failOnDataLoss", subscribe="a", failOnDataLoss="maybe")
    fails("kafkaConsumer.pollTimeoutMs", subscribe="a", **{"kafkaConsumer.pollTimeoutMs": "0"})
    fails("groupId", streaming=True, subscribe="a", groupId=" ")


def test_bootstrap() -> None:
    with pytest.raises(OptionError, match=re.escape("option 'bootstrap.servers': is required")):
        parse_read_options({"subscribe": "a"}, streaming=False)
    fails("kafka.bootstrap.servers", subscribe="a", **{"kafka.bootstrap.servers": "h:2"})
    with pytest.raises(OptionError, match=re.escape("option 'bootstrap.servers'")):
        parse_read_options({"bootstrap.servers": "nohostport", "subscribe": "a"}, streaming=False)


def test_write_options() -> None:
    options = parse_write_options(
        {**BOOTSTRAP, "topic": "out", "kafka.acks": "1", "kafka.compression.type": "lz4",
         "kafka.linger.ms": "5", "kafka.batch.size": "1024", "checkpointLocation": "/ckpt"}
    )
    assert (options.topic, options.acks, options.compression) == ("out", 1, Codec.LZ4)
    assert (options.linger_ms, options.batch_bytes) == (5, 1024)
    defaults = parse_write_options(BOOTSTRAP)
    assert (defaults.topic, defaults.acks, defaults.compression) == (None, -1, Codec.NONE)
    fails("kafka.acks", write=True, **{"kafka.acks": "2"})
    zstd = parse_write_options({**BOOTSTRAP, "kafka.compression.type": "zstd"})
    assert zstd.compression == BatchCodec.ZSTD  # record batches carry it (Produce v2)
    fails("kafka.compression.type", write=True, **{"kafka.compression.type": "brotli"})
    fails("topic", write=True, topic="")


def test_security_options_take_kafkas_prefixed_names() -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="s3cret-Zq9";')
    options = read(subscribe="a", **{
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas, "kafka.ssl.truststore.location": "/etc/ca.pem"})
    security = options.security
    assert (security.security_protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (security.sasl_plain_username, security.sasl_plain_password) == ("alice", "s3cret-Zq9")
    assert security.ssl_cafile == "/etc/ca.pem"
    assert "s3cret-Zq9" not in repr(options)
    written = parse_write_options({**BOOTSTRAP, "kafka.security.protocol": "SSL"})
    assert written.security.security_protocol == "SSL"
    assert read(subscribe="a").security.security_protocol == "PLAINTEXT"


def test_a_bad_security_option_is_named() -> None:
    message = fails("kafka.security.protocol", subscribe="a",
                    **{"kafka.security.protocol": "SASL_SSL"})
    assert "sasl_plain_username" in message
