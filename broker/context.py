"""What every request handler may use: settings, identity, topics and their logs, the purgatory,
the group coordinator's driver -- and which client connection the request came on."""

from __future__ import annotations

import socket
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from broker.group_driver import GroupDriver

if TYPE_CHECKING:
    from broker.cluster.node import ClusterNode
    from broker.metrics import BrokerMetrics
    from broker.security.policy import SecurityPolicy
    from broker.security.setup import BrokerSecurity
from broker.identity import BrokerIdentity
from broker.memory_pool import RequestMemoryPool
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topics


@dataclass
class BrokerContext:
    settings: BrokerSettings
    identity: BrokerIdentity
    topics: Topics
    purgatory: FetchPurgatory
    groups: GroupDriver
    #: ACLs (when authorizer_enabled) and client quotas
    security: SecurityPolicy = field(kw_only=True)
    port: int = 0  # the port really listened on (known once listening)
    stopping: bool = False  # set on SIGTERM/SIGINT: in-flight requests finish, no new ones
    cluster: ClusterNode | None = None  # cluster mode (zookeeper_connect set), else None
    metrics: BrokerMetrics | None = None  # metrics_listener set, else None
    #: listeners' TLS and SASL, the credential store; None: PLAINTEXT only, no user store
    listener_security: BrokerSecurity | None = None
    #: the port each listener really listens on, by listener name (known once listening)
    listener_ports: dict[str, int] = field(default_factory=dict)
    #: Bytes of requests being read and queued, over all connections (queued_max_request_bytes).
    request_memory: RequestMemoryPool = field(init=False)

    def __post_init__(self) -> None:
        largest = self.settings.max_request_bytes + 4  # a frame, its length prefix included
        capacity = max(self.settings.queued_max_request_bytes, largest)
        self.request_memory = RequestMemoryPool(
            # an eighth is kept for small requests, unless that keeps out the largest frame
            capacity, small_share=min(capacity // 8, capacity - largest)
        )

    @property
    def broker_id(self) -> int:
        return self.identity.broker_id


#: Who a connection is before (or without) authentication, as Kafka names it.
ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class ClientConnection:
    id: int
    host: str
    #: The connection's socket, for ``peer_closed``; None where there is none to watch.
    socket: trio.socket.SocketType | None = None
    #: The authenticated principal (``User:NAME``): set by the listener's TLS client
    #: certificate or SASL exchange; the authorizer and quotas read it.
    principal: str = ANONYMOUS
    #: The name of the listener the connection came in on (``PLAINTEXT``, ``SASL_SSL``, ...).
    listener: str = "PLAINTEXT"
    #: The client id of the connection's latest request header (quotas are per client id).
    client_id: str | None = None

    async def peer_closed(self) -> None:
        """Return once the peer has closed its end (EOF or a socket error); never, if there is
        no socket or the peer sends bytes first -- a pipelining client's next request is
        readability too, and the EOF behind it is not visible until that request is read.
        Only for a request's handler: the connection is not reading then (seed 001)."""
        if self.socket is not None:
            try:
                if await self.socket.recv(1, socket.MSG_PEEK):
                    await trio.sleep_forever()
            except OSError:
                pass
            return
        await trio.sleep_forever()


#: Set by each connection's task for its own requests (trio gives every task its own copy of
#: the context): group requests need the connection to tell the coordinator when it closes.
CLIENT_CONNECTION: ContextVar[ClientConnection | None] = ContextVar(
    "client_connection", default=None
)
