"""odradek's public Python API: ``from odradek import Admin, Consumer, Producer, TopicPartition``.

The clients live in the repository's top-level ``client`` package (and the wire format in
``protocol``), as the design card lays them out; this package gives user code one distinctive
name to import them from. Every exception is in ``odradek.errors``; the usual ones are here too.
It imports ``client`` and ``protocol`` only -- never the broker.
"""

from client import (
    EARLIEST,
    LATEST,
    Admin,
    BrokerConnectionError,
    ClientError,
    ClientTimeoutError,
    CommitFailedError,
    ConfigError,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    ConsumerState,
    CorruptRecordError,
    DefaultPartitioner,
    IllegalStateError,
    NewTopic,
    NoBrokersAvailableError,
    NoOffsetForPartitionError,
    Producer,
    RecordMetadata,
    RecordTooLargeError,
    SubscriptionNotValidError,
    TopicPartition,
    murmur2,
    partition_for_key,
)
from odradek import errors
from protocol.errors import (
    BrokerError,
    OdradekError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "BrokerConnectionError",
    "BrokerError",
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
    "OdradekError",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "SubscriptionNotValidError",
    "TopicAlreadyExistsError",
    "TopicPartition",
    "UnknownTopicOrPartitionError",
    "errors",
    "murmur2",
    "partition_for_key",
]
