"""A partition holding every magic in turn, written through native Produce (v2 for record
batches), and what a reader of it must see: shared by the down-conversion tests of both
listeners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from protocol.apis import ApiKey
from protocol.compression import BatchCodec, Codec
from protocol.messageset import encode_message_set
from protocol.record_batch import encode_batch
from tests.broker.raw import RawClient

#: the native Produce version that may carry a record batch
PRODUCE_BATCHES_VERSION = 2
BASE_TIME = 1_700_000_000_000
Row = tuple[bytes, bytes, int]


class Expected(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def produce_records(client: RawClient, topic: str, records: bytes) -> dict[str, Any]:
    """One partition's result for a message set or a record batch, by native Produce v2."""
    response = client.request(ApiKey.PRODUCE, {
        "acks": 1, "timeout_ms": 10_000,
        "topics": [{"name": topic, "partitions": [{"partition": 0, "records": records}]}],
    }, version=PRODUCE_BATCHES_VERSION)
    ((partition,),) = [t["partitions"] for t in response["topics"]]
    return dict(partition)


def write_mixed(client: RawClient, topic: str) -> list[Expected]:
    """v1 sets and v2 batches, plain and compressed, with headers on the batches; every
    record as a v0/v1 reader should read it."""
    return write_mixed_sizes(client, topic)[0]


def write_mixed_sizes(client: RawClient, topic: str) -> tuple[list[Expected], dict[int, int]]:
    """``write_mixed``, and the largest entry written of each magic."""
    expected: list[Expected] = []
    largest = {1: 0, 2: 0}

    def rows(tag: str, count: int) -> list[Row]:
        start = len(expected)
        return [(b"k%d" % (start + i), b"%s-%d" % (tag.encode(), start + i),
                 BASE_TIME + start + i) for i in range(count)]

    pieces: list[tuple[int, str, int, Callable[[list[Row]], bytes]]] = [
        (1, "v1", 1, lambda r: encode_message_set(r, base_offset=0)),
        (1, "v1", 2, lambda r: encode_message_set(r, base_offset=0)),
        (2, "v2", 4, lambda r: encode_batch([(k, v, t, [("h", b"x")]) for k, v, t in r])),
        (1, "v1-gzip", 2, lambda r: encode_message_set(r, codec=Codec.GZIP)),
        (2, "v2-gzip", 3, lambda r: encode_batch(r, codec=BatchCodec.GZIP)),
        (2, "v2-lz4", 5, lambda r: encode_batch(r, codec=BatchCodec.LZ4)),
        (1, "v1-last", 1, lambda r: encode_message_set(r)),
    ]
    for magic, tag, count, build in pieces:
        records = rows(tag, count)
        data = build(records)
        largest[magic] = max(largest[magic], len(data))
        result = produce_records(client, topic, data)
        assert result["error_code"] == 0, (tag, result)
        assert result["base_offset"] == len(expected), (tag, result)
        expected += [Expected(len(expected) + i, k, v, t) for i, (k, v, t) in enumerate(records)]
    return expected, largest
