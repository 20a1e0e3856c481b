"""Kafka's message format through a running broker: sets of both magics in every codec round
trip with consecutive offsets, Kafka's own sets are accepted, and the produce path refuses what
Kafka refuses."""

from __future__ import annotations

import gzip

import pytest

from protocol.compression import Codec
from protocol.errors import ErrorCode
from protocol.messageset import encode_message_set
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.kafka_format import GZIP, SNAPPY, fixtures, message, read_set

pytestmark = pytest.mark.integration


def fetch_all(client: RawClient, topic: str) -> bytes:
    result = client.fetch_partition(topic, 0, 0, max_bytes=1 << 22)
    assert result["error_code"] == 0, result
    return bytes(result["records"])


def test_every_codec_and_magic_round_trips(broker: BrokerProcess) -> None:
    sent = []
    with RawClient(broker.address) as client:
        client.create_topic("formats", 1)
        for magic in (0, 1):
            for codec in Codec:
                records = [(b"k%d" % i, b"%s-v%d-%d" % (codec.name.encode(), magic, i), 1_000 + i)
                           for i in range(4)]
                data = encode_message_set(records, codec=codec, magic=magic, base_offset=12_345)
                result = client.produce_set("formats", 0, data)
                assert result["error_code"] == 0, result
                assert result["base_offset"] == len(sent)
                sent += [(k, v) for k, v, _ in records]
        stored = fetch_all(client, "formats")
        consumed = client.fetch("formats")
    expected = [(i, k, v) for i, (k, v) in enumerate(sent)]
    assert [(m.offset, m.key, m.value) for m in read_set(stored)] == expected  # Kafka's rules
    assert [(m.offset, m.key, m.value) for m in consumed] == expected


def test_kafkas_own_sets_are_accepted(broker: BrokerProcess) -> None:
    expected = []
    with RawClient(broker.address) as client:
        client.create_topic("kafka", 1)
        for fixture in fixtures():
            result = client.produce_set("kafka", 0, fixture.data)
            assert result["error_code"] == 0, (fixture.name, result)
            assert result["base_offset"] == len(expected)
            expected += [(len(expected) + i, k, v) for i, (_, k, v) in enumerate(fixture.messages)]
        stored = fetch_all(client, "kafka")
    assert [(m.offset, m.key, m.value) for m in read_set(stored)] == expected


BAD_SETS = {
    "empty": (b"", ErrorCode.CORRUPT_MESSAGE, "the message set is empty"),
    "partial": (message(0, None, b"v")[:-1], ErrorCode.CORRUPT_MESSAGE, "incomplete entry"),
    "keyed-wrapper": (
        message(0, b"key", gzip.compress(message(0, None, b"v")), attributes=GZIP),
        ErrorCode.CORRUPT_MESSAGE,
        "compressed outer message should not have key",
    ),
    "v1-inner-offsets": (
        message(9, None, gzip.compress(message(8, None, b"a") + message(9, None, b"b")),
                attributes=GZIP),
        ErrorCode.CORRUPT_MESSAGE,
        "inner offsets of a magic 1 compressed wrapper must be 0..1",
    ),
    "log-append-time": (
        message(0, None, b"v", attributes=0x08),
        ErrorCode.INVALID_TIMESTAMP,
        "must not set the timestamp type LogAppendTime",
    ),
    "bad-snappy": (
        message(7, None, b"\x05abc", attributes=SNAPPY),
        ErrorCode.CORRUPT_MESSAGE,
        "cannot decompress snappy payload: UncompressError (offset 7 at byte position 0)",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SETS))
def test_the_produce_path_refuses_what_kafka_refuses(broker: BrokerProcess, case: str) -> None:
    data, code, reason = BAD_SETS[case]
    with RawClient(broker.address) as client:
        client.create_topic("strict", 1)
        result = client.produce_set("strict", 0, data)
        assert result["error_code"] == code, result
        assert result["error_message"].startswith("strict-0: ")  # names the partition
        assert reason in result["error_message"]
        assert fetch_all(client, "strict") == b""  # nothing written
