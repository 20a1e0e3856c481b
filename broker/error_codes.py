"""Which error code answers an exception raised while handling a partition."""

from __future__ import annotations

from broker.log import LogError
from protocol.errors import BrokerError, ErrorCode, MessageFormatError


def error_code_for(exc: BaseException) -> ErrorCode:
    """The log's and the protocol's errors carry their code; a malformed message set is
    CORRUPT_MESSAGE; anything else (a disk error, a bug) is UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, LogError | BrokerError):
        return exc.code
    if isinstance(exc, MessageFormatError):
        return ErrorCode.CORRUPT_MESSAGE
    return ErrorCode.UNKNOWN_SERVER_ERROR
