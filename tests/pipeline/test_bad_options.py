"""Options a user got wrong fail when the query is planned, with a message naming the option."""

from __future__ import annotations

import re

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.broker_process import BrokerProcess
from tests.pipeline.support import create_topic

pytestmark = pytest.mark.timeout(180)

BAD_READS = [
    ({"subscribe": "no-such-topic"}, "option 'subscribe': topic 'no-such-topic' does not exist"),
    ({"subscribe": "events", "startingOffsets": '{"events": {"0": '}, "option 'startingOffsets'"),
    ({"subscribe": "events", "endingOffsets": "[1, 2]"}, "option 'endingOffsets'"),
    ({"subscribe": "events", "assign": '{"events": [0]}'}, "option 'subscribe'"),
    ({"assign": '{"events": [7]}'}, "option 'assign': topic 'events' has partitions 0..1"),
    ({"subscribe": "events", "startingOffsets": '{"events": {"0": 0}}'},
     "option 'startingOffsets': does not name events-1"),
    ({"subscribe": "events", "startingOffsets": "latest"}, "option 'startingOffsets'"),
    ({"subscribe": "events", "minPartitions": "0"}, "option 'minPartitions'"),
    ({"subscribe": "events", "maxOffsetsPerTrigger": "5"}, "option 'maxOffsetsPerTrigger'"),
]


@pytest.mark.parametrize(("options", "message"), BAD_READS)
def test_bad_read_options_name_the_option(
    spark: SparkSession, broker: BrokerProcess, options: dict[str, str], message: str
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    reader = spark.read.format("odradek").option("bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(PySparkException, match=re.escape(message)):
        reader.load().collect()
