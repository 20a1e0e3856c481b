"""Sockets to brokers, driven by one ``selectors`` loop in the caller's thread.

``NetworkClient`` keeps one non-blocking connection per broker node. ``send`` queues a request on
a node's connection (connecting first if needed) and returns a ``Future`` of the validated
response body; ``poll(timeout)`` moves bytes both ways and completes futures -- their callbacks
run inside ``poll``. Nothing happens between calls: no thread runs behind the caller.

On an SSL or SASL listener (``security``, client/security.py) a new connection does its TLS
handshake and SASL login once, before its first request, blocking for at most
``request_timeout_ms``; a refused certificate or login fails the connection's requests with that
error (not retriable).

Failures are per connection: a refused connect, a reset, an undecodable stream or a request past
its deadline closes that connection, fails every request queued on it with a retriable error
(``BrokerConnectionError`` or ``ClientTimeoutError``), and the node may be reconnected after a
backoff. Other connections carry on.

Reconnecting backs off as Kafka's clients do: a connection that ends before it was ever answered
(or never connected) is a failure, and the next attempt waits ``reconnect_backoff_ms``, doubled
for each failure in a row, up to ``reconnect_backoff_max_ms`` (``reconnect_delay``); the first
answer on a connection resets the count, and a connection that had been answered is reconnected
at once.

A failure retrying cannot help -- a refused TLS handshake or SASL login, a listener that speaks
another security protocol than ``security_protocol`` -- fails the connection's requests with
that error and is raised once more from the next ``poll`` (as Kafka's ConsumerNetworkClient
raises its metadata's authentication failure), so every call driving I/O -- a producer waiting
for metadata, a consumer's ``poll``, an admin call -- raises it at once instead of retrying until
its timeout. A new connection that closes before any answer, or whose first bytes are a TLS
alert, has its listener asked what it speaks (client/listener_probe.py): a mismatch becomes a
``SecurityProtocolMismatchError`` saying what the listener expects.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Any

from client.api_versions import VersionTable, negotiate, read_api_versions
from client.connection import BrokerConnection
from client.errors import (
    AuthenticationError,
    BrokerConnectionError,
    ClientTimeoutError,
    ConfigError,
    IllegalStateError,
    NoBrokersAvailableError,
    SecurityProtocolMismatchError,
    SslHandshakeError,
)
from client.future import Future
from client.listener_probe import TLS_ALERT_PREFIX, ListenerKind, mismatch_error, probe_listener
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, OdradekError, ProtocolError, error_for
from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from protocol.sasl import SaslClientMechanism, SaslMechanismError

_RECV_BYTES = 1 << 20
_SEND_BYTES = 4 << 20  # write at most this much per send() call, so huge buffers are not copied
#: a non-blocking socket (plain or TLS) that cannot move bytes right now
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
#: the longest one step of asking a listener what it speaks may take (client/listener_probe.py)
_PROBE_TIMEOUT_S = 2.0
#: the backoff doubles at most this many times (beyond, 2**n would overflow a float)
_MAX_DOUBLINGS = 32


def reconnect_delay(failures: int, backoff: float, backoff_max: float) -> float:
    """Seconds to wait before connecting again after ``failures`` failed connections in a row:
    none after none, then ``backoff``, doubled for each further failure, at most
    ``backoff_max`` (Kafka's reconnect.backoff.ms and reconnect.backoff.max.ms, without their
    random jitter)."""
    if failures <= 0:
        return 0.0
    return min(backoff * 2.0 ** min(failures - 1, _MAX_DOUBLINGS), backoff_max)


class ConnectionState(Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"


# Every move a node connection may make; anything else is a bug, raised with both states.
_MOVES: dict[ConnectionState, frozenset[ConnectionState]] = {
    ConnectionState.DISCONNECTED: frozenset({ConnectionState.CONNECTING}),
    ConnectionState.CONNECTING: frozenset(
        {ConnectionState.CONNECTED, ConnectionState.DISCONNECTED}
    ),
    ConnectionState.CONNECTED: frozenset({ConnectionState.DISCONNECTED}),
}


def parse_bootstrap(bootstrap: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` or a list of ``"host:port"`` -> ``[(host, port), ...]``.

    A bad address is a ConfigError naming the ``bootstrap`` setting, for every client alike."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    addresses = []
    for item in (i.strip() for i in items):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap: bootstrap address {item!r} is not HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ConfigError("bootstrap: bootstrap needs at least one HOST:PORT")
    return addresses


@dataclass(slots=True)
class _Pending:
    future: Future[dict[str, Any]]
    deadline: float
    api_key: ApiKey


class NodeConnection:
    """One broker's socket, its sans-IO ``BrokerConnection`` and the requests waiting on it."""

    def __init__(self, node_id: int, host: str, port: int, client_id: str, max_frame: int) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.state = ConnectionState.DISCONNECTED
        self.sock: socket.socket | None = None
        self.failures = 0  # connections in a row that ended before any answer, for the backoff
        self.retry_at = 0.0  # monotonic time before which no reconnect is tried
        self.ready = False  # this socket has been answered (or has logged in)
        self.received_bytes = 0  # bytes ever read from this socket
        self._client_id = client_id
        self._max_frame = max_frame
        self.protocol = BrokerConnection(client_id, max_frame_bytes=max_frame)
        self.pending: dict[int, _Pending] = {}  # by correlation id, oldest first
        self.out = bytearray()
        self.queued_bytes = 0  # bytes ever handed to ``out`` on this socket
        self.written_bytes = 0  # bytes ever written to the socket
        # Futures of requests with no response (acks=0): done once their last byte is written.
        self.unanswered: deque[tuple[int, Future[dict[str, Any]]]] = deque()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def move(self, to: ConnectionState) -> None:
        if to not in _MOVES[self.state]:
            raise IllegalStateError(f"node {self.node_id}: cannot move {self.state} -> {to}")
        self.state = to

    def reset_protocol(self) -> None:
        self.protocol = BrokerConnection(self._client_id, max_frame_bytes=self._max_frame)
        self.out = bytearray()
        self.queued_bytes = self.written_bytes = self.received_bytes = 0
        self.ready = False

    def take_outgoing(self) -> None:
        data = self.protocol.data_to_send()
        if data:
            self.out += data
            self.queued_bytes += len(data)

    def has_work(self) -> bool:
        return bool(self.pending or self.unanswered)


class NetworkClient:
    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        client_id: str = "odradek",
        request_timeout_ms: int = 30_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1_000,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        clock: Callable[[], float] = time.monotonic,
        security: SecurityConfig | None = None,
    ) -> None:
        self.client_id = client_id
        self._security = security or SecurityConfig()
        self._tls = self._security.tls_context()
        self.request_timeout = request_timeout_ms / 1000
        for name, value in (("reconnect_backoff_ms", reconnect_backoff_ms),
                            ("reconnect_backoff_max_ms", reconnect_backoff_max_ms)):
            if value < 0:
                raise ConfigError(f"{name}={value} is invalid; it must be at least 0")
        self._backoff = reconnect_backoff_ms / 1000
        self._backoff_max = reconnect_backoff_max_ms / 1000
        #: a failure retrying cannot help, raised by the next ``poll`` (then forgotten)
        self._fatal: Exception | None = None
        #: addresses that have answered this client: a close there is not a protocol mismatch
        self._answered: set[str] = set()
        #: what each listener asked (client/listener_probe.py) said it speaks
        self._listener_kinds: dict[str, ListenerKind] = {}
        self._max_frame = max_frame_bytes
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        # every read lands here: a fresh buffer this large per recv is mapped and faulted in by
        # the kernel each time (0.2-0.4 ms per 256 KiB read, against 25 us into this one)
        self._received = bytearray(_RECV_BYTES)
        self._received_view = memoryview(self._received)
        self._nodes: dict[int, NodeConnection] = {}
        #: what each connected node said it speaks (ApiVersions), asked once per connection
        self._api_versions: dict[int, VersionTable] = {}
        self._asking_versions: set[int] = set()
        #: why asking a node failed (its connection did), raised once by ``api_version``
        self._versions_errors: dict[int, BaseException] = {}
        self._dedicated: set[int] = set()  # connections of their own, never least loaded
        #: told the node id of every connection that closes or fails, after its requests fail
        self.closed_listeners: list[Callable[[int], None]] = []
        # Bootstrap addresses get negative ids until metadata names the real brokers.
        for i, (host, port) in enumerate(parse_bootstrap(bootstrap)):
            self._add_node(-1 - i, host, port)
        self._closed = False

    # ------------------------------------------------------------------------------ nodes

    def _add_node(self, node_id: int, host: str, port: int) -> None:
        self._nodes[node_id] = NodeConnection(node_id, host, port, self.client_id, self._max_frame)

    def set_brokers(self, brokers: dict[int, tuple[str, int]]) -> None:
        """Learn the brokers metadata named; a broker whose address changed is reconnected."""
        for node_id, (host, port) in brokers.items():
            node = self._nodes.get(node_id)
            if node is not None and (node.host, node.port) != (host, port):
                self._close_node(node, BrokerConnectionError(f"node {node_id} moved"))
                del self._nodes[node_id]
                node = None
            if node is None:
                self._add_node(node_id, host, port)

    def set_dedicated_node(self, node_id: int, host: str, port: int) -> None:
        """A connection of its own to a broker, never chosen by ``least_loaded_node``: a group
        coordinator's (as Kafka keeps one), so a JoinGroup held for a whole rebalance does not
        queue fetches and metadata behind it, and fetches do not delay heartbeats."""
        self._dedicated.add(node_id)
        self.set_brokers({node_id: (host, port)})

    def in_flight(self, node_id: int) -> int:
        node = self._nodes.get(node_id)
        return 0 if node is None else len(node.pending) + len(node.unanswered)

    def least_loaded_node(self, avoid: int | None = None) -> int:
        """A node to ask for metadata: connected with the fewest requests waiting, else one that
        may be (re)connected now, else the one whose backoff ends first. Real brokers are
        preferred to bootstrap addresses. ``avoid`` (one whose last answer was behind the
        cluster) is taken only when there is no other."""
        shared = [n for n in self._nodes.values() if n.node_id not in self._dedicated]
        if not shared:
            raise NoBrokersAvailableError("no broker addresses are known")
        others = [n for n in shared if n.node_id != avoid]
        shared = others or shared
        now = self._clock()

        def rank(node: NodeConnection) -> tuple[int, float, int, int]:
            connected = node.state is ConnectionState.CONNECTED
            usable = connected or node.state is ConnectionState.CONNECTING or node.retry_at <= now
            return (
                0 if connected else 1 if usable else 2,
                0.0 if usable else node.retry_at,
                0 if node.node_id >= 0 else 1,
                len(node.pending),
            )

        return min(shared, key=rank).node_id

    # ----------------------------------------------------------------------------- versions

    def api_version(self, node_id: int, api: ApiKey, lowest: int, highest: int) -> int | None:
        """The version of ``api`` to speak with ``node_id``: the highest in both this client's
        ``lowest..highest`` and the broker's range (client/api_versions.py). None while the
        broker has not said: it is asked then, and the caller tries again after a ``poll``.
        Raises UnsupportedVersionError when the two ranges do not meet, and, once, the error
        the last asking failed with (a broker that is gone: its caller refreshes metadata, as
        for a request of its own that failed so)."""
        table = self._api_versions.get(node_id)
        if table is None:
            error = self._versions_errors.pop(node_id, None)
            if error is not None:
                raise error
            if node_id not in self._asking_versions and node_id in self._nodes:
                self._asking_versions.add(node_id)
                future = self.send(node_id, ApiKey.API_VERSIONS, {})
                future.add_done_callback(partial(self._on_api_versions, node_id))
            return None
        return negotiate(table, api, lowest, highest, self._nodes[node_id].address)

    @property
    def asking_versions(self) -> frozenset[int]:
        """The nodes whose ApiVersions answer (``api_version``) is still awaited."""
        return frozenset(self._asking_versions)

    def _on_api_versions(self, node_id: int, future: Future[dict[str, Any]]) -> None:
        self._asking_versions.discard(node_id)
        error = future.exception()
        if error is not None:
            self._versions_errors[node_id] = error
        elif node_id in self._nodes:
            self._api_versions[node_id] = read_api_versions(future.value)

    # ----------------------------------------------------------------------------- requests

    def send(
        self,
        node_id: int,
        api_key: ApiKey,
        body: dict[str, Any],
        *,
        expect_response: bool = True,
        timeout: float | None = None,
        api_version: int = 0,
    ) -> Future[dict[str, Any]]:
        """Queue a request for ``node_id``; the future resolves to its validated response body
        (``{}`` for a request with no response, once written). Written as far as the socket
        takes it at once; the rest goes out in ``poll``. ``api_version``: the version of the
        API's schema the body follows and the answer is checked against."""
        if self._closed:
            raise IllegalStateError("network client is closed")
        node = self._nodes.get(node_id)
        future: Future[dict[str, Any]] = Future(self.poll)
        if node is None:
            future.fail(BrokerConnectionError(f"node {node_id} is not known"))
            return future
        correlation_id = node.protocol.send_request(
            api_key, body, api_version=api_version, expect_response=expect_response
        )
        node.take_outgoing()
        if expect_response:
            deadline = self._clock() + (self.request_timeout if timeout is None else timeout)
            node.pending[correlation_id] = _Pending(future, deadline, api_key)
        else:
            node.unanswered.append((node.queued_bytes, future))
        if node.state is ConnectionState.DISCONNECTED:
            if node.retry_at <= self._clock():
                self._connect(node)
        elif node.state is ConnectionState.CONNECTED:
            self._write(node)
        return future

    def poll(self, timeout: float = 0.0) -> None:
        """Wait up to ``timeout`` seconds for socket events; handle them; expire requests."""
        now = self._clock()
        wake = now + max(timeout, 0.0)
        for node in list(self._nodes.values()):
            if node.state is ConnectionState.DISCONNECTED and node.has_work():
                if node.retry_at <= now:
                    self._connect(node)
                else:
                    wake = min(wake, node.retry_at)
            for pending in node.pending.values():
                wake = min(wake, pending.deadline)
        wait = max(0.0, wake - self._clock())
        if self._selector.get_map():
            events = self._selector.select(wait)
        else:
            time.sleep(wait)  # nothing to watch: the caller asked to wait, so wait
            events = []
        for key, mask in events:
            node = key.data
            if node.sock is not key.fileobj:
                continue  # closed by an earlier event in this batch
            if node.state is ConnectionState.CONNECTING:
                self._finish_connect(node)
                continue
            if mask & selectors.EVENT_WRITE:
                self._write(node)
            if mask & selectors.EVENT_READ and node.state is ConnectionState.CONNECTED:
                self._read(node)
        self._expire(self._clock())
        if self._fatal is not None:
            fatal, self._fatal = self._fatal, None
            raise fatal

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for node in self._nodes.values():
            self._close_node(node, BrokerConnectionError("client closed"))
        self._selector.close()

    def flush_writes(self, timeout: float) -> None:
        """Drive I/O until every queued byte is written (acks=0 requests), or the timeout."""
        deadline = self._clock() + timeout
        while any(n.unanswered for n in self._nodes.values()):
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            self.poll(remaining)

    # ------------------------------------------------------------------------------ sockets

    def _connect(self, node: NodeConnection) -> None:
        node.move(ConnectionState.CONNECTING)
        try:
            infos = socket.getaddrinfo(node.host, node.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, sockaddr = infos[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            self._fail_connect(node, exc)
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        node.sock = sock
        code = sock.connect_ex(sockaddr)
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            self._fail_connect(node, OSError(code, os.strerror(code)))
            return
        self._selector.register(sock, selectors.EVENT_WRITE, node)

    def _finish_connect(self, node: NodeConnection) -> None:
        assert node.sock is not None
        code = node.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._fail_connect(node, OSError(code, os.strerror(code)))
            return
        if self._security.uses_tls or self._security.uses_sasl:
            try:
                self._secure(node)
            except (OSError, ProtocolError, OdradekError, SaslMechanismError) as exc:
                self._fail_secure(node, exc)
                return
        node.move(ConnectionState.CONNECTED)
        if self._security.uses_sasl:
            self._mark_ready(node)  # logged in: the listener speaks our protocol
        self._write(node)

    def _secure(self, node: NodeConnection) -> None:
        """The TLS handshake and the SASL login on a connected socket, before any request.
        Done blocking, bounded by ``request_timeout_ms``, once per connection."""
        sock = node.sock
        assert sock is not None
        self._selector.unregister(sock)
        sock.settimeout(self.request_timeout)
        if self._tls is not None:
            node.sock = None  # wrap_socket takes the socket over, closing it on failure
            sock = self._tls.wrap_socket(sock, server_hostname=node.host)
            node.sock = sock
        if self._security.uses_sasl:
            self._log_in(sock, node.address)
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_WRITE, node)

    def _log_in(self, sock: socket.socket, address: str) -> None:
        """The SASL exchange; a refusal raises the broker's typed error, its message naming
        the user, the mechanism and the listener."""
        security = self._security
        assert security.sasl_plain_username and security.sasl_plain_password is not None
        mechanism = SaslClientMechanism(security.sasl_mechanism, security.sasl_plain_username,
                                        security.sasl_plain_password)
        protocol = BrokerConnection(self.client_id, max_frame_bytes=self._max_frame)
        answer = _exchange(sock, protocol, ApiKey.SASL_HANDSHAKE,
                           {"mechanism": mechanism.mechanism})
        code = answer["error_code"]
        if code == ErrorCode.ILLEGAL_SASL_STATE and not answer["mechanisms"]:
            plain = "SSL" if security.uses_tls else "PLAINTEXT"
            raise error_for(code, f"listener {address} does not use SASL (it answered "
                            f"SaslHandshake with ILLEGAL_SASL_STATE): this client's "
                            f"security_protocol is {security.security_protocol}; use {plain}")
        if code:
            enabled = ", ".join(answer["mechanisms"]) or "none"
            raise error_for(code, f"sasl_mechanism={mechanism.mechanism} is not enabled on "
                            f"listener {address} (enabled: {enabled})")
        token: bytes | None = mechanism.first()
        while token is not None:
            answer = _exchange(sock, protocol, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            if answer["error_code"]:
                reason = answer["error_message"] or ErrorCode(answer["error_code"]).info.meaning
                raise error_for(answer["error_code"], f"{reason} (user {mechanism.username!r}, "
                                f"mechanism {mechanism.mechanism}, listener {address})")
            try:
                token = mechanism.respond(answer["auth_bytes"])
            except SaslMechanismError as exc:
                raise AuthenticationError(
                    f"SASL {mechanism.mechanism} login as {mechanism.username!r} on listener "
                    f"{address}: the broker's answer does not verify: {exc}") from None

    def _fail_secure(self, node: NodeConnection, exc: Exception) -> None:
        """A refused login or certificate fails the connection's requests with the error itself
        (not retriable): asking again cannot help. A connection closed during the handshake or
        the login may be a listener of another protocol: it is asked."""
        error: Exception
        if isinstance(exc, ssl.SSLCertVerificationError):
            error = self._certificate_error(node, exc)
        elif isinstance(exc, OdradekError) and not isinstance(
                exc, ProtocolError | BrokerConnectionError):
            error = exc  # the broker's SASL refusal, an AuthenticationError
        else:
            # closed, reset or garbled while shaking hands or logging in: what does it speak?
            reason = exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else exc
            fallback = (SslHandshakeError(f"TLS handshake with listener {node.address} failed: "
                                          f"{reason}")
                        if isinstance(exc, ssl.SSLError) else
                        BrokerConnectionError(f"cannot log in to {node.address}: {exc}"))
            error = self._mismatch(node) or fallback
        self._close_node(node, error)

    def _certificate_error(self, node: NodeConnection, exc: ssl.SSLCertVerificationError
                           ) -> SslHandshakeError:
        """The broker's certificate was refused: ssl's reason, and the setting to look at."""
        why = exc.verify_message or exc.reason or str(exc)
        if "hostname mismatch" in why.lower() or "ip address mismatch" in why.lower():
            hint = (f"its certificate does not name {node.host!r}: connect by a name it has, or "
                    "set ssl_check_hostname=False")
        else:
            cafile = self._security.ssl_cafile or "the system's CAs"
            hint = f"ssl_cafile={cafile} does not trust its certificate"
        return SslHandshakeError(f"TLS handshake with listener {node.address} failed: "
                                 f"{exc.reason or 'CERTIFICATE_VERIFY_FAILED'}: {why}; {hint}")

    def _mismatch(self, node: NodeConnection) -> SecurityProtocolMismatchError | None:
        """Whether the listener speaks another security protocol than this client, asked of
        it (client/listener_probe.py) unless it told already; None if it matches, would not
        say, or has answered this client before (then it is a broker stopping, not a
        mismatch)."""
        if node.address in self._answered:
            return None
        kind = self._listener_kinds.get(node.address)
        if kind is None:
            security = self._security
            certificate = ((security.ssl_certfile, security.ssl_keyfile)
                           if security.ssl_certfile and security.ssl_keyfile else None)
            kind = probe_listener(node.host, node.port,
                                  min(self.request_timeout, _PROBE_TIMEOUT_S),
                                  client_id=self.client_id, certificate=certificate)
            if kind is None:
                return None
            self._listener_kinds[node.address] = kind
        return mismatch_error(node.address, kind, self._security)

    def _fail_connect(self, node: NodeConnection, exc: OSError) -> None:
        self._close_node(
            node, BrokerConnectionError(f"cannot connect to {node.address}: {exc.strerror or exc}")
        )

    def _mark_ready(self, node: NodeConnection) -> None:
        """The connection has been answered: the listener speaks this client's protocol, and
        the reconnect backoff starts over."""
        node.ready = True
        node.failures = 0
        self._answered.add(node.address)

    def _write(self, node: NodeConnection) -> None:
        sock = node.sock
        assert sock is not None
        while node.out:
            try:
                sent = sock.send(memoryview(node.out)[:_SEND_BYTES])
            except _WOULD_BLOCK:
                break
            except OSError as exc:
                self._close_node(node, BrokerConnectionError(f"{node.address}: {exc}"))
                return
            del node.out[:sent]
            node.written_bytes += sent
        while node.unanswered and node.unanswered[0][0] <= node.written_bytes:
            node.unanswered.popleft()[1].succeed({})
        self._watch(node)

    def _read(self, node: NodeConnection) -> None:
        sock = node.sock
        assert sock is not None
        while True:
            try:
                size = sock.recv_into(self._received)
            except _WOULD_BLOCK:
                return
            except ssl.SSLError as exc:
                self._close_node(node, self._tls_read_error(node, exc))
                return
            except OSError as exc:
                self._close_node(node, self._closed_error(node, f"{node.address}: {exc}"))
                return
            if not size:
                closed = self._closed_error(node, f"{node.address} closed the connection")
                self._close_node(node, closed)
                return
            first = node.received_bytes == 0
            node.received_bytes += size
            if first and self._tls is None and (
                    self._received[:2] == TLS_ALERT_PREFIX and not node.ready):
                self._close_node(node, self._mismatch(node) or SecurityProtocolMismatchError(
                    f"{node.address} answered with a TLS alert: the listener expects TLS "
                    f"(SSL or SASL_SSL), and this client's security_protocol is "
                    f"{self._security.security_protocol}"))
                return
            try:
                # the decoder copies what it keeps: the buffer is free again once it returns
                responses = node.protocol.receive_data(self._received_view[:size])
            except ProtocolError as exc:
                self._close_node(node, BrokerConnectionError(f"{node.address}: {exc}"))
                return
            if responses and not node.ready:
                self._mark_ready(node)
            for response in responses:
                if node.sock is not sock:
                    return  # a callback closed the connection; its requests were failed
                pending = node.pending.pop(response.correlation_id)
                if response.error is None:
                    assert response.body is not None
                    pending.future.succeed(response.body)
                else:
                    pending.future.fail(response.error)
            if node.sock is not sock:
                return
            # a TLS socket gives one record per recv: the next may be decrypted already
            if size < _RECV_BYTES and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                return

    def _closed_error(self, node: NodeConnection, text: str) -> BrokerConnectionError:
        """The error for a connection the broker closed or reset: a mismatch of security
        protocols if it had not answered yet and its listener says so, else retriable."""
        if node.ready or not node.written_bytes:
            return BrokerConnectionError(text)
        return self._mismatch(node) or BrokerConnectionError(text)

    def _tls_read_error(self, node: NodeConnection, exc: ssl.SSLError) -> OdradekError:
        """A TLS error after the handshake: before any answer it is the handshake's end (TLS
        1.3 reports a refused client certificate only then), after one a broken connection."""
        if node.ready:
            return BrokerConnectionError(f"{node.address}: {exc}")
        hint = ("; the listener wants a client certificate (ssl_certfile, ssl_keyfile)"
                if "CERTIFICATE_REQUIRED" in str(exc.reason) else "")
        return SslHandshakeError(f"TLS handshake with listener {node.address} failed: "
                                 f"{exc.reason or exc}{hint}")

    def _watch(self, node: NodeConnection) -> None:
        if node.sock is None:
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if node.out else 0)
        if self._selector.get_key(node.sock).events != events:
            self._selector.modify(node.sock, events, node)

    def _expire(self, now: float) -> None:
        for node in list(self._nodes.values()):
            expired = [c for c, p in node.pending.items() if p.deadline <= now]
            if not expired:
                continue
            for correlation_id in expired:
                pending = node.pending.pop(correlation_id)
                pending.future.fail(
                    ClientTimeoutError(
                        f"{pending.api_key.name} to {node.address} got no response in time"
                    )
                )
            # Responses come in order: the connection cannot skip the lost ones.
            self._close_node(node, BrokerConnectionError(f"{node.address} timed out"))
            # A bootstrap connection to the same broker, idle, would look alive: metadata
            # would be asked of a broker just cut off, and wait out a timeout of its own.
            for other in list(self._nodes.values()):
                if (other.node_id < 0 and other is not node and other.sock is not None
                        and (other.host, other.port) == (node.host, node.port)):
                    self._close_node(other, BrokerConnectionError(
                        f"{node.address} timed out on another connection"))

    def _close_node(self, node: NodeConnection, error: Exception) -> None:
        """Close the socket and fail everything queued on it. Safe to call in any state. A
        connection that ends before it was answered counts toward the reconnect backoff; an
        error retrying cannot help is kept for the next ``poll`` to raise."""
        was_open = node.sock is not None
        self._api_versions.pop(node.node_id, None)  # the next connection is asked again
        if node.sock is not None:
            with contextlib.suppress(KeyError):  # a failed connect_ex never registered it
                self._selector.unregister(node.sock)
            node.sock.close()
            node.sock = None
        if node.state is not ConnectionState.DISCONNECTED:
            node.move(ConnectionState.DISCONNECTED)
            node.failures = 0 if node.ready else node.failures + 1
            delay = reconnect_delay(node.failures, self._backoff, self._backoff_max)
            node.retry_at = self._clock() + delay
        if not getattr(error, "retriable", True) and not self._closed:
            self._fatal = error
        pending = [p.future for p in node.pending.values()] + [f for _, f in node.unanswered]
        node.pending = {}
        node.unanswered.clear()
        node.reset_protocol()
        for future in pending:
            future.fail(error)
        if was_open:
            for listener in list(self.closed_listeners):
                listener(node.node_id)


def _exchange(sock: socket.socket, protocol: BrokerConnection, api: ApiKey,
              body: dict[str, Any]) -> dict[str, Any]:
    """One request and its answer on a blocking socket (the SASL login)."""
    protocol.send_request(api, body)
    sock.sendall(protocol.data_to_send())
    while True:
        data = sock.recv(_RECV_BYTES)
        if not data:
            raise BrokerConnectionError(f"the broker closed the connection during {api.name}")
        for response in protocol.receive_data(data):
            return response.unwrap()
