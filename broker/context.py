"""What every request handler may use: settings, identity, topics and their logs, the purgatory,
the group coordinator's driver. Which client connection a request came on is
``broker.client_connection``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.cluster import Cluster
from broker.group_driver import GroupDriver

if TYPE_CHECKING:
    from broker.security.policy import SecurityPolicy
    from broker.security.setup import BrokerSecurity
from broker.identity import BrokerIdentity
from broker.memory_pool import RequestMemoryPool
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topics
from protocol.apis import ApiKey
from protocol.wire import Request


class RequestMetrics(Protocol):
    """What the request path tells the metrics (``broker.metrics.BrokerMetrics``, when
    ``metrics_listener`` is set): declared here so that the context need not import the
    metrics, which read the context."""

    @property
    def handlers(self) -> Mapping[ApiKey, Callable[[BrokerContext, Request], Awaitable[Any]]]:
        """Every handler, timed and counted."""

    def answered(self, api: str, seconds: float, code: int) -> None:
        """A request answered without its handler (the idle lane's Heartbeats)."""

    def produced(self, topic: str, size: int, messages: int) -> None: ...

    def down_converted(self, topic: str, messages: int, seconds: float) -> None: ...


@dataclass
class BrokerContext:
    settings: BrokerSettings
    identity: BrokerIdentity
    topics: Topics
    purgatory: FetchPurgatory
    groups: GroupDriver
    #: ACLs (when authorizer_enabled) and client quotas
    security: SecurityPolicy = field(kw_only=True)
    #: the cluster as the request path sees it: a ZooKeeper cluster's member
    #: (``zookeeper_connect`` set), else a cluster of one (``broker.cluster``)
    cluster: Cluster = field(kw_only=True)
    port: int = 0  # the port really listened on (known once listening)
    stopping: bool = False  # set on SIGTERM/SIGINT: in-flight requests finish, no new ones
    metrics: RequestMetrics | None = None  # metrics_listener set, else None
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
