"""One client connection: read requests, handle them one at a time in order, send responses.

Seed 001: the broker reads and processes one outstanding request per client, so responses
leave in request order and a client may pipeline. What the peer sends decides what happens:

- a request whose header is readable but whose API, version or body is wrong gets an error
  response (``encode_request_error``) and the connection carries on;
- bytes that are not a request at all (no readable header, bad msgpack) or a length prefix over
  ``max_request_bytes`` close the connection -- the stream can no longer be framed;
- a connection that sends nothing, or does not take its response, for
  ``connections_max_idle_ms`` is closed.

Nothing one connection does affects another; failures are logged with the peer's address.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence

import structlog
import trio

from broker.context import CLIENT_CONNECTION, BrokerContext, ClientConnection
from broker.frames import Piece, WithFileSlices, encode_with_file_slices, send_pieces
from broker.handlers import HANDLERS
from protocol.errors import BrokerError, ErrorCode, FrameTooLargeError, ProtocolError
from protocol.framing import FrameDecoder
from protocol.wire import RequestDecodeError, decode_request, encode_request_error, encode_response

log = structlog.get_logger(__name__)

RECEIVE_BYTES = 256 * 1024
_ids = itertools.count(1)


class _Close(Exception):
    """The connection must be closed: its byte stream can no longer be trusted, or it idled."""

    def __init__(self, reason: str, *, level: int = logging.WARNING) -> None:
        super().__init__(reason)
        self.level = level


class Connection:
    def __init__(self, ctx: BrokerContext, stream: trio.SocketStream) -> None:
        self._ctx = ctx
        self._stream = stream
        self._decoder = FrameDecoder(ctx.settings.max_request_bytes)
        self._idle = ctx.settings.connections_max_idle_ms / 1000
        self._waiting_scope: trio.CancelScope | None = None  # set while waiting for a request
        self.id = next(_ids)
        try:
            self.peer = "{}:{}".format(*stream.socket.getpeername()[:2])
        except OSError:
            self.peer = "?"
        self._log = log.bind(conn=self.id, peer=self.peer)

    def stop_waiting(self) -> None:
        """Shutdown (``ctx.stopping`` is set): stop waiting for a request. A request in hand is
        finished and answered first."""
        if self._waiting_scope is not None:
            self._waiting_scope.cancel()

    async def run(self) -> None:
        self._log.debug("connection.opened")
        CLIENT_CONNECTION.set(ClientConnection(self.id, self.peer.rpartition(":")[0]))
        reason = "closed by peer"
        try:
            while True:
                try:
                    payload = self._decoder.next_frame()
                except FrameTooLargeError as exc:
                    raise _Close(str(exc)) from None
                if payload is None:
                    data = await self._receive()
                    if data is None:
                        reason = "stopping"
                        break
                    if not data:
                        if self._decoder.buffered:
                            reason = f"closed by peer {self._decoder.buffered} bytes into a request"
                        break
                    try:
                        self._decoder.receive_data(data)
                    except FrameTooLargeError as exc:
                        raise _Close(str(exc)) from None
                    continue
                pieces = await self._respond(payload)
                if pieces:
                    with trio.move_on_after(self._idle) as timeout:
                        await send_pieces(self._stream, pieces)
                    if timeout.cancelled_caught:
                        raise _Close("the peer did not take its response in time")
                if self._ctx.stopping:
                    reason = "stopping"
                    break
        except _Close as exc:
            reason = str(exc)
            self._log.log(exc.level, "connection.dropped", reason=reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            reason = f"broken: {exc}"
        finally:
            self._ctx.groups.connection_closed(self.id)
            with trio.CancelScope(shield=True):
                await self._stream.aclose()
            self._log.debug("connection.closed", reason=reason)

    async def _receive(self) -> bytes | None:
        """The next bytes from the peer; b"" at its end of stream; None when stopping."""
        with trio.CancelScope() as scope:
            self._waiting_scope = scope
            try:
                if self._ctx.stopping:
                    return None
                with trio.move_on_after(self._idle) as timeout:
                    return await self._stream.receive_some(RECEIVE_BYTES)
            finally:
                self._waiting_scope = None
            if timeout.cancelled_caught:
                idle_ms = round(self._idle * 1000)
                raise _Close(f"idle for connections_max_idle_ms={idle_ms}", level=logging.INFO)
        return None

    async def _respond(self, payload: bytes) -> Sequence[Piece]:
        """Decode and handle one request; the frame pieces to send (none for acks=0)."""
        try:
            request = decode_request(payload)
        except RequestDecodeError as exc:
            if exc.header is None:
                raise _Close(str(exc)) from None
            self._log.info("request.rejected", error=exc.error_code.name, reason=str(exc),
                           correlation_id=exc.header.correlation_id)
            return [encode_request_error(exc.header.correlation_id, exc.error_code, str(exc))]
        except ProtocolError as exc:
            raise _Close(str(exc)) from None
        header = request.header
        handler = HANDLERS[request.api.key]
        try:
            reply = await handler(self._ctx, request)
        except BrokerError as exc:
            return [encode_request_error(header.correlation_id, exc.code, str(exc))]
        except Exception as exc:
            self._log.error("request.failed", api=request.api.name, exc_info=exc)
            return [
                encode_request_error(
                    header.correlation_id,
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"{request.api.name} failed: {type(exc).__name__}: {exc}",
                )
            ]
        if reply is None:
            return []
        if isinstance(reply, WithFileSlices):
            return encode_with_file_slices(header.correlation_id, reply.body)
        return [encode_response(header.correlation_id, reply)]
