"""Error codes and the exceptions that carry them.

One enum holds every wire error code (Kafka's numbers where the meaning is the same), with the
name the 0.9 consumer-rewrite design uses for it, whether a client may retry, and a one-line
meaning. The exception classes are derived from that enum, so a code and its exception cannot
drift apart: ``error_for(code)`` gives the class, ``BrokerError.code`` the number.

Two families, as h11 separates them:
- ``ProtocolError`` -- the bytes we were handed are malformed (a remote error);
- ``BrokerError`` subclasses -- a well-formed response carried a non-zero error code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


@dataclass(frozen=True)
class ErrorInfo:
    name: str
    seed_name: str
    retriable: bool
    meaning: str


class ErrorCode(IntEnum):
    """Wire error codes. ``ErrorCode.X.info`` describes each one."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_FOR_PARTITION = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    SECURITY_DISABLED = 54
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    OFFSET_NOT_AVAILABLE = 78
    FENCED_INSTANCE_ID = 82
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    RESOURCE_NOT_FOUND = 91
    UNACCEPTABLE_CREDENTIAL = 93
    UNKNOWN_ASSIGNMENT_STRATEGY = 200
    UNSUPPORTED_API = 201

    @property
    def info(self) -> ErrorInfo:
        return _INFO[self]

    @property
    def retriable(self) -> bool:
        return _INFO[self].retriable


def _i(seed_name: str, retriable: bool, meaning: str) -> tuple[str, bool, str]:
    return (seed_name, retriable, meaning)


_TABLE: dict[ErrorCode, tuple[str, bool, str]] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: _i("", False, "The broker failed unexpectedly; see its log."),
    ErrorCode.NONE: _i("", False, "Success."),
    ErrorCode.OFFSET_OUT_OF_RANGE: _i(
        "OutOfRangeException",
        False,
        "The requested offset is outside the partition's [log start, log end].",
    ),
    ErrorCode.CORRUPT_MESSAGE: _i(
        "", True, "A message failed its CRC check or is malformed; nothing was written."
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: _i(
        "", True, "The topic or partition does not exist on this broker."
    ),
    ErrorCode.INVALID_FETCH_SIZE: _i("", False, "The requested fetch size is not positive."),
    ErrorCode.LEADER_NOT_AVAILABLE: _i(
        "", True, "The partition has no leader right now (an election is in progress)."
    ),
    ErrorCode.NOT_LEADER_FOR_PARTITION: _i(
        "", True, "This broker is not the partition's leader; refresh metadata."
    ),
    ErrorCode.REQUEST_TIMED_OUT: _i("", True, "The request did not complete within its timeout."),
    ErrorCode.BROKER_NOT_AVAILABLE: _i(
        "", False, "The broker named in the request is not alive (not registered in ZooKeeper)."
    ),
    ErrorCode.MESSAGE_TOO_LARGE: _i(
        "", False, "A message set is larger than the broker's max_message_bytes."
    ),
    ErrorCode.STALE_CONTROLLER_EPOCH: _i(
        "", False,
        "The request came from a controller whose epoch is older than one already seen; "
        "a newer controller has taken over.",
    ),
    ErrorCode.OFFSET_METADATA_TOO_LARGE: _i(
        "", False, "Committed metadata is longer than offset_metadata_max_bytes."
    ),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: _i(
        "OffsetsLoadInProgress / CoordinatorStartupNotComplete",
        True,
        "The coordinator is still loading the group's offsets partition; back off and retry.",
    ),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: _i(
        "", True, "No coordinator is available for the group right now."
    ),
    ErrorCode.NOT_COORDINATOR: _i(
        "NotCoordinatorForGroup",
        True,
        "This broker is not the group's coordinator; find the coordinator again.",
    ),
    ErrorCode.INVALID_TOPIC: _i(
        "", False, "The topic name is invalid or the topic may not be used this way."
    ),
    ErrorCode.RECORD_LIST_TOO_LARGE: _i(
        "", False, "A produce request's message set exceeds the segment size."
    ),
    ErrorCode.NOT_ENOUGH_REPLICAS: _i(
        "", True, "Fewer in-sync replicas than required for acks=all."
    ),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _i(
        "", True,
        "The message set was written on the leader, but the ISR shrank below "
        "min_insync_replicas before it was replicated; retrying may store it twice.",
    ),
    ErrorCode.INVALID_REQUIRED_ACKS: _i("", False, "acks must be 0, 1 or -1 (all)."),
    ErrorCode.ILLEGAL_GENERATION: _i(
        "IllegalGeneration",
        False,
        "The generation id is not the group's current one; rejoin the group.",
    ),
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: _i(
        "InconsistentPartitioningStrategy",
        False,
        "The member names an assignment strategy different from the group's.",
    ),
    ErrorCode.INVALID_GROUP_ID: _i("", False, "The group id is empty or invalid."),
    ErrorCode.UNKNOWN_MEMBER_ID: _i(
        "UnknownConsumer",
        False,
        "The member id is not a member of the group; join again as a new member.",
    ),
    ErrorCode.INVALID_SESSION_TIMEOUT: _i(
        "SessionTimeoutTooHigh", False, "The session timeout is outside the broker's allowed range."
    ),
    ErrorCode.REBALANCE_IN_PROGRESS: _i(
        "IllegalGeneration (in heartbeats)",
        False,
        "The group is rebalancing; commit, then rejoin. The generation is still current.",
    ),
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: _i(
        "", False, "The offset commit request was too large to write."
    ),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: _i(
        "", False, "The principal may not do this to the topic (no ACL allows it, or one "
        "denies it); nothing was done."
    ),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: _i(
        "", False, "The principal may not do this to the group (no ACL allows it, or one "
        "denies it); nothing was done."
    ),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: _i(
        "", False, "The principal may not do this to the cluster (no ACL allows it, or one "
        "denies it); nothing was done."
    ),
    ErrorCode.SECURITY_DISABLED: _i(
        "", False, "The broker runs without an authorizer (authorizer_enabled is false): it "
        "keeps no ACLs."
    ),
    ErrorCode.INVALID_TIMESTAMP: _i(
        "", False,
        "A produced message sets the LogAppendTime timestamp type, which only the broker may "
        "set; nothing was written.",
    ),
    ErrorCode.UNSUPPORTED_VERSION: _i("", False, "The broker does not support this API version."),
    ErrorCode.TOPIC_ALREADY_EXISTS: _i("", False, "A topic with that name already exists."),
    ErrorCode.INVALID_PARTITIONS: _i("", False, "The number of partitions is not valid."),
    ErrorCode.INVALID_REPLICATION_FACTOR: _i(
        "", False, "The replication factor is below 1 or above the number of live brokers."
    ),
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: _i(
        "", False, "An explicit replica assignment names unknown brokers or is inconsistent."
    ),
    ErrorCode.INVALID_CONFIG: _i("", False, "A topic or request setting is invalid."),
    ErrorCode.NOT_CONTROLLER: _i(
        "", True, "This broker is not the cluster's controller; ask the controller."
    ),
    ErrorCode.INVALID_REQUEST: _i(
        "", False, "The request is malformed: wrong fields or types, or an unknown API."
    ),
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: _i(
        "", False,
        "The batch's sequence number does not follow the last one the leader has from this "
        "producer id and epoch (a gap: a batch before it was lost); nothing was written.",
    ),
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: _i(
        "", False,
        "The leader already has a batch with this sequence number from this producer, older "
        "than the five it remembers; nothing was written again.",
    ),
    ErrorCode.INVALID_PRODUCER_EPOCH: _i(
        "", False,
        "The batch's producer epoch is older than the one the leader has for its producer id: "
        "a newer producer with that id has taken over (it is fenced).",
    ),
    ErrorCode.UNKNOWN_PRODUCER_ID: _i(
        "", False,
        "The leader keeps no state for the batch's producer id (it expired, or the records "
        "that held it were deleted); the producer must get a new id (InitProducerId).",
    ),
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: _i(
        "", False,
        "The reader's version cannot take the stored data's codec (zstd below Fetch v4: "
        "record batches only).",
    ),
    ErrorCode.NON_EMPTY_GROUP: _i(
        "", False, "The group has members; it can only be deleted or reset when Empty."
    ),
    ErrorCode.GROUP_ID_NOT_FOUND: _i("", False, "No group with that id exists."),
    ErrorCode.FENCED_INSTANCE_ID: _i(
        "", False, "Another member took this static member's instance id (a newer process "
        "with the same group_instance_id): this one must stop."
    ),
    ErrorCode.OFFSET_NOT_AVAILABLE: _i(
        "", True,
        "A new leader does not know its high watermark yet (its followers have not fetched "
        "from it since it took over); ask again.",
    ),
    ErrorCode.FENCED_LEADER_EPOCH: _i(
        "", True, "The request names a leader epoch older than the leader's own."
    ),
    ErrorCode.UNKNOWN_LEADER_EPOCH: _i(
        "", True, "The request names a leader epoch newer than the leader's own (it has not "
        "caught up with the controller yet)."
    ),
    ErrorCode.STALE_BROKER_EPOCH: _i(
        "", False, "A controller's request names an older registration of this broker than its "
        "own (KIP-380): it was sent before the broker registered again, and is set aside."
    ),
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: _i(
        "", False, "The SASL mechanism asked for is not enabled on this listener."
    ),
    ErrorCode.ILLEGAL_SASL_STATE: _i(
        "", False, "A SASL request came out of order (SaslAuthenticate before SaslHandshake, or "
        "a second handshake)."
    ),
    ErrorCode.SASL_AUTHENTICATION_FAILED: _i(
        "", False, "Authentication failed: unknown user or wrong password. The broker closes "
        "the connection."
    ),
    ErrorCode.RESOURCE_NOT_FOUND: _i(
        "", False, "The user (or other resource) named does not exist."
    ),
    ErrorCode.UNACCEPTABLE_CREDENTIAL: _i(
        "", False,
        "A SCRAM credential was refused (iterations out of range, empty salt or keys).",
    ),
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: _i(
        "", False, "The group's members are subscribed to the topic, so its committed offsets "
        "cannot be deleted -- stop the consumers (or unsubscribe them) first."
    ),
    # Not retriable: sending the same message again gets the same answer. Kafka answered a
    # keyless message to a compacted topic with the retriable CORRUPT_MESSAGE until KIP-467,
    # and producers retried it until their delivery timeout (KAFKA-4808).
    ErrorCode.INVALID_RECORD: _i(
        "",
        False,
        "A message is well formed but the broker refuses it (e.g. no key for a compacted "
        "topic); nothing was written.",
    ),
    ErrorCode.UNKNOWN_ASSIGNMENT_STRATEGY: _i(
        "UnknownPartitioningStrategy",
        False,
        "The assignment strategy is not one the broker allows.",
    ),
    ErrorCode.UNSUPPORTED_API: _i("", False, "The broker does not know this API key."),
}

_INFO: dict[ErrorCode, ErrorInfo] = {
    code: ErrorInfo(code.name, *row) for code, row in _TABLE.items()
}
assert set(_INFO) == set(ErrorCode), "every error code needs an ErrorInfo row"


class OdradekError(Exception):
    """Base of every exception odradek raises on purpose."""


class ProtocolError(OdradekError):
    """The bytes on the wire or on disk do not follow the protocol (a remote error)."""


class FrameTooLargeError(ProtocolError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds max_frame_bytes={limit}")
        self.size = size
        self.limit = limit


class SchemaError(ProtocolError):
    """A request or response body does not match its API schema."""


class MessageFormatError(ProtocolError):
    """A message set is malformed (bad size, magic, codec or compressed payload)."""

    def __init__(self, reason: str, *, offset: int | None = None, position: int = 0) -> None:
        where = f"at byte position {position}"
        if offset is not None:
            where = f"offset {offset} " + where
        super().__init__(f"{reason} ({where})")
        # without the place: an error built from this one names its own place, once
        self.reason = reason
        self.offset = offset
        self.position = position


class CorruptMessageError(MessageFormatError):
    """A message's stored CRC32 does not match its bytes."""


class BrokerError(OdradekError):
    """A response carried a non-zero error code. One subclass per ``ErrorCode``."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    @property
    def retriable(self) -> bool:
        return self.code.retriable


class UnknownServerError(BrokerError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(BrokerError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptMessageBrokerError(BrokerError):
    code = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(BrokerError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidFetchSizeError(BrokerError):
    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(BrokerError):
    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderForPartitionError(BrokerError):
    code = ErrorCode.NOT_LEADER_FOR_PARTITION


class RequestTimedOutError(BrokerError):
    code = ErrorCode.REQUEST_TIMED_OUT


class BrokerNotAvailableError(BrokerError):
    code = ErrorCode.BROKER_NOT_AVAILABLE


class MessageTooLargeError(BrokerError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(BrokerError):
    code = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(BrokerError):
    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class CoordinatorLoadInProgressError(BrokerError):
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(BrokerError):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(BrokerError):
    code = ErrorCode.NOT_COORDINATOR


class InvalidTopicError(BrokerError):
    code = ErrorCode.INVALID_TOPIC


class RecordListTooLargeError(BrokerError):
    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(BrokerError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(BrokerError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(BrokerError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(BrokerError):
    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(BrokerError):
    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(BrokerError):
    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(BrokerError):
    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(BrokerError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(BrokerError):
    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(BrokerError):
    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class TopicAuthorizationFailedError(BrokerError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(BrokerError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(BrokerError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class SecurityDisabledError(BrokerError):
    code = ErrorCode.SECURITY_DISABLED


class UnsupportedVersionError(BrokerError):
    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(BrokerError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(BrokerError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(BrokerError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(BrokerError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(BrokerError):
    code = ErrorCode.INVALID_CONFIG


class NotControllerError(BrokerError):
    code = ErrorCode.NOT_CONTROLLER


class InvalidRequestError(BrokerError):
    code = ErrorCode.INVALID_REQUEST


class OutOfOrderSequenceNumberError(BrokerError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(BrokerError):
    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(BrokerError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(BrokerError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class UnsupportedCompressionTypeError(BrokerError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class NonEmptyGroupError(BrokerError):
    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(BrokerError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class InvalidRecordError(BrokerError):
    code = ErrorCode.INVALID_RECORD


class InvalidTimestampError(BrokerError):
    code = ErrorCode.INVALID_TIMESTAMP


class OffsetNotAvailableError(BrokerError):
    code = ErrorCode.OFFSET_NOT_AVAILABLE


class FencedInstanceIdError(BrokerError):
    code = ErrorCode.FENCED_INSTANCE_ID


class FencedLeaderEpochError(BrokerError):
    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(BrokerError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class StaleBrokerEpochError(BrokerError):
    code = ErrorCode.STALE_BROKER_EPOCH


class UnsupportedSaslMechanismError(BrokerError):
    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(BrokerError):
    code = ErrorCode.ILLEGAL_SASL_STATE


class SaslAuthenticationFailedError(BrokerError):
    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class ResourceNotFoundError(BrokerError):
    code = ErrorCode.RESOURCE_NOT_FOUND


class UnacceptableCredentialError(BrokerError):
    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class GroupSubscribedToTopicError(BrokerError):
    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class UnknownAssignmentStrategyError(BrokerError):
    code = ErrorCode.UNKNOWN_ASSIGNMENT_STRATEGY


class UnsupportedApiError(BrokerError):
    code = ErrorCode.UNSUPPORTED_API


_BY_CODE: dict[ErrorCode, type[BrokerError]] = {
    cls.code: cls for cls in BrokerError.__subclasses__()
}
assert set(_BY_CODE) == set(ErrorCode) - {ErrorCode.NONE}, "one exception class per error code"


def error_for(code: int, message: str = "") -> BrokerError:
    """The exception instance for a wire error code (unknown codes map to UnknownServerError)."""
    try:
        cls = _BY_CODE[ErrorCode(code)]
    except (ValueError, KeyError):
        return UnknownServerError(f"unknown error code {code}: {message}".rstrip(": "))
    return cls(message or cls.code.info.meaning)


def error_class(code: ErrorCode) -> type[BrokerError]:
    return _BY_CODE[code]
