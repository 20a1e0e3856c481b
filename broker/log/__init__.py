"""Log storage: each partition is a directory of segments with sparse indexes (seed 000 §5.5).

``PartitionLog`` appends, reads, flushes, recovers, deletes by retention and compacts one
partition; ``LogManager`` holds every partition log of a data directory. Plain synchronous file
I/O (no trio): each call is quick, and the server calls them from its tasks.
"""

from broker.log.config import SETTINGS, LogConfig
from broker.log.errors import (
    CorruptCheckpointError,
    CorruptMessageSetError,
    CorruptSegmentError,
    FollowerAppendError,
    InvalidMessageError,
    KeylessMessageError,
    LogClosedError,
    LogError,
    LogOffsetOutOfRangeError,
    MessageSetLargerThanSegmentError,
    MessageSetTooLargeError,
    OffsetsOutOfOrderError,
    ProducerSequenceError,
    UnexpectedAppendOffsetError,
)
from broker.log.leader_epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from broker.log.manager import LogManager, MaintenanceResult
from broker.log.partition_log import AppendResult, PartitionLog, ReadResult

__all__ = [
    "SETTINGS",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendResult",
    "CorruptCheckpointError",
    "CorruptMessageSetError",
    "CorruptSegmentError",
    "EpochEntry",
    "FollowerAppendError",
    "InvalidMessageError",
    "KeylessMessageError",
    "LeaderEpochCache",
    "LogClosedError",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogOffsetOutOfRangeError",
    "MaintenanceResult",
    "MessageSetLargerThanSegmentError",
    "MessageSetTooLargeError",
    "OffsetsOutOfOrderError",
    "PartitionLog",
    "ProducerSequenceError",
    "ReadResult",
    "UnexpectedAppendOffsetError",
]
