"""What every request handler may use: settings, identity, topics and their logs, the purgatory."""

from __future__ import annotations

from dataclasses import dataclass

from broker.identity import BrokerIdentity
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topics


@dataclass
class BrokerContext:
    settings: BrokerSettings
    identity: BrokerIdentity
    topics: Topics
    purgatory: FetchPurgatory
    port: int = 0  # the port really listened on (known once listening)
    stopping: bool = False  # set on SIGTERM/SIGINT: in-flight requests finish, no new ones

    @property
    def broker_id(self) -> int:
        return self.identity.broker_id
