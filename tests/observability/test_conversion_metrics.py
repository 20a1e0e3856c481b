"""Down-conversion is counted as Kafka counts it: the messages converted for readers below
Fetch v4, per topic, and the time spent converting; reads as stored count nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol.record_batch import encode_batch
from tests.broker.raw import RawClient
from tests.broker.test_down_conversion import fetch
from tests.broker_process import BrokerProcess
from tests.mixed_magics import BASE_TIME, produce_records
from tests.observability.support import sample, scrape, start_with_metrics

pytestmark = pytest.mark.integration

CONVERSIONS = "odradek_brokertopicmetrics_fetchmessageconversions_total"
CONVERSION_TIME = "odradek_requestmetrics_messageconversionstime_seconds_total"


def test_converted_messages_and_time_are_counted(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker, url = start_with_metrics(make_broker)
    with RawClient(broker.address) as client:
        client.create_topic("old-readers", 1)
        batch = encode_batch([(b"k", b"v%d" % i, BASE_TIME + i) for i in range(5)])
        assert produce_records(client, "old-readers", batch)["error_code"] == 0
        assert fetch(client, "old-readers", 0, 4)["error_code"] == 0  # as stored
        assert sample(scrape(url), CONVERSIONS, topic="old-readers") is None
        assert fetch(client, "old-readers", 0, 3)["error_code"] == 0
        assert fetch(client, "old-readers", 2, 2)["error_code"] == 0  # records 2..4 only
        samples = scrape(url)
    assert sample(samples, CONVERSIONS, topic="old-readers") == 5 + 3
    time_spent = sample(samples, CONVERSION_TIME)
    assert time_spent is not None and time_spent > 0
