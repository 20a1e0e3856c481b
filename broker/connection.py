"""One client connection: open its listener's security, then read requests, handle them one at
a time in order, and queue their responses.

Seed 001: the broker reads and processes one outstanding request per client, so responses
leave in request order and a client may pipeline. The responses go to the connection's writer
task (broker/response_writer.py), which sends those ready at the same moment in one system call
and never holds one back for a request still being handled.

The listener decides how bytes move (broker/security/setup.py, broker/streams.py): PLAINTEXT
and SASL_PLAINTEXT read and write the socket itself; SSL and SASL_SSL first complete a TLS
handshake within ``request_read_timeout_ms`` -- one that fails or never comes closes the
connection at once, since nothing can be answered in the clear -- and then go through TLS. The
writer task starts before the handshake and sends through whichever stream the connection has
by then. On a SASL listener only the SASL exchange (and ApiVersions) is answered until the
login succeeds; any other request closes the connection with nothing done, and a failed login
is answered SASL_AUTHENTICATION_FAILED, that answer sent, then the connection closed -- nothing
the client pipelined behind it is handled.

What the peer sends decides what happens:

- a request whose header is readable but whose API, version or body is wrong gets an error
  response (``encode_request_error``) and the connection carries on;
- bytes that are not a request at all (no readable header, bad msgpack) or a length prefix over
  ``max_request_bytes`` close the connection -- the stream can no longer be framed;
- a connection that sends nothing, or does not take its response, for
  ``connections_max_idle_ms`` is closed; so is one whose request has not arrived whole
  ``request_read_timeout_ms`` after its first byte (a slow or stalled sender). A send that fails
  or times out stops the writer, which stops the reader's wait for the next request.

Memory: bytes are read only into room reserved in the broker-wide ``ctx.request_memory``
(``queued_max_request_bytes``, see broker/memory_pool.py) and given back once their request has
been handled. A connection waiting for a request holds nothing; once bytes are there it reads a
read-ahead (``SMALL_REQUEST_BYTES``, the whole of most requests) if the pool has room to spare,
else only the 4-byte length prefix, and as soon as a frame's length is known its whole size is
reserved at once. While the pool is full the connection waits without reading, which leaves the
bytes in the kernel and pushes back on the sender.

Between requests a PLAINTEXT or SASL_PLAINTEXT connection on the native listener waits in the
broker's idle lane (broker/idle_lane.py), once everything it read is answered and its queued
answers are written: the lane reads it together with every other waiting connection and
answers its Heartbeats in the same pass (``_answer_heartbeat``: decoded, authorized, answered by
the coordinator at once, counted in the metrics -- what ``_respond`` would do, without an await),
writing the answers straight to the socket. A request read there in part waits there for the
rest, under its read deadline. Anything else wakes the connection's task, which handles it
here as described above. Its idle limit then counts from the lane's last read.

Nothing one connection does affects another; failures are logged with the peer's address. A
client that pipelines many requests gets them handled back to back, but only for
``REQUEST_TURN_S`` at a time: then the reader yields, so a burst on some connections (a hundred
LeaveGroups, the heartbeats of groups starting to rebalance) does not hold every other
connection's requests until it is through.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import time
from collections.abc import Sequence
from typing import ClassVar

import structlog
import trio

from broker.client_connection import CLIENT_CONNECTION, ClientConnection
from broker.context import BrokerContext
from broker.frames import Piece, WithFileSlices, encode_with_file_slices, write_now
from broker.handlers import HANDLERS
from broker.handlers.metadata import supported_apis
from broker.idle_lane import BETWEEN_REQUESTS_TURN_S, VISIT_REQUESTS, IdleLane, Turn
from broker.memory_pool import SMALL_REQUEST_BYTES
from broker.response_writer import ResponseTimeoutError, ResponseWriter
from broker.security.listeners import Endpoint
from broker.security.sasl import SASL_SESSION, SaslSession
from broker.security.setup import HandshakeError
from broker.streams import ConnectionStream, PlainStream
from protocol.acls import ResourceType
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode, FrameTooLargeError, ProtocolError
from protocol.framing import FrameDecoder
from protocol.wire import (
    HeartbeatFrame,
    RequestDecodeError,
    decode_request,
    encode_error_code_response,
    encode_request_error,
    encode_response,
    parse_heartbeats,
    request_prefix,
)

log = structlog.get_logger(__name__)

RECEIVE_BYTES = 256 * 1024  # the most one read takes
#: how long a reader handles requests already read before it lets other tasks run: a tenth of a
#: millisecond is about ten heartbeats. The cost is coalescing (about ten answers per write
#: instead of all that were read); docs/performance.md has both sides measured
REQUEST_TURN_S = 0.0001
_ids = itertools.count(1)
#: ``_serve``'s "bytes received": the idle lane put them in the decoder already
_IN_DECODER = bytearray()


class CloseConnection(Exception):
    """The connection must be closed: its byte stream can no longer be trusted, or it idled."""

    def __init__(self, reason: str, *, level: int = logging.WARNING) -> None:
        super().__init__(reason)
        self.level = level


class Connection:
    #: how the requests the idle lane answers begin (``_answer_heartbeat``); None: it answers none
    LANE_PREFIX: ClassVar[bytes | None] = request_prefix(ApiKey.HEARTBEAT)

    def __init__(self, ctx: BrokerContext, stream: trio.SocketStream, endpoint: Endpoint, *,
                 lane: IdleLane | None = None) -> None:
        self._ctx = ctx
        self._stream = stream
        self._endpoint = endpoint
        self._fd = stream.socket.fileno()
        # the idle lane (broker/idle_lane.py): where the connection waits between requests, if
        # its bytes are the socket's own (not TLS) and it has requests the lane answers
        self._lane = lane if self.LANE_PREFIX is not None else None
        self._handed_back: trio.Event | None = None  # set when the lane gives the task back
        self._lane_failure: Exception | None = None  # why the lane gave it back, if it failed
        self._lane_eof = False  # the lane read the peer's end of stream
        self._lane_context: contextvars.Context | None = None  # the task's, for handlers
        self._last_read = 0.0  # trio time of the lane's last read: the idle clock
        self._unanswered: bytes | None = None  # a request the lane took out but left
        self._writer: ResponseWriter | None = None
        self._client: ClientConnection | None = None
        # PLAINTEXT until the listener's security has opened it (TLS, SASL)
        self._io: ConnectionStream = PlainStream(stream)
        self._sasl: SaslSession | None = None
        self._decoder = FrameDecoder(ctx.settings.max_request_bytes)
        self._idle = ctx.settings.connections_max_idle_ms / 1000
        self._read_timeout = ctx.settings.request_read_timeout_ms / 1000
        self._frame_deadline: float | None = None  # set once the next frame's first byte is in
        self._pool = ctx.request_memory
        self._read_ahead = min(SMALL_REQUEST_BYTES, self._pool.capacity)
        self._held = 0  # bytes reserved in the pool: covers what the decoder buffers
        self._waiting_scope: trio.CancelScope | None = None  # set while waiting for a request
        self._stopped = False  # stop_waiting was called
        self.id = next(_ids)
        try:
            self.peer = "{}:{}".format(*stream.socket.getpeername()[:2])
        except OSError:
            self.peer = "?"
        self._log = log.bind(conn=self.id, peer=self.peer)

    def stop_waiting(self) -> None:
        """Shutdown (``ctx.stopping`` is set) or the writer failed: stop waiting for requests.
        A request in hand is finished and answered first."""
        self._stopped = True
        if self._waiting_scope is not None:
            self._waiting_scope.cancel()

    async def run(self) -> None:
        self._log.debug("connection.opened")
        self._client = client = ClientConnection(
            self.id, self.peer.rpartition(":")[0], self._stream.socket,
            listener=self._endpoint.name)
        CLIENT_CONNECTION.set(client)
        self._writer = writer = ResponseWriter(self._send, timeout=self._idle,
                                               on_failure=self.stop_waiting)
        reason = "closed by peer"
        failure: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(writer.run)
                try:
                    await self._secure(client)
                    reason = await self._serve(writer)
                except (CloseConnection, ResponseTimeoutError, trio.BrokenResourceError,
                        trio.ClosedResourceError) as exc:
                    failure = exc
                finally:
                    writer.close()  # the writer sends what is queued, then returns
            failure = failure or writer.failure
            if isinstance(failure, CloseConnection | ResponseTimeoutError):
                reason = str(failure)
                level = failure.level if isinstance(failure, CloseConnection) else logging.WARNING
                self._log.log(level, "connection.dropped", reason=reason)
            elif failure is not None:
                reason = f"broken: {failure}"
        finally:
            self._release(self._held)
            self._ctx.groups.connection_closed(self.id)
            with trio.CancelScope(shield=True):
                await self._io.aclose()
            self._log.debug("connection.closed", reason=reason)

    async def _secure(self, client: ClientConnection) -> None:
        """A TLS or SASL listener's handshake, before the first request: it picks the stream
        the connection reads and writes (``self._io``) and its SASL session."""
        if self._ctx.listener_security is None:
            return
        try:
            self._io, self._sasl = await self._ctx.listener_security.open(
                self._endpoint, self._stream, client, self._read_timeout)
        except HandshakeError as exc:
            raise CloseConnection(str(exc), level=logging.INFO) from None
        SASL_SESSION.set(self._sasl)

    async def _send(self, pieces: Sequence[Piece]) -> None:
        # the writer is made before the handshake picks self._io: it sends through the stream
        # the connection has at the time
        await self._io.send(pieces)

    async def _serve(self, writer: ResponseWriter) -> str:
        """Read and handle requests one at a time, queueing each response on ``writer``, until
        the peer closes or the broker stops; why it ended."""
        turn_started = time.perf_counter()
        while True:
            payload, self._unanswered = self._unanswered, None
            try:
                if payload is None:
                    payload = self._decoder.next_frame()
            except FrameTooLargeError as exc:
                raise CloseConnection(str(exc)) from None
            if payload is None:
                if self._stopped:
                    data = None
                elif self._may_park(writer):
                    data = await self._park()
                else:
                    data = await self._receive()
                if data is None:
                    if writer.failure is not None:
                        raise writer.failure
                    return "stopping"
                if data is _IN_DECODER:
                    turn_started = time.perf_counter()
                    continue
                if not data:
                    if self._decoder.buffered:
                        return f"closed by peer {self._decoder.buffered} bytes into a request"
                    return "closed by peer"
                try:
                    self._decoder.receive_data(data)
                except FrameTooLargeError as exc:
                    raise CloseConnection(str(exc)) from None
                turn_started = time.perf_counter()  # receiving let the other tasks run
                continue
            if time.perf_counter() - turn_started >= REQUEST_TURN_S:
                # a request read together with the ones just handled, after a whole turn: the
                # other connections' turn first. (Checked here, not after each request: a
                # request with nothing read behind it goes straight back to waiting.)
                await trio.lowlevel.cancel_shielded_checkpoint()
                turn_started = time.perf_counter()
            self._frame_deadline = None  # the next frame's clock starts when it is read
            pieces = await self._respond(payload)
            if pieces:
                await writer.put(pieces)
            if self._lane is not None:
                lane_started = time.perf_counter()
                # the heartbeats waiting meanwhile, before this connection's next request
                self._lane.serve_ready(BETWEEN_REQUESTS_TURN_S)
                turn_started += time.perf_counter() - lane_started  # not this connection's turn
            if self._sasl is not None and self._sasl.failed:
                # sasl.failed has said why, once: a flood of failures logs one line each
                raise CloseConnection("SASL authentication failed or out of order",
                                      level=logging.DEBUG)
            del payload, pieces  # not kept alive while waiting for the next request
            self._release(self._held - self._decoder.buffered)  # the handled request's bytes
            if self._ctx.stopping:
                return "stopping"

    def _may_park(self, writer: ResponseWriter) -> bool:
        """Whether to wait in the idle lane: between requests, the bytes the socket's own, and
        the answers queued so far written (here, at once, if the socket takes them all)."""
        return (
            self._lane is not None
            and not self._decoder.buffered
            and self._frame_deadline is None
            and isinstance(self._io, PlainStream)
            and not self._ctx.stopping
            and writer.flush_now(self._fd)
        )

    async def _park(self) -> bytes | bytearray | None:
        """Wait in the idle lane until it hands the connection back: ``_IN_DECODER`` when it
        left requests there for ``_respond``, b"" at the peer's end of stream, None when
        stopping. The idle limit runs from the lane's last read for this connection, the read
        deadline from the start of a request the lane has read in part."""
        assert self._lane is not None
        handed_back = self._handed_back = trio.Event()
        self._lane_failure = None
        self._lane_eof = False
        self._lane_context = contextvars.copy_context()
        self._last_read = trio.current_time()
        self._lane.add(self._fd, self)
        try:
            while not handed_back.is_set():
                with trio.CancelScope(deadline=self._lane_deadline()) as scope:
                    self._waiting_scope = scope
                    await handed_back.wait()
                self._waiting_scope = None
                if handed_back.is_set():
                    break
                if self._stopped:
                    return None
                if trio.current_time() < self._lane_deadline():
                    continue
                if self._frame_deadline is not None:
                    raise CloseConnection(self._read_timeout_reason(waited_for_memory=False))
                idle_ms = round(self._idle * 1000)
                raise CloseConnection(f"idle for connections_max_idle_ms={idle_ms}",
                                      level=logging.INFO)
        finally:
            self._waiting_scope = None
            self._lane.discard(self._fd)
            self._lane_context = None
        if self._lane_failure is not None:
            raise self._lane_failure
        return b"" if self._lane_eof else _IN_DECODER

    def _lane_deadline(self) -> float:
        """When the parked task wakes to close the connection: the read deadline of a request
        the lane has read in part, else the idle limit from the lane's last read."""
        if self._frame_deadline is not None:
            return self._frame_deadline
        return self._last_read + self._idle

    def hand_back(self, error: Exception | None = None) -> None:
        """The idle lane gives the connection back to its task."""
        if error is not None:
            self._lane_failure = error
        if self._handed_back is not None:
            self._handed_back.set()

    def on_lane_turn(self, until: float) -> Turn:
        """The idle lane's turn for this connection: answer the whole requests at the
        decoder's front that ``_answer_heartbeat`` answers, reading first if there are none, and
        write the answers straight to the socket. It stays in the lane with a request read in
        part (under the read deadline) or whole ones it had no time for; it leaves if anything
        is for the task -- another request, the end of stream, an answer the socket did not
        take whole, no request memory to spare."""
        if self._ctx.stopping:
            return Turn.LEAVE
        decoder = self._decoder
        try:
            if decoder.whole_frame_starts_with(b""):
                answers = self._answer_decoded(until)
            else:
                data = self._lane_read()
                if isinstance(data, Turn):
                    return data
                answers = self._answer_read(data, until)
        except FrameTooLargeError as exc:  # before any answer: the decoder takes bytes first
            self._lane_failure = CloseConnection(str(exc))
            return Turn.LEAVE
        finally:
            self._release(self._held - decoder.buffered)
        if answers:
            assert self._writer is not None
            try:
                left = write_now(self._fd, answers)
            except trio.BrokenResourceError as exc:
                self._lane_failure = exc
                return Turn.LEAVE
            if left:
                self._writer.put_nowait(left)  # the writer waits for the socket, in order
                return Turn.LEAVE
        if self._unanswered is not None or decoder.failing:
            return Turn.LEAVE
        if decoder.whole_frame_starts_with(b""):  # the turn ended, or another request is next
            assert self.LANE_PREFIX is not None
            return Turn.AGAIN if decoder.whole_frame_starts_with(self.LANE_PREFIX) else Turn.LEAVE
        if not decoder.buffered:
            self._frame_deadline = None
            return Turn.WAIT
        if (decoder.next_frame_bytes or 0) > self._read_ahead:
            return Turn.LEAVE  # a large request: the task reserves it whole, as it reads it
        if self._frame_deadline is None:  # the rest of a small request: its deadline runs
            deadline = self._start_read_deadline()
            if self._waiting_scope is not None:  # the parked task wakes for it
                self._waiting_scope.deadline = deadline
        return Turn.WAIT

    def _lane_read(self) -> bytes | Turn:
        """What the socket has, read into request memory reserved for it (``_held``: the
        caller releases what the decoder does not keep); what the lane is to do if nothing was
        read."""
        if not self._pool.try_reserve_spare(self._read_ahead):
            # bytes are waiting and no read-ahead is to spare: the task reserves what it must
            # (waiting for room if need be), and the request's read deadline starts now
            self._start_read_deadline()
            return Turn.LEAVE
        self._held += self._read_ahead
        try:
            data = self._io.read_now(self._read_ahead)
        except trio.BrokenResourceError as exc:
            self._lane_failure = exc
            data = b""
        if data is None:
            return Turn.WAIT  # nothing there after all
        if not data:
            self._lane_eof = self._lane_failure is None
            return Turn.LEAVE
        self._last_read = trio.current_time()
        return data

    def _answer_read(self, data: bytes, until: float) -> list[bytes]:
        """The answers to what a read brought, and the rest kept in the decoder. A read of
        whole Heartbeats only (a quiet connection's one) is answered from the bytes read: the
        decoder is not asked."""
        decoder = self._decoder
        if not decoder.buffered:  # else the rest of a request read in part is in data
            heartbeats, end = parse_heartbeats(data, 0, len(data), VISIT_REQUESTS)
            if end == len(data):  # whole Heartbeats only, a turn's at most
                answers, taken, later = self._answer(heartbeats, 0, until)
                if taken < end:  # whole Heartbeats left: none of them can raise
                    decoder.receive_data(memoryview(data)[taken:])
                    if not later:  # refused: the task answers it
                        self._unanswered = decoder.next_frame()
                return answers
        decoder.receive_data(data)
        return self._answer_decoded(until)

    def _answer_decoded(self, until: float) -> list[bytes]:
        """The answers to the Heartbeats at the decoder's front; one ``_answer`` left to the
        task, or one ``parse_heartbeats`` does not take, is taken into ``_unanswered`` for
        ``_respond``."""
        decoder = self._decoder
        buffer, start, stop = decoder.front()
        heartbeats, _ = parse_heartbeats(buffer, start, stop, VISIT_REQUESTS)
        answers, taken, later = self._answer(heartbeats, start, until)
        decoder.skip_to(taken)
        assert self.LANE_PREFIX is not None
        if not later and decoder.whole_frame_starts_with(self.LANE_PREFIX):
            self._unanswered = decoder.next_frame()
        return answers

    def _answer(self, heartbeats: list[HeartbeatFrame], start: int,
                until: float) -> tuple[list[bytes], int, bool]:
        """The answers to ``heartbeats`` (``parse_heartbeats``'s, from ``start``) in order,
        until the lane's turn ends at ``until`` (one at least), or one ``_answer_heartbeat``
        leaves to the task (refused, or before a SASL listener's login); where the answered
        ones end; and whether the rest stays in the lane (the turn ended, or a whole
        ``VISIT_REQUESTS`` was answered) rather than going to the task."""
        if self._sasl is not None and not self._sasl.admits(ApiKey.HEARTBEAT):
            return [], start, False
        if self._ctx.security.authorizer is None:
            return self._answer_each(heartbeats, start, until)
        # the authorizer reads the principal from the connection's context variables; without
        # one nothing on this path does, and the switch of context is saved
        assert self._lane_context is not None
        return self._lane_context.run(self._answer_each, heartbeats, start, until)

    def _answer_each(self, heartbeats: list[HeartbeatFrame], start: int,
                     until: float) -> tuple[list[bytes], int, bool]:
        answers: list[bytes] = []
        taken = start
        for end, correlation_id, client_id, group_id, member_id, generation in heartbeats:
            answer = self._answer_heartbeat(correlation_id, client_id, group_id, member_id,
                                            generation)
            if answer is None:
                return answers, taken, False
            answers.append(answer)
            taken = end
            if time.perf_counter() >= until:
                return answers, taken, True
        return answers, taken, len(heartbeats) == VISIT_REQUESTS

    def _answer_heartbeat(self, correlation_id: int, client_id: str | None, group_id: str,
                          member_id: str, generation: int) -> bytes | None:
        """A Heartbeat's answer, at once and without an await, as ``_respond`` would answer
        it; None to leave it to ``_respond`` (the authorizer refuses it)."""
        started = time.perf_counter()
        ctx = self._ctx
        if not ctx.security.allowed(ApiKey.HEARTBEAT, ResourceType.GROUP, group_id):
            return None
        if self._client is not None:
            self._client.client_id = client_id
        code = ctx.groups.heartbeat_now(group_id, member_id, generation)
        if ctx.metrics is not None:
            ctx.metrics.answered("Heartbeat", time.perf_counter() - started, int(code))
        return encode_error_code_response(correlation_id, code)

    async def _receive(self) -> bytes | None:
        """The next bytes from the peer, read into reserved memory; b"" at its end of stream;
        None when stopping (or the writer failed).

        Bytes already there are taken without a cancel scope (a pipelining client's next
        requests). Waiting is done in one scope whose deadline is the idle limit while no
        request has started, then the request's read deadline; ``stop_waiting`` cancels it."""
        if self._ctx.stopping:
            return None
        between_requests = self._frame_deadline is None and not self._decoder.buffered
        if between_requests:
            data = self._read_ahead_now()
            if data is not None:
                await trio.lowlevel.cancel_shielded_checkpoint()  # let other tasks run between
                return data
        with trio.CancelScope() as scope:
            self._waiting_scope = scope
            try:
                if between_requests:
                    scope.deadline = trio.current_time() + self._idle
                    data = await self._receive_request_start()
                    if data is not None:
                        return data
                    between_requests = False
                scope.deadline = self._start_read_deadline()
                size = await self._reserve_for_read()
                return await self._io.receive_some(size)
            finally:
                self._waiting_scope = None
        if self._stopped:
            return None
        if between_requests:
            idle_ms = round(self._idle * 1000)
            raise CloseConnection(f"idle for connections_max_idle_ms={idle_ms}", level=logging.INFO)
        raise CloseConnection(self._read_timeout_reason())

    async def _receive_request_start(self) -> bytes | None:
        """Wait for the peer's next request and read its start (b"" if it closed) into a
        read-ahead reserved out of room to spare -- it takes most requests whole. Idle, the
        connection holds no memory: it reserves only once its socket is readable. None when
        there is no room to spare once bytes are waiting: the caller then reserves what it
        must, waiting if need be. Either way the request's read deadline starts here."""
        while True:
            await self._io.wait_readable()
            if not self._pool.try_reserve_spare(self._read_ahead):
                self._frame_deadline = trio.current_time() + self._read_timeout
                return None
            data = self._read_into_reserved()
            if data is not None:
                return data

    def _read_ahead_now(self) -> bytes | None:
        """The start of the next request if bytes are there and the pool has a read-ahead to
        spare for them; else None, holding nothing."""
        if not self._pool.try_reserve_spare(self._read_ahead):
            return None
        return self._read_into_reserved()

    def _read_into_reserved(self) -> bytes | None:
        """Read what is there into the read-ahead just reserved (the request's read deadline
        starts then); None, and the read-ahead given back, if nothing is."""
        self._held += self._read_ahead
        data = self._io.read_now(self._read_ahead)
        if data is None:
            self._release(self._read_ahead)
        else:
            self._frame_deadline = trio.current_time() + self._read_timeout
        return data

    async def _reserve_for_read(self) -> int:
        """Reserve memory for the next read, waiting for room if need be; how many bytes the
        read may take. A frame whose length is known gets its whole size reserved at once (all
        or nothing), so a connection holding its reservation can always read its frame to the
        end; before that, the 4-byte length prefix (as Kafka reads it). On top, near a frame's
        end, a read-ahead into the next requests if the pool has room to spare."""
        buffered = self._decoder.buffered
        frame = self._decoder.next_frame_bytes
        ahead = buffered + self._read_ahead - self._held
        if (
            ahead > 0
            and (frame is None or frame - buffered < self._read_ahead)
            and self._pool.try_reserve_spare(ahead)
        ):
            self._held += ahead
        want = 4 if frame is None else frame
        if want > self._held:
            need = want - self._held
            if not self._pool.try_reserve(need):
                await self._pool.reserve(need)
            self._held = want
        return min(RECEIVE_BYTES, self._held - buffered)

    def _release(self, size: int) -> None:
        if size > 0:
            self._pool.release(size)
            self._held -= size

    def _start_read_deadline(self) -> float:
        """When the request being read must have arrived whole: ``request_read_timeout_ms``
        from now, unless its clock already runs."""
        if self._frame_deadline is None:
            self._frame_deadline = trio.current_time() + self._read_timeout
        return self._frame_deadline

    def _read_timeout_reason(self, *, waited_for_memory: bool = True) -> str:
        timeout_ms = round(self._read_timeout * 1000)
        frame = self._decoder.next_frame_bytes
        got = f"{self._decoder.buffered} of {frame if frame else '?'} bytes read"
        if waited_for_memory and self._held < (frame or 4):  # it had no room to read into
            got += f"; waited for request memory ({self._pool.used} of {self._pool.capacity} "
            got += "bytes reserved)"
        return f"request not read within request_read_timeout_ms={timeout_ms} ({got})"

    def _admit(self, api_key: int, name: str) -> None:
        """On a SASL listener, before authentication, only the SASL exchange (and
        ApiVersions) is answered: anything else closes the connection with nothing done."""
        if self._sasl is not None and not self._sasl.admits(api_key):
            raise CloseConnection(f"{name} before SASL authentication", level=logging.INFO)

    async def _respond(self, payload: bytes) -> Sequence[Piece]:
        """Decode and handle one request; the frame pieces to send (none for acks=0)."""
        try:
            request = decode_request(payload)
        except RequestDecodeError as exc:
            if exc.header is None:
                raise CloseConnection(str(exc)) from None
            self._admit(exc.header.api_key, f"API {exc.header.api_key}")
            self._log.info("request.rejected", error=exc.error_code.name, reason=str(exc),
                           correlation_id=exc.header.correlation_id)
            if (
                exc.error_code is ErrorCode.UNSUPPORTED_VERSION
                and exc.header.api_key == ApiKey.API_VERSIONS
            ):
                answer = supported_apis(ErrorCode.UNSUPPORTED_VERSION)
                return [encode_response(exc.header.correlation_id, answer)]
            return [encode_request_error(exc.header.correlation_id, exc.error_code, str(exc))]
        except ProtocolError as exc:
            raise CloseConnection(str(exc)) from None
        header = request.header
        self._admit(request.api.key, request.api.name)
        client = CLIENT_CONNECTION.get()
        if client is not None:  # quotas are per client id
            client.client_id = header.client_id
        metrics = self._ctx.metrics  # when on, its handlers count and time each request
        handler = (HANDLERS if metrics is None else metrics.handlers)[request.api.key]
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
