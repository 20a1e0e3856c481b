"""The errors the log raises on purpose, each carrying the wire code the broker answers with.

Every class derives from ``LogError``: catch it and answer ``exc.code``. A malformed message set
is also a ``protocol.errors.MessageFormatError``, as the codec would have raised. None derives from
``BrokerError``: those stand for codes read from responses, one class per code.
"""

from __future__ import annotations

from protocol.errors import (
    BrokerError,
    CorruptMessageError,
    ErrorCode,
    MessageFormatError,
    OdradekError,
)


class LogError(OdradekError):
    """Base of the log's errors; ``code`` is the error code to put in the response."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class InvalidMessageError(MessageFormatError, LogError):
    """A produced message set is malformed (sizes, magic, codec, compressed payload, inner
    offsets); nothing was written."""

    code = ErrorCode.CORRUPT_MESSAGE

    @staticmethod
    def wrapping(exc: MessageFormatError) -> InvalidMessageError:
        """The log's error for a codec error, same message and place (a bad CRC stays one)."""
        cls = InvalidMessageError
        if isinstance(exc, CorruptMessageError):
            cls = CorruptMessageSetError
        err = cls.__new__(cls)
        Exception.__init__(err, *exc.args)
        err.reason, err.offset, err.position = exc.reason, exc.offset, exc.position
        return err


class CorruptMessageSetError(CorruptMessageError, InvalidMessageError):
    """A produced message's CRC32 does not match its bytes; nothing was written."""

    code = ErrorCode.CORRUPT_MESSAGE


class KeylessMessageError(LogError, ValueError):
    """A message without a key was produced to a compacted log (Kafka: "Compacted topic cannot
    accept message without key"); nothing was written. INVALID_RECORD, as Kafka answers since
    KIP-467: CORRUPT_MESSAGE is retriable, so producers retried it until their delivery timeout."""

    code = ErrorCode.INVALID_RECORD


class ProducerTimestampTypeError(LogError, ValueError):
    """A produced message sets the LogAppendTime timestamp type (Kafka: "Producer should not
    set timestamp type to LogAppendTime"); nothing was written. Only the broker stamps it."""

    code = ErrorCode.INVALID_TIMESTAMP


class ProducerSequenceError(LogError):
    """An idempotent producer's batch that its partition's producer state refuses (a sequence
    gap, an older epoch, a producer not known); nothing was written. ``code`` is
    OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH or UNKNOWN_PRODUCER_ID."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class MessageSetTooLargeError(LogError):
    """A produced message set is larger than ``max_message_bytes``; nothing was written."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class MessageSetLargerThanSegmentError(LogError):
    """A produced message set would not fit in one segment (``segment_bytes``)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class LogOffsetOutOfRangeError(LogError):
    """A read asked for an offset outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogClosedError(LogError):
    """The log was closed or deleted (its topic was deleted while a request was in flight)."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class CorruptSegmentError(LogError):
    """A stored segment does not hold what its indexes and headers promise (damage after the
    log was opened, or a bug); the broker reports it as an unknown server error."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class FollowerAppendError(LogError):
    """A replica's fetched message set cannot go where ``append_as_follower`` would put it;
    nothing was written. Raised on the follower, never answered on the wire."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class UnexpectedAppendOffsetError(FollowerAppendError):
    """A fetched set starts below the follower's log end offset (Kafka's
    UnexpectedAppendOffsetException): the logs diverged, or the fetch started mid-entry. The
    fetcher truncates (by leader epoch) or starts over, then fetches again."""

    def __init__(
        self, directory: object, first_offset: int, last_offset: int, log_end_offset: int
    ) -> None:
        super().__init__(
            f"{directory}: a follower append of offsets {first_offset}..{last_offset} starts "
            f"below the log end offset {log_end_offset}"
        )
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_end_offset = log_end_offset


class OffsetsOutOfOrderError(FollowerAppendError):
    """The entries of a fetched set do not have strictly increasing offsets (Kafka's
    OffsetsOutOfOrderException)."""

    def __init__(self, directory: object, offset: int, previous: int, position: int) -> None:
        super().__init__(
            f"{directory}: a follower append has offset {offset} at position {position} "
            f"after offset {previous}; offsets must increase"
        )
        self.offset = offset
        self.previous = previous
        self.position = position


class CorruptCheckpointError(LogError):
    """A checkpoint file (``leader-epoch-checkpoint``, ``replication-offset-checkpoint``) is
    not in Kafka's format. Never written half (they are replaced atomically), so this is damage
    or a foreign file; the message names the file and the line."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


def error_code(exc: BaseException) -> ErrorCode:
    """The wire code for any exception the log may raise (unknown ones are server errors)."""
    if isinstance(exc, LogError | BrokerError):
        return exc.code
    if isinstance(exc, MessageFormatError):
        return ErrorCode.CORRUPT_MESSAGE
    return ErrorCode.UNKNOWN_SERVER_ERROR
