"""The broker process: take the port, open the data directory, listen, serve, and stop
cleanly on a signal.

The port is bound first, before the data directory is opened or ZooKeeper is asked, so a port
in use is one clear line at once; it listens only once the broker can serve, so nobody's
connection waits in the backlog meanwhile (a port bound but not listening refuses them).

In a cluster (``zookeeper_connect``) the ZooKeeper session comes next, retried until ZooKeeper
answers or a signal comes: its cluster id is one the data directory must share. Then the
broker's identity, the cluster member (built once, with that identity), the security stores
the cluster keeps, and listening; it registers last, as the addresses it advertises need the
ports it really listens on.

Structure (trio's own server loop): one nursery for the listener, one for connection handlers,
``task_status.started()`` only once the socket listens. Accept errors caused by running out of
file descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM) back off and retry (``trio.serve_listeners``
does this), so an overload never kills the server.

SIGTERM or SIGINT: stop accepting, let every connection finish the request in hand (parked
fetches are answered at once with what they have), give them ``shutdown_timeout_ms``, then close
every log -- flushed, with its clean-shutdown marker -- and return. A second signal cuts the
requests short.
"""

from __future__ import annotations

import errno
import signal
import time
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from pathlib import Path

import structlog
import trio

from broker.cluster import Cluster
from broker.cluster.membership import ClusterStartError
from broker.cluster.single import SingleBroker
from broker.cluster.zk_cluster import ZooKeeperCluster
from broker.cluster.zk_session import ZooKeeperSession
from broker.connection import Connection
from broker.context import BrokerContext
from broker.gc_policy import GcPolicy
from broker.group_driver import GroupDriver
from broker.identity import BrokerIdentity, IdentityError, load_or_create
from broker.idle_lane import IdleLane
from broker.kafka.connection import KafkaConnection
from broker.log.manager import DataDirectoryInUseError
from broker.metrics import BrokerMetrics, serve_metrics
from broker.purgatory import FetchPurgatory
from broker.security.listeners import Endpoint
from broker.security.policy import SecurityPolicy
from broker.security.setup import BrokerSecurity, TlsFileError
from broker.security.store import SecurityStoreError
from broker.settings import BrokerSettings
from broker.topics import Topics, TopicsFileError
from protocol import speedups

log = structlog.get_logger(__name__)

#: how long a new cluster member waits for its first UpdateMetadata before announcing itself
FIRST_METADATA_WAIT_S = 10.0


class StartupError(RuntimeError):
    """The broker cannot start: its port, data directory or identity is unusable."""


class BrokerServer:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._connections: set[Connection] = set()
        self._stop = trio.Event()
        self._handlers: trio.CancelScope | None = None
        self._lane = IdleLane()

    async def serve(
        self,
        bound: Bound,
        *,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on the sockets of every listener (from ``bind_port``) and serve until
        ``stop``; returns once every connection is closed."""
        settings = self._ctx.settings
        async with trio.open_nursery() as handlers:
            self._handlers = handlers.cancel_scope
            handlers.start_soon(self._lane.run)
            async with trio.open_nursery() as listening:
                for endpoint, sockets in bound:
                    try:
                        for sock in sockets:
                            sock.listen(_BACKLOG)
                    except OSError as exc:  # another socket with SO_REUSEADDR listened first
                        raise _port_error(endpoint, exc) from exc
                    listeners = await listening.start(
                        partial(
                            trio.serve_listeners,
                            partial(self._serve_connection, endpoint),
                            [trio.SocketListener(sock) for sock in sockets],
                            handler_nursery=handlers,
                        )
                    )
                    self._ctx.listener_ports[endpoint.name] = listeners[0].socket.getsockname()[1]
                self._ctx.port = self._ctx.listener_ports[bound[0][0].name]
                task_status.started(self._ctx.port)
                await self._stop.wait()
                listening.cancel_scope.cancel()  # closes the listening socket
            log.info("broker.draining", connections=len(self._connections))
            self._ctx.purgatory.close()
            self._ctx.groups.close()
            self._lane.close()
            for connection in list(self._connections):
                connection.stop_waiting()
            handlers.cancel_scope.deadline = (
                trio.current_time() + settings.shutdown_timeout_ms / 1000
            )
        if handlers.cancel_scope.cancelled_caught:
            log.warning("broker.requests_cut_short")

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    @property
    def stopping(self) -> bool:
        return self._ctx.stopping

    def stop(self) -> None:
        """Begin a graceful shutdown (see the module docstring)."""
        self._ctx.stopping = True
        self._stop.set()

    def abort(self) -> None:
        """Cut in-flight requests short."""
        self.stop()
        if self._handlers is not None:
            self._handlers.cancel()

    async def _serve_connection(self, endpoint: Endpoint, stream: trio.SocketStream) -> None:
        kind = KafkaConnection if endpoint.kafka else Connection
        connection = kind(self._ctx, stream, endpoint, lane=self._lane)
        self._connections.add(connection)
        try:
            await connection.run()
        except Exception as exc:  # a bug: lose this connection, never the broker
            log.error("connection.crashed", conn=connection.id, exc_info=exc)
        finally:
            self._connections.discard(connection)


#: as trio's default: the kernel caps it at its own maximum (net.core.somaxconn)
_BACKLOG = 0xFFFF


#: each listener with its sockets
Bound = list[tuple[Endpoint, list[trio.socket.SocketType]]]


async def bind_port(settings: BrokerSettings) -> Bound:
    """The sockets of every listener, bound but not listening yet. Raises ``StartupError``
    naming the address if one cannot be bound (those bound already are closed)."""
    bound: Bound = []
    try:
        for endpoint in settings.all_endpoints:
            bound.append((endpoint, await _bind_endpoint(endpoint)))
    except StartupError:
        for _, sockets in bound:
            for sock in sockets:
                sock.close()
        raise
    return bound


async def _bind_endpoint(endpoint: Endpoint) -> list[trio.socket.SocketType]:
    """One listener's sockets, bound to its host and port but not listening yet, as
    ``trio.open_tcp_listeners`` binds them (SO_REUSEADDR; an empty host is every interface,
    IPv4 and IPv6)."""
    host = endpoint.host or None
    try:
        addresses = await trio.socket.getaddrinfo(
            host, endpoint.port, type=trio.socket.SOCK_STREAM, flags=trio.socket.AI_PASSIVE
        )
    except OSError as exc:
        raise _port_error(endpoint, exc) from exc
    sockets: list[trio.socket.SocketType] = []
    try:
        for family, type_, proto, _, address in addresses:
            try:
                sock = trio.socket.socket(family, type_, proto)
            except OSError as exc:
                if exc.errno == errno.EAFNOSUPPORT:  # say, no IPv6 here: the others will do
                    continue
                raise
            sockets.append(sock)
            sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
            if family == trio.socket.AF_INET6:
                sock.setsockopt(trio.socket.IPPROTO_IPV6, trio.socket.IPV6_V6ONLY, 1)
            await sock.bind(address)
        if not sockets:
            raise OSError(errno.EAFNOSUPPORT, "no socket family of the address is supported")
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise _port_error(endpoint, exc) from exc
    return sockets


def _port_error(endpoint: Endpoint, exc: OSError) -> StartupError:
    where = f"{endpoint.host}:{endpoint.port}"
    if exc.errno == errno.EADDRINUSE:
        return StartupError(f"{where} is in use (another broker or program listens on it); "
                            "stop it or choose another port (--port)")
    return StartupError(f"cannot listen on {where}: {exc}")


def _data_directory_error(path: Path, exc: Exception) -> StartupError:
    """``mkdir`` says only "File exists" (or "Not a directory") when the path, or one above
    it, is a file: say which."""
    if isinstance(exc, FileExistsError | NotADirectoryError):
        for blocker in (path, *path.parents):
            if blocker.exists() and not blocker.is_dir():
                kind = "a regular file" if blocker.is_file() else "a special file"
                where = "" if blocker == path else f": {blocker}"
                return StartupError(
                    f"data directory {path}{where} is {kind}, not a directory"
                )
    return StartupError(f"data directory {path}: {exc}")


async def maintain_logs(ctx: BrokerContext) -> None:
    """Every ``maintenance_interval_ms``: flush by ``flush_ms``, enforce retention, compact.
    The pass runs in a worker thread (the log allows it) so a long compaction never stalls
    requests; cancelling waits for a running pass to finish."""
    interval = ctx.settings.maintenance_interval_ms / 1000
    while True:
        await trio.sleep(interval)
        try:
            result = await trio.to_thread.run_sync(ctx.topics.logs.run_maintenance)
        except Exception as exc:
            log.error("maintenance.failed", exc_info=exc)
            continue
        if result.segments_deleted or result.compacted:
            log.info(
                "maintenance.done",
                flushed=result.flushed,
                segments_deleted=result.segments_deleted,
                compacted=result.compacted,
            )


async def run_broker(
    settings: BrokerSettings,
    *,
    on_listening: Callable[[BrokerContext], None],
    clock: Callable[[], float] = time.time,
    gc_policy: GcPolicy | None = None,
) -> None:
    """Run one broker until SIGTERM or SIGINT. ``on_listening`` is called once it listens;
    ``gc_policy``, installed by the caller, makes its collections from the broker's loop."""
    bound = await bind_port(settings)  # first: a port in use fails before anything is done
    try:
        await _run_bound(settings, bound, on_listening, clock, gc_policy)
    finally:
        for _, sockets in bound:  # closed already once served; not if the start failed
            for sock in sockets:
                sock.close()


async def _run_bound(
    settings: BrokerSettings,
    bound: Bound,
    on_listening: Callable[[BrokerContext], None],
    clock: Callable[[], float],
    gc_policy: GcPolicy | None,
) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        try:
            topics = Topics(settings, clock=clock)
        except (OSError, DataDirectoryInUseError, TopicsFileError) as exc:
            raise _data_directory_error(settings.data_path, exc) from exc
        session = (None if settings.zookeeper_connect is None
                   else ZooKeeperSession(settings))
        member: ZooKeeperCluster | None = None
        metrics: BrokerMetrics | None = None
        try:
            # cluster mode: the cluster id is ZooKeeper's, which the data directory must share
            cluster_id = None
            if session is not None:
                cluster_id = await _connect_unless_stopped(session, signals)
                if cluster_id is None:
                    log.info("broker.stopped_before_joining")
                    return
            identity = _identity(settings, cluster_id)
            purgatory = FetchPurgatory()
            listener_ports: dict[str, int] = {}  # the context's, read by the cluster of one too
            if session is not None:
                member = ZooKeeperCluster(session, identity, topics, purgatory, clock=clock)
            cluster, groups = _cluster(settings, identity, topics, purgatory, member,
                                       listener_ports, clock)
            security, listener_security = await _security(settings, cluster)
            ctx = BrokerContext(settings, identity, topics, purgatory, groups, cluster=cluster,
                                security=security, listener_security=listener_security,
                                listener_ports=listener_ports)
            server = BrokerServer(ctx)
            if settings.metrics_listener is not None:
                ctx.metrics = metrics = BrokerMetrics(
                    ctx, connection_count=lambda: server.connection_count)
                metrics.attach()
            async with trio.open_nursery() as nursery:
                if metrics is not None:
                    try:
                        await nursery.start(serve_metrics, metrics, settings.metrics_listener)
                    except OSError as exc:
                        raise StartupError(f"metrics_listener {settings.metrics_listener}: "
                                           f"{exc}") from exc
                await nursery.start(groups.run)
                nursery.start_soon(security.watch)

                async def serve(*, task_status: trio.TaskStatus[int]) -> None:
                    await server.serve(bound, task_status=task_status)
                    nursery.cancel_scope.cancel()  # maintenance and the signal watch end too

                await nursery.start(serve)
                if member is not None:
                    await _join(member, ctx, nursery)
                log.info(
                    "broker.started",
                    broker_id=identity.broker_id,
                    cluster_id=identity.cluster_id,
                    host=settings.endpoints[0].host,
                    port=ctx.port,
                    listeners=",".join(f"{name}:{port}"
                                       for name, port in ctx.listener_ports.items()),
                    data_dir=str(settings.data_path),
                    topics=len(topics.all()),
                    message_set_code=speedups.IMPLEMENTATION,
                )
                on_listening(ctx)
                nursery.start_soon(maintain_logs, ctx)
                if gc_policy is not None:
                    nursery.start_soon(gc_policy.run)
                nursery.start_soon(_obey_signals, signals, server, member)
        finally:
            if metrics is not None:
                metrics.detach()
            if member is not None:
                member.stop()
            if session is not None:
                await session.close()  # the registration goes with the session, at once
            topics.close()  # after the maintenance pass in progress, if any, has finished
        log.info("broker.stopped", broker_id=identity.broker_id)


def _identity(settings: BrokerSettings, cluster_id: str | None) -> BrokerIdentity:
    try:
        return load_or_create(settings.data_path, settings.broker_id, cluster_id=cluster_id)
    except (OSError, IdentityError) as exc:
        raise StartupError(str(exc)) from exc


def _cluster(settings: BrokerSettings, identity: BrokerIdentity, topics: Topics,
             purgatory: FetchPurgatory, member: ZooKeeperCluster | None,
             listener_ports: Mapping[str, int], clock: Callable[[], float]
             ) -> tuple[Cluster, GroupDriver]:
    """The cluster the handlers ask, and the group driver: the ZooKeeper cluster's member
    makes the one it steers (see ``ZooKeeperCluster``); a cluster of one has one that leads
    every offsets partition."""
    if member is not None:
        return member, member.groups
    groups = GroupDriver(settings.coordinator_config(), topics, purgatory, clock=clock)
    return SingleBroker(settings, identity.broker_id, topics, purgatory, groups,
                        listener_ports=listener_ports), groups


async def _security(
    settings: BrokerSettings, cluster: Cluster
) -> tuple[SecurityPolicy, BrokerSecurity]:
    """The ACLs and quotas, loaded, and the listeners' TLS and SASL, from where ``cluster``
    keeps them."""
    security = SecurityPolicy(
        cluster.security_store(), authorizer_enabled=settings.authorizer_enabled,
        super_users=settings.super_users,
        allow_everyone_if_no_acl_found=settings.allow_everyone_if_no_acl_found)
    try:
        await security.load()
    except SecurityStoreError as exc:
        raise StartupError(str(exc)) from exc
    try:
        return security, BrokerSecurity(settings, cluster.credential_store())
    except TlsFileError as exc:
        raise StartupError(str(exc)) from exc


async def _join(member: ZooKeeperCluster, ctx: BrokerContext, nursery: trio.Nursery) -> None:
    """Once listening: register with the advertised addresses, take part in the cluster, and
    return once the controller's first view has arrived, so that clients (and placement)
    never see a cluster of no brokers."""
    settings = ctx.settings
    advertised = [(e.name, *settings.advertised_endpoint(e.name, ctx.listener_ports[e.name]))
                  for e in settings.all_endpoints]
    host, port = next((h, p) for name, h, p in advertised
                      if name == settings.inter_broker_endpoint.name)
    try:
        await member.register(
            host=host, port=port,
            endpoints=(() if settings.listeners == "" and not settings.kafka_listeners
                       else tuple(advertised)))
    except ClusterStartError as exc:
        raise StartupError(str(exc)) from exc
    nursery.start_soon(member.serve)
    await member.first_metadata(FIRST_METADATA_WAIT_S)


async def _connect_unless_stopped(
    session: ZooKeeperSession, signals: AsyncIterator[int]
) -> str | None:
    """The cluster id once ZooKeeper answers; None if SIGTERM or SIGINT came first (a broker
    waiting for ZooKeeper must still stop when asked)."""
    found: list[str] = []
    async with trio.open_nursery() as nursery:

        async def stop_on_signal() -> None:
            async for _ in signals:
                nursery.cancel_scope.cancel()

        nursery.start_soon(stop_on_signal)
        found.append(await session.connect())
        nursery.cancel_scope.cancel()
    return found[0] if found else None


async def _obey_signals(
    signals: AsyncIterator[int], server: BrokerServer, member: ZooKeeperCluster | None
) -> None:
    async with trio.open_nursery() as nursery:
        async for signum in signals:
            name = signal.Signals(signum).name
            if server.stopping:
                log.warning("broker.aborting", signal=name)
                server.abort()
            elif member is not None and not member.shutting_down:
                log.info("broker.stopping", signal=name, controlled_shutdown=True)
                nursery.start_soon(_stop_after_controlled_shutdown, server, member)
            else:
                log.info("broker.stopping", signal=name)
                server.stop()


async def _stop_after_controlled_shutdown(server: BrokerServer,
                                          member: ZooKeeperCluster) -> None:
    """Cluster mode: leaderships move to other replicas while this broker still serves (it
    becomes their follower), then it stops. A second signal stops it at once."""
    await member.shut_down_controlled()
    server.stop()
