"""Errors raised by the clients themselves (local errors), as opposed to the typed
``BrokerError`` a broker's error code becomes (``protocol.errors``).

A caller catches ``OdradekError`` for both. ``retriable`` says whether trying again can help,
exactly as ``BrokerError.retriable`` does, so the producer's retry rule is one attribute check.
"""

from __future__ import annotations

from client.records import TopicPartition
from protocol.errors import BrokerError, ErrorCode, MessageFormatError, OdradekError, error_for


class ClientError(OdradekError):
    """Something went wrong on the client's side of the conversation."""

    retriable = False


class ConfigError(ClientError, ValueError):
    """A client setting is invalid; the message names the setting and the allowed values."""


class ClientTimeoutError(ClientError):
    """An operation did not complete within its deadline (request, metadata, delivery, flush)."""

    retriable = True


class PrecedingSetFailedError(ClientError):
    """Not sent: a stored message set queued before it in the same partition failed for good
    (``Producer.send_set``). A log with a set missing and later ones present would read as if
    the missing one never existed, so the sends after it fail with it; ``__cause__`` is that
    set's error."""


class BrokerConnectionError(ClientError):
    """A connection to a broker could not be made or was lost; requests on it did not complete."""

    retriable = True


class AuthenticationError(ClientError):
    """The client cannot open a connection on a listener's terms: its TLS handshake failed, or
    it does not speak the listener's security protocol (Kafka's AuthenticationException).
    Retrying cannot help -- a setting must change -- so the clients raise it at once, from the
    call that was driving I/O when it happened, instead of retrying until their timeout. A
    refused SASL login is the broker's own ``SaslAuthenticationFailedError`` (and
    ``UnsupportedSaslMechanismError``, ``IllegalSaslStateError``), raised the same way."""

    retriable = False


class SslHandshakeError(AuthenticationError):
    """The TLS handshake with a broker failed: its certificate is not trusted (ssl_cafile), does
    not name the host (ssl_check_hostname), or the listener wants a client certificate
    (ssl_certfile). The message names the listener and ssl's reason."""


class SecurityProtocolMismatchError(AuthenticationError, BrokerConnectionError):
    """The broker closed the connection because the listener speaks another security protocol
    than the client's ``security_protocol`` -- a PLAINTEXT client on a SASL or TLS listener, a
    TLS client on a plain one. Asked of the listener itself (client/listener_probe.py), so the
    message says what it expects. A connection error that retrying cannot help."""

    retriable = False


class NoBrokersAvailableError(ClientError):
    """None of the bootstrap or known brokers could be reached."""

    retriable = True


class RecordTooLargeError(ClientError):
    """A stored message is larger than ``max_partition_fetch_bytes``: the consumer cannot read
    past it without a larger setting."""

    def __init__(self, topic: str, partition: int, offset: int, size: int, limit: int) -> None:
        super().__init__(
            f"message at {topic}-{partition} offset {offset} needs {size} bytes, more than "
            f"max_partition_fetch_bytes={limit}; raise max_partition_fetch_bytes to read it"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.size = size


class CorruptRecordError(ClientError):
    """A fetched entry is damaged: its CRC does not match, or it is malformed (the codec's
    ``MessageFormatError`` is the ``__cause__``). ``poll`` hands out the records before it
    first and raises this at the next poll, and again at each poll until the consumer seeks
    past it: ``seek(tp, offset + 1)``, as kafka-console-consumer's skip.message.on.error does.
    For a compressed wrapper ``offset`` is its last, so that skips the whole wrapper."""

    def __init__(self, tp: TopicPartition, cause: MessageFormatError, offset: int) -> None:
        super().__init__(f"{tp}: {cause}")  # the cause names the offset and position, once
        self.__cause__ = cause
        self.tp = tp
        self.offset = offset


class NoOffsetForPartitionError(ClientError):
    """A partition has no position and ``auto_offset_reset`` is ``none``."""


class IllegalStateError(ClientError):
    """The client was used in a way its current state does not allow (closed, not assigned)."""


def partition_error(where: object, code: int, message: str | None = None) -> BrokerError:
    """The typed error for a per-partition (or per-topic) error code, its message naming
    ``where`` -- the broker's message if it sent one, else the code's meaning. A broker's
    message that already starts by naming ``where`` ("topic 'x' already exists") is kept as
    it is, so the place is not named twice."""
    if not message:
        try:
            message = ErrorCode(code).info.meaning
        except ValueError:
            message = f"unknown error code {code}"
    place = str(where)
    named = message.startswith(place) and message[len(place) : len(place) + 1] in ("", " ", ":")
    return error_for(code, message if named else f"{place}: {message}")


class SubscriptionNotValidError(IllegalStateError):
    """Seed 001 SubscriptionNotValid: ``subscribe`` and ``assign`` were mixed, or ``subscribe``
    was called without a ``group_id``."""


class CommitFailedError(ClientError):
    """An offset commit was refused because this consumer is not a member of the generation
    that owns the partitions: the group rebalanced without it, or is rebalancing."""

    def __init__(self, group_id: str, reason: str, *, removed: bool = True) -> None:
        if removed:
            advice = (
                "The coordinator removed this member, most often because poll() was not called "
                "within session_timeout_ms -- heartbeats only go out from poll() -- and gave its "
                "partitions to other members. Call poll() more often than the session timeout: "
                "process fewer records per poll (max_poll_records) or faster, or raise "
                "session_timeout_ms."
            )
        else:
            advice = "The group is rebalancing; this member's partitions may move."
        super().__init__(
            f"commit for group {group_id!r} failed: {reason}. {advice} The consumer rejoins at "
            "its next poll(); records since the last successful commit may be delivered again."
        )
        self.group_id = group_id
        self.reason = reason
