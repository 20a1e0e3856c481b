"""Thin, synchronous, single-threaded clients: Consumer, Producer, Admin and the ``odradek`` CLI.

Imports ``protocol`` only -- never ``broker`` or ``coordinator`` -- so it is exactly what a user
of another machine runs.
"""

from client.admin import Admin, NewTopic
from client.consumer import Consumer
from client.errors import (
    BrokerConnectionError,
    ClientError,
    ClientTimeoutError,
    CommitFailedError,
    ConfigError,
    CorruptRecordError,
    IllegalStateError,
    NoBrokersAvailableError,
    NoOffsetForPartitionError,
    RecordTooLargeError,
    SubscriptionNotValidError,
)
from client.group_state import ConsumerState
from client.offsets import EARLIEST, LATEST
from client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from client.producer import Producer
from client.records import ConsumerRecord, RecordMetadata, TopicPartition
from client.subscription import ConsumerRebalanceListener

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "BrokerConnectionError",
    "ClientError",
    "ClientTimeoutError",
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerState",
    "CorruptRecordError",
    "DefaultPartitioner",
    "IllegalStateError",
    "NewTopic",
    "NoBrokersAvailableError",
    "NoOffsetForPartitionError",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "SubscriptionNotValidError",
    "TopicPartition",
    "murmur2",
    "partition_for_key",
]
