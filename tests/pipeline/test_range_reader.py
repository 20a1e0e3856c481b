"""The executor's reader of one offset range (pipeline/range_reader.py) against a real broker,
in this process: a log that ends before the range is a loss only once it has stayed so for
``kafkaConsumer.pollTimeoutMs``, not at the first empty poll -- after a change of leader the
new leader's high watermark can trail the old one's for a moment (DESIGN "Replication": the
high watermark moves once followers have fetched), and a read must wait for it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pipeline.data_loss import DataLossError
from pipeline.options import ReadOptions, parse_read_options
from pipeline.planning import OffsetRange
from pipeline.range_reader import read_range
from tests.broker_process import BrokerProcess
from tests.pipeline.support import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = "ranges"


def _options(bootstrap: str, *, fail: bool, poll_timeout_ms: int) -> ReadOptions:
    return parse_read_options({
        "bootstrap.servers": bootstrap, "subscribe": TOPIC,
        "failOnDataLoss": str(fail).lower(),
        "kafkaConsumer.pollTimeoutMs": str(poll_timeout_ms)}, streaming=False)


def _values(bootstrap: str, r: OffsetRange, *, fail: bool, poll_timeout_ms: int
            ) -> list[bytes]:
    options = _options(bootstrap, fail=fail, poll_timeout_ms=poll_timeout_ms)
    batches = read_range(options, r)
    return [v for batch in batches for v in batch.column("value").to_pylist()]


def test_a_range_past_the_high_watermark_waits_for_it(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker()
    create_topic(broker.bootstrap, TOPIC, 1)
    produce(broker.bootstrap, TOPIC, 10, partitions=1)
    # the rest arrives after the reader has found the log's end short of the range
    late = threading.Timer(1.5, produce, (broker.bootstrap, TOPIC, 10),
                           {"partitions": 1, "first": 10})
    late.start()
    try:
        values = _values(broker.bootstrap, OffsetRange(TOPIC, 0, 0, 20), fail=True,
                         poll_timeout_ms=30_000)
    finally:
        late.join()
    assert values == [b"v%d" % i for i in range(20)]


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "carry-on"])
def test_a_log_that_stays_short_of_the_range_is_a_loss_after_the_poll_timeout(
    make_broker: Callable[..., BrokerProcess], fail: bool,
) -> None:
    broker = make_broker()
    create_topic(broker.bootstrap, TOPIC, 1)
    produce(broker.bootstrap, TOPIC, 10, partitions=1)
    r = OffsetRange(TOPIC, 0, 4, 20)  # planned on a log that has since lost offsets 10..19
    if fail:
        with pytest.raises(DataLossError, match=rf"{TOPIC}-0 ends at offset 10, before the "
                           r"planned range \[4, 20\) was read"):
            _values(broker.bootstrap, r, fail=True, poll_timeout_ms=2000)
    else:
        values = _values(broker.bootstrap, r, fail=False, poll_timeout_ms=2000)
        assert values == [b"v%d" % i for i in range(4, 10)]
