"""Quotas enforced by a real broker: a producer over its byte rate is slowed to its quota by
delayed responses that carry throttle_time_ms -- and never disconnected."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from client.admin import Admin
from client.consumer import Consumer
from client.producer import Producer
from client.records import TopicPartition
from protocol.apis import ApiKey
from protocol.messageset import Record, encode_message_set
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

QUOTA = 300_000  # bytes/s
VALUE = b"x" * 1_000
MEASURED_S = 10.0


def produce_body(topic: str, records: bytes) -> dict[str, Any]:
    return {"acks": 1, "timeout_ms": 5_000,
            "topics": [{"name": topic, "partitions": [{"partition": 0, "records": records}]}]}


def test_a_producer_over_its_quota_is_held_to_it(broker: BrokerProcess) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("fast")
        admin.alter_client_quotas({"client-id": "greedy"}, {"producer_byte_rate": QUOTA})
        assert [(q.entity, q.values) for q in admin.describe_client_quotas()] == [
            ({"client-id": "greedy"}, {"producer_byte_rate": QUOTA})]
    size = len(encode_message_set([Record(None, VALUE, int(time.time() * 1000))]))
    acked: list[float] = []
    with Producer(broker.bootstrap, client_id="greedy", buffer_bytes=256 * 1024,
                  max_request_bytes=64 * 1024) as producer:
        stats = producer.throttle_stats
        start: float | None = None
        deadline = time.monotonic() + 60  # bounded whatever happens
        while time.monotonic() < deadline:
            if start is None and stats.throttled:
                # a second after the first held-back response: the first burst paid back
                start = time.monotonic() + 1
            if start is not None and time.monotonic() > start + MEASURED_S:
                break
            producer.send("fast", VALUE).add_done_callback(
                lambda f: acked.append(time.monotonic()))
        assert start is not None, "never throttled"
        assert stats.max_ms > 0 and stats.throttled >= 2
    in_window = [t for t in acked if start <= t < start + MEASURED_S]
    rate = len(in_window) * size / MEASURED_S
    print(f"produce rate over {MEASURED_S:g} s: {rate:.0f} B/s, quota {QUOTA} B/s, "
          f"{stats.throttled} responses held back, longest {stats.max_ms} ms")
    # slowed, not stopped: sends kept being acknowledged
    assert in_window, "nothing acknowledged while throttled"
    # held to the quota: at most a little over it (a busy machine only makes the rate lower,
    # so there is no lower bound here)
    assert rate <= 1.2 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"


def test_throttle_time_ms_is_in_new_versions_only(broker: BrokerProcess) -> None:
    records = encode_message_set([Record(None, b"v", 0)])
    with RawClient(broker.address) as raw:
        raw.create_topic("t")
        assert raw.request(ApiKey.PRODUCE, produce_body("t", records), version=1)[
            "throttle_time_ms"] == 0
        assert "throttle_time_ms" not in raw.request(ApiKey.PRODUCE, produce_body("t", records))


def test_a_consumer_over_its_fetch_quota_is_told_so(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker()
    records = encode_message_set([Record(None, b"y" * 10_000, 0) for _ in range(20)])
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("t")
        admin.alter_client_quotas({"user": None}, {"consumer_byte_rate": 50_000})
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
             "topics": [{"name": "t", "partitions": [
                 {"partition": 0, "fetch_offset": 0, "max_bytes": 1 << 20}]}]}
    with RawClient(broker.address) as raw:
        raw.request(ApiKey.PRODUCE, produce_body("t", records), version=1)
        answer = raw.request(ApiKey.FETCH, fetch, version=2)
        assert answer["topics"][0]["partitions"][0]["records"]
        assert answer["throttle_time_ms"] > 0
        # held back, not disconnected: the connection serves the next request
        assert raw.request(ApiKey.METADATA, {"topics": ["t"],
                                             "allow_auto_topic_creation": False})["topics"]
    with Consumer(broker.bootstrap, auto_offset_reset="earliest",
                  partition_fetch_bytes=50_000) as consumer:
        consumer.assign([TopicPartition("t", 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < 20 and time.monotonic() < deadline:
            got += consumer.poll(timeout_ms=500)
        assert len(got) == 20  # slowed, never cut off
        assert consumer.fetch_throttle_stats.throttled > 0
