"""Errors raised by the clients themselves (local errors), as opposed to the typed
``BrokerError`` a broker's error code becomes (``protocol.errors``).

A caller catches ``OdradekError`` for both. ``retriable`` says whether trying again can help,
exactly as ``BrokerError.retriable`` does, so the producer's retry rule is one attribute check.
"""

from __future__ import annotations

from protocol.errors import BrokerError, ErrorCode, OdradekError, error_for


class ClientError(OdradekError):
    """Something went wrong on the client's side of the conversation."""

    retriable = False


class ConfigError(ClientError, ValueError):
    """A client setting is invalid; the message names the setting and the allowed values."""


class ClientTimeoutError(ClientError):
    """An operation did not complete within its deadline (request, metadata, delivery, flush)."""

    retriable = True


class BrokerConnectionError(ClientError):
    """A connection to a broker could not be made or was lost; requests on it did not complete."""

    retriable = True


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


class NoOffsetForPartitionError(ClientError):
    """A partition has no position and ``auto_offset_reset`` is ``none``."""


class IllegalStateError(ClientError):
    """The client was used in a way its current state does not allow (closed, not assigned)."""


def partition_error(where: object, code: int, message: str | None = None) -> BrokerError:
    """The typed error for a per-partition (or per-topic) error code, its message naming
    ``where`` -- the broker's message if it sent one, else the code's meaning."""
    if not message:
        try:
            message = ErrorCode(code).info.meaning
        except ValueError:
            message = f"unknown error code {code}"
    return error_for(code, f"{where}: {message}")
