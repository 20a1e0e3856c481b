"""Record batches (message format v2) through a real broker: the producer writes them with
headers and every codec, the consumer reads them back; a partition written by a producer of
each format reads back in order."""

from __future__ import annotations

import time

import pytest

from client import Consumer, ConsumerRecord, Producer, TopicPartition
from client import producer as producer_module
from tests.client.reading import read_records

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_with_headers_come_back_with_them(broker, codec: str) -> None:
    tp = TopicPartition(f"headers-{codec}", 0)
    sent = [(b"k%d" % i, b"v%d" % i, (("i", b"%d" % i), ("empty", b""), ("null", None)))
            for i in range(300)]
    with Producer(broker.bootstrap, compression=codec, linger_ms=20) as producer:
        futures = [producer.send(tp.topic, v, key=k, partition=0, headers=h) for k, v, h in sent]
        futures.append(producer.send(tp.topic, b"bare", partition=0))
        producer.flush(10)
    assert [f.result().offset for f in futures] == list(range(301))
    records = read_records(broker.bootstrap, tp, 301)
    assert [(r.key, r.value, r.headers) for r in records[:300]] == sent
    assert (records[300].value, records[300].headers) == (b"bare", ())


def test_a_partition_written_in_both_formats_reads_back_in_order(broker, monkeypatch) -> None:
    tp = TopicPartition("mixed", 0)
    expected: list[tuple[bytes, tuple]] = []
    for round_ in range(3):
        with monkeypatch.context() as m:
            m.setattr(producer_module, "PRODUCE_VERSIONS", (1, 1))  # a producer of format v1
            with Producer(broker.bootstrap, compression="gzip") as old:
                for i in range(5):
                    old.send(tp.topic, b"old-%d-%d" % (round_, i), partition=0)
                old.flush(10)
        expected += [(b"old-%d-%d" % (round_, i), ()) for i in range(5)]
        with Producer(broker.bootstrap, compression="lz4") as new:
            for i in range(5):
                new.send(tp.topic, b"new-%d-%d" % (round_, i), partition=0,
                         headers=[("round", b"%d" % round_)])
            new.flush(10)
        expected += [(b"new-%d-%d" % (round_, i), (("round", b"%d" % round_),))
                     for i in range(5)]
    records = read_records(broker.bootstrap, tp, 30)
    assert [r.offset for r in records] == list(range(30))
    assert [(r.value, r.headers) for r in records] == expected
    # from every offset, including those inside a batch or a wrapper
    for start in (3, 7, 12, 29):
        with Consumer(broker.bootstrap) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, start)
            got: list[ConsumerRecord] = []
            deadline = time.monotonic() + 20
            while len(got) < 30 - start:
                assert time.monotonic() < deadline
                got += consumer.poll(timeout_ms=200)
        assert [(r.value, r.headers) for r in got] == expected[start:]
