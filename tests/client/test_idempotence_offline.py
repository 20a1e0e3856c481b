"""The idempotent producer's numbering, without a broker: batches are numbered once, in queue
order, per partition; a retried batch keeps its numbers and goes alone; a refused-as-too-large
run gives its numbers back; a reset starts a new producer id from 0; and the settings that
cannot be idempotent are refused as Kafka's producer refuses them."""

from __future__ import annotations

import pytest

from client.batch import ProducerBatch
from client.errors import ConfigError
from client.idempotence import Idempotence
from client.producer import Producer
from client.producer_ids import ProducerIdAndEpoch
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.compression import BatchCodec
from protocol.errors import UnsupportedVersionError
from protocol.record_batch import NO_SEQUENCE, decode_batches
from tests.client.fake_broker import FakeBroker

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


def batch(tp: TopicPartition, count: int) -> ProducerBatch:
    b = ProducerBatch(tp, 0.0, lambda _timeout: None)
    b.records = [(None, b"v%d" % i, 1) for i in range(count)]
    return b


def identified(producer_id: int = 7) -> Idempotence:
    numbering = Idempotence()
    numbering.identity = ProducerIdAndEpoch(producer_id, 0)
    return numbering


def test_batches_are_numbered_in_order_per_partition_and_keep_their_numbers() -> None:
    numbering = identified()
    first, second, other = batch(TP, 3), batch(TP, 2), batch(OTHER, 4)
    assert numbering.number([first, second]) == [first, second]
    assert numbering.number([other]) == [other]
    assert [(b.producer_id, b.base_sequence) for b in (first, second, other)] == [
        (7, 0), (7, 3), (7, 0)]
    (stored,) = decode_batches(second.encode(BatchCodec.NONE, 2))
    assert (stored.header.producer_id, stored.header.base_sequence) == (7, 3)
    second.attempts = 1  # a retry: same numbers, same bytes, and alone
    third = batch(TP, 1)
    assert numbering.number([second, third]) == [second]
    assert second.base_sequence == 3 and third.base_sequence == 5


def test_a_run_refused_as_too_large_gives_its_numbers_back() -> None:
    numbering = identified()
    numbering.number([batch(TP, 2)])
    refused = [batch(TP, 4), batch(TP, 4)]
    numbering.number(refused)
    assert [b.base_sequence for b in refused] == [2, 6]
    numbering.rewind(refused)
    assert [b.base_sequence for b in refused] == [NO_SEQUENCE, NO_SEQUENCE]
    halves = [batch(TP, 2), batch(TP, 2)]
    numbering.number(halves)
    assert [b.base_sequence for b in halves] == [2, 4]


def test_a_reset_numbers_from_zero_under_a_new_id_and_sends_older_numbers_apart() -> None:
    numbering = identified(7)
    old = batch(TP, 3)
    numbering.number([old])
    numbering.reset()
    assert numbering.identity is None
    numbering.identity = ProducerIdAndEpoch(8, 0)
    new = batch(TP, 1)
    assert numbering.number([old, new]) == [old]  # numbered under 7: on its own
    assert (new.producer_id, new.base_sequence) == (8, 0)


@pytest.mark.parametrize(("settings", "idempotent"), [
    ({"acks": "all"}, True),
    ({"acks": 1}, False),
    ({"acks": "all", "max_in_flight_requests_per_connection": 6}, False),
    ({"acks": "all", "enable_idempotence": False}, False),
])
def test_idempotence_is_on_by_default_with_acks_all(settings: dict, idempotent: bool) -> None:
    producer = Producer("127.0.0.1:1", **settings)
    try:
        assert (producer._idempotence is not None) is idempotent
    finally:
        producer.close(0)


@pytest.mark.parametrize(("settings", "named"), [
    ({"acks": 1}, "acks=1"),
    ({"acks": "all", "retries": 0}, "retries=0"),
    ({"acks": "all", "max_in_flight_requests_per_connection": 6},
     "max_in_flight_requests_per_connection=6"),
])
def test_settings_that_cannot_be_idempotent_are_refused(settings: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=f"enable_idempotence=True with {named}"):
        Producer("127.0.0.1:1", enable_idempotence=True, **settings)


def test_a_leader_without_record_batches_gives_up_default_idempotence_only(
    fake: FakeBroker,
) -> None:
    """A broker of message format v1 (Produce v0-v1): the default producer writes to it
    without idempotence, as Kafka's gives it up for a broker that lacks it; one that asked for
    idempotence fails its sends with the reason."""
    with Producer(fake.bootstrap, acks="all") as producer:
        assert producer.send("t", b"default").result(5).offset == 0
    assert not any(r.header.api_key == ApiKey.INIT_PRODUCER_ID for r in fake.requests)
    with (Producer(fake.bootstrap, acks="all", enable_idempotence=True) as producer,
          pytest.raises(UnsupportedVersionError, match="needs record batches")):
        producer.send("t", b"explicit").result(5)


def test_a_leader_with_record_batches_gets_numbered_batches(fake: FakeBroker) -> None:
    fake.api_versions[ApiKey.PRODUCE] = (0, 2)
    with Producer(fake.bootstrap, acks="all", linger_ms=5) as producer:
        for i in range(10):
            producer.send("t", b"v%d" % i)
        producer.flush(5)
    stored = list(decode_batches(fake.messages("t", 0)))
    assert {b.header.producer_id for b in stored} == {0}
    sequences = [(b.header.base_sequence, b.header.record_count) for b in stored]
    assert [s for s, _ in sequences] == [sum(n for _, n in sequences[:i])
                                         for i in range(len(sequences))]
    assert sum(n for _, n in sequences) == 10
