"""Brokers talking to brokers: the same wire protocol as clients, from trio.

``BrokerLink`` is one connection to one broker, one request at a time (the receiving broker
handles a connection's requests in order anyway). ``RequestQueue`` is Kafka's controller channel
for one broker: a task that sends what is queued, in order, reconnecting and retrying until it
is answered or the queue is closed -- so a broker that was slow to start, or restarted, still
gets every LeaderAndIsr and UpdateMetadata meant for it, in the order they were decided.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from broker.security.setup import client_tls_context
from broker.settings import BrokerSettings
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    ClusterAuthorizationFailedError,
    ErrorCode,
    ProtocolError,
    error_for,
)
from protocol.framing import FrameDecoder
from protocol.sasl import SaslClientMechanism, SaslMechanismError
from protocol.wire import decode_response_body, decode_response_envelope, encode_request

log = structlog.get_logger(__name__)

RETRY_BACKOFF = 0.1
MAX_RETRY_BACKOFF = 1.0


class LinkError(Exception):
    """The connection failed or answered something unreadable; the request may be retried."""


@dataclass(frozen=True, repr=False)
class LinkSecurity:
    """How this broker connects to the inter-broker listener of the others: TLS trusting
    ``ssl_cafile``, and a SASL login with the broker's own credentials (never logged)."""

    tls: ssl.SSLContext | None
    settings: BrokerSettings

    @classmethod
    def of(cls, settings: BrokerSettings) -> LinkSecurity:
        protocol = settings.inter_broker_endpoint.protocol
        return cls(client_tls_context(settings) if protocol.uses_tls else None, settings)

    def __repr__(self) -> str:
        return f"LinkSecurity({self.settings.inter_broker_endpoint.name})"

    async def connect(self, host: str, port: int, link: BrokerLink) -> trio.abc.Stream:
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        if self.tls is not None:
            tls = trio.SSLStream(stream, self.tls, server_hostname=host)
            await tls.do_handshake()
            stream = tls
        if self.settings.inter_broker_endpoint.protocol.uses_sasl:
            await self._log_in(stream, link)
        return stream

    async def _log_in(self, stream: trio.abc.Stream, link: BrokerLink) -> None:
        settings = self.settings
        password = settings.inter_broker_sasl_password
        assert settings.inter_broker_sasl_username and password  # checked by load_settings
        mechanism = SaslClientMechanism(settings.sasl_mechanism_inter_broker_protocol,
                                        settings.inter_broker_sasl_username, password.reveal())
        answer = await link.exchange(stream, ApiKey.SASL_HANDSHAKE,
                                     {"mechanism": mechanism.mechanism})
        if answer["error_code"]:
            raise LinkError(f"SASL handshake refused: {ErrorCode(answer['error_code']).name}")
        token: bytes | None = mechanism.first()
        while token is not None:
            answer = await link.exchange(stream, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            if answer["error_code"]:
                # a misconfiguration replication cannot get past: say so above debug level
                log.warning("inter_broker.login_refused", user=mechanism.username,
                            mechanism=mechanism.mechanism, peer=f"{link.host}:{link.port}")
                raise LinkError(f"SASL login as {mechanism.username!r} refused: "
                                f"{error_for(answer['error_code'], answer['error_message'])}")
            try:
                token = mechanism.respond(answer["auth_bytes"])
            except SaslMechanismError as exc:
                raise LinkError(str(exc)) from None


class BrokerLink:
    def __init__(self, host: str, port: int, *, client_id: str, timeout: float,
                 security: LinkSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout = timeout
        self._security = security
        self._stream: trio.abc.Stream | None = None
        self._decoder = FrameDecoder()
        self._ids = itertools.count(1)

    async def request(self, api: ApiKey, body: dict[str, Any], *, version: int = 0
                      ) -> dict[str, Any]:
        """Send one request and wait for its answer. LinkError on connection trouble (the
        connection is dropped); a request-level error answer raises its BrokerError."""
        try:
            with trio.fail_after(self._timeout):
                if self._stream is None:
                    self._decoder = FrameDecoder()
                    if self._security is None:
                        self._stream = await trio.open_tcp_stream(self.host, self.port)
                    else:
                        self._stream = await self._security.connect(self.host, self.port, self)
                return await self.exchange(self._stream, api, body, version=version)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError, ProtocolError,
                LinkError) as exc:
            await self.aclose()
            raise LinkError(f"{self.host}:{self.port}: {type(exc).__name__}: {exc}") from None

    async def exchange(self, stream: trio.abc.Stream, api: ApiKey, body: dict[str, Any], *,
                       version: int = 0) -> dict[str, Any]:
        """One request and its answer on ``stream``."""
        correlation_id = next(self._ids) & 0x7FFFFFFF
        await stream.send_all(encode_request(api, version, correlation_id, self._client_id, body))
        payload = await self._next_frame(stream)
        got_id, body_value = decode_response_envelope(payload)
        if got_id != correlation_id:
            raise LinkError(f"answer to request {got_id}, expected {correlation_id}")
        return decode_response_body(api, version, body_value)

    async def _next_frame(self, stream: trio.abc.Stream) -> bytes:
        while True:
            payload = self._decoder.next_frame()
            if payload is not None:
                return payload
            data = await stream.receive_some(256 * 1024)
            if not data:
                raise LinkError("closed by the peer")
            self._decoder.receive_data(data)

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


Answer = Callable[[dict[str, Any] | BaseException], Awaitable[None] | None]
#: the version of LeaderAndIsr, UpdateMetadata and StopReplica the controller sends: v1 names
#: the receiving broker's registration (broker_epoch)
CONTROL_VERSION = 1


class RequestQueue:
    """Requests to one broker, sent in order by ``run``; each retried until answered (or
    until the broker is given up: ``close``) -- also when refused for lack of ClusterAction,
    which an operator may grant at any time. ``on_answer``, if given, sees the body or the
    BrokerError of any other request-level refusal."""

    def __init__(self, broker_id: int, host: str, port: int, *, client_id: str,
                 timeout: float, security: LinkSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.link = BrokerLink(host, port, client_id=client_id, timeout=timeout,
                               security=security)
        self._send, self._receive = trio.open_memory_channel[
            tuple[ApiKey, dict[str, Any], Answer | None, int]](math.inf)
        self._refused = False  # the last request was refused for lack of ClusterAction
        self._closed = False

    def put(self, api: ApiKey, body: dict[str, Any], on_answer: Answer | None = None, *,
            version: int = 0) -> None:
        # a closed queue: the broker was given up; a later controller tells it everything
        with contextlib.suppress(trio.ClosedResourceError):
            self._send.send_nowait((api, body, on_answer, version))

    def close(self) -> None:
        self._closed = True
        self._send.close()

    async def run(self) -> None:
        try:
            async for api, body, on_answer, version in self._receive:
                result = await self._deliver(api, body, version)
                if on_answer is not None:
                    done = on_answer(result)
                    if done is not None:
                        await done
        finally:
            await self.link.aclose()

    async def _deliver(self, api: ApiKey, body: dict[str, Any], version: int
                       ) -> dict[str, Any] | BaseException:
        backoff = RETRY_BACKOFF
        while True:
            try:
                answer = await self.link.request(api, body, version=version)
            except ClusterAuthorizationFailedError as exc:
                self._was_refused(api, exc)
                failure: BaseException = exc
            except BrokerError as exc:
                return exc
            except LinkError as exc:
                log.debug("controller.send_retry", broker=self.broker_id, api=api.name,
                          reason=str(exc))
                failure = exc
            else:
                if self._refused:
                    self._refused = False
                    log.info("controller.request_accepted", broker=self.broker_id,
                             api=api.name)
                return answer
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_RETRY_BACKOFF)
            if self._closed:  # given up: not sent to a broker that died or came back since
                return failure

    def _was_refused(self, api: ApiKey, exc: ClusterAuthorizationFailedError) -> None:
        """The broker refused the sender's principal (no ClusterAction): retried like an
        unreachable broker, since an operator fixing super_users or the ACLs lets it through
        with no other event to send it again; said loudly once, until one is accepted."""
        if not self._refused:
            log.error("controller.request_refused", broker=self.broker_id, api=api.name,
                      error=exc.code.name, reason=str(exc), retrying=True)
        self._refused = True
