"""Thin, synchronous, single-threaded clients: Consumer, Producer and Admin.

Imports ``protocol`` only -- never ``broker``, ``coordinator`` or ``tooling`` (the ``odradek``
command and the console are built on this library, in tooling/) -- so it is exactly what a user
of another machine runs.
"""

from client.admin import Admin, ClientQuota, NewTopic
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
from client.message_sets import FetchedSet
from client.offsets import EARLIEST, LATEST
from client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from client.producer import Producer
from client.records import ConsumerRecord, RecordMetadata, TopicPartition
from client.subscription import ConsumerRebalanceListener
from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Admin",
    "BrokerConnectionError",
    "ClientError",
    "ClientQuota",
    "ClientTimeoutError",
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerState",
    "CorruptRecordError",
    "DefaultPartitioner",
    "FetchedSet",
    "IllegalStateError",
    "NewTopic",
    "NoBrokersAvailableError",
    "NoOffsetForPartitionError",
    "PatternType",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "ResourceType",
    "SubscriptionNotValidError",
    "TopicPartition",
    "murmur2",
    "partition_for_key",
]
