"""Native Fetch below v4 never carries record batches: a range of mixed magics reads as magic 1
at every fetch offset, while Fetch v4 and followers read the stored bytes; a zstd batch is
refused to the old reader with UNSUPPORTED_COMPRESSION_TYPE."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.compression import BatchCodec
from protocol.errors import ErrorCode
from protocol.record_batch import encode_batch
from tests.broker.raw import RawClient, fetch_body
from tests.broker_process import BrokerProcess
from tests.kafka_format import read_set
from tests.mixed_magics import (
    BASE_TIME,
    Expected,
    produce_records,
    write_mixed,
    write_mixed_sizes,
)

pytestmark = pytest.mark.integration


def fetch(client: RawClient, topic: str, offset: int, version: int, *,
          max_bytes: int = 1 << 20, replica_id: int = -1) -> dict[str, Any]:
    body = fetch_body(topic, 0, offset, max_bytes, 0, 0)
    body["replica_id"] = replica_id
    if version >= 3:
        body["topics"][0]["partitions"][0]["log_start_offset"] = -1
    ((partition,),) = [t["partitions"] for t in client.request(
        ApiKey.FETCH, body, version=version)["topics"]]
    return dict(partition)


def stored(broker: BrokerProcess, topic: str) -> bytes:
    return (broker.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()


def whole_entries(records: bytes) -> bytes:
    """``records`` without a partial trailing entry, which readers drop (and fetch again)."""
    pos = 0
    while pos + 12 <= len(records):
        end = pos + 12 + int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
        if end > len(records):
            break
        pos = end
    return records[:pos]


def read_old(records: bytes, offset: int) -> list[Expected]:
    """What a v1 reader takes from a fetch at ``offset``: magic 1 only, whole entries."""
    messages = read_set(whole_entries(records))
    assert {m.magic for m in messages} <= {1}, "a v1 reader got another magic"
    return [Expected(m.offset, m.key, m.value, -1) for m in messages if m.offset >= offset]


@pytest.mark.parametrize("version", [2, 3])
def test_old_readers_read_every_magic_as_v1_from_every_offset(
        broker: BrokerProcess, version: int) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("mixed", 1)
        expected = write_mixed(client, "mixed")
        for offset in range(len(expected)):
            result = fetch(client, "mixed", offset, version)
            assert result["error_code"] == 0, (offset, result)
            got = read_old(bytes(result["records"]), offset)
            assert got == [e._replace(timestamp=-1) for e in expected[offset:]], offset
        # the timestamps of converted records are the batches'
        decoded = client.fetch("mixed")
        assert [(m.offset, m.timestamp) for m in decoded] == [
            (e.offset, e.timestamp) for e in expected]


def test_small_fetches_page_through_batches(broker: BrokerProcess) -> None:
    """A max_bytes below one batch still gets that batch whole, converted (KIP-74), and a
    reader paging with small fetches reads every record once. (v1 entries are sent as stored:
    one larger than max_bytes would arrive partial, as ever, so they all fit here.)"""
    with RawClient(broker.address) as client:
        client.create_topic("paged", 1)
        expected, largest = write_mixed_sizes(client, "paged")
        assert largest[1] < largest[2]
        offset, got = 0, []
        while offset < len(expected):
            result = fetch(client, "paged", offset, 3, max_bytes=largest[1])
            assert result["error_code"] == 0, result
            page = read_old(bytes(result["records"]), offset)
            assert page, offset
            got += page
            offset = page[-1].offset + 1
    assert got == [e._replace(timestamp=-1) for e in expected]


def test_v4_readers_and_followers_get_the_stored_bytes(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("asis", 1)
        write_mixed(client, "asis")
        v4 = fetch(client, "asis", 0, 4)
        follower = fetch(client, "asis", 0, 3, replica_id=0)
    assert v4["error_code"] == 0, v4
    assert bytes(v4["records"]) == stored(broker, "asis")
    # a single broker is no follower's leader: the replica fetch is refused or as stored
    assert follower["error_code"] != 0 or bytes(follower["records"]) == stored(broker, "asis")


def test_a_zstd_batch_is_refused_to_old_readers(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("zstd", 1)
        result = produce_records(client, "zstd", encode_batch(
            [(b"k", b"v", BASE_TIME)], codec=BatchCodec.LZ4))
        assert result["error_code"] == 0, result
        result = produce_records(client, "zstd", encode_batch(
            [(b"k", b"z", BASE_TIME)], codec=BatchCodec.ZSTD))
        assert result["error_code"] == 0, result
        first = fetch(client, "zstd", 0, 3)
        refused = fetch(client, "zstd", 1, 3)
        v4 = fetch(client, "zstd", 1, 4)
    # what comes before the zstd batch is sent; the fetch that starts at it is refused
    assert first["error_code"] == 0
    assert [m.value for m in read_set(bytes(first["records"]))] == [b"v"]
    assert refused["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert v4["error_code"] == 0 and v4["records"]


def test_conversion_after_a_restart(broker: BrokerProcess) -> None:
    """A segment opened at start-up is not known to hold batches or not: its ranges are
    looked at, and converted all the same."""
    with RawClient(broker.address) as client:
        client.create_topic("restarted", 1, segment_bytes="200")
        expected = write_mixed(client, "restarted")
    broker.restart()
    with RawClient(broker.address) as client:
        for start in range(len(expected)):
            offset, got = start, []
            while offset < len(expected):  # a read ends at its segment's end
                result = fetch(client, "restarted", offset, 3)
                assert result["error_code"] == 0, (offset, result)
                page = read_old(bytes(result["records"]), offset)
                assert page, offset
                got += page
                offset = page[-1].offset + 1
            assert got == [e._replace(timestamp=-1) for e in expected[start:]], start
