"""Which broker coordinates a group: FindCoordinator (seed 001 ConsumerMetadataRequest).

Seed: "On startup or on co-ordinator failover, the consumer sends a ConsumerMetadataRequest to
any of the brokers in the bootstrap.brokers list." The answer is remembered until someone reports
the coordinator lost (NOT_COORDINATOR, a closed connection, a heartbeat unanswered for the
session timeout); failed lookups are retried after ``retry_backoff_ms``.

The coordinator gets a connection of its own (node id ``COORDINATOR_NODE_BASE - broker id``, as
Kafka's ``Integer.MAX_VALUE - id``): a JoinGroup is held by the broker until the round ends, and
the broker answers one request per connection at a time, so on the shared connection it would
hold up fetches -- and a fetch's long poll would delay heartbeats.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from client.errors import ClientTimeoutError
from client.future import Future
from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, error_for

COORDINATOR_NODE_BASE = (1 << 31) - 1

#: told of each answer: (error or None on success); the error is a BrokerError for an error
#: code, else the connection's error
AnswerHook = Callable[[BaseException | None], None]


class CoordinatorLookup:
    def __init__(
        self,
        network: NetworkClient,
        group_id: str,
        *,
        retry_backoff_ms: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.network = network
        self.group_id = group_id
        self.node: int | None = None  # the coordinator's dedicated connection, once known
        self.broker_id: int | None = None
        self.last_error: BaseException | None = None
        self.on_answer: AnswerHook | None = None
        #: told when the coordinator's connection closes (seed 001: the consumer acts "when it
        #: finds the socket channel to the coordinator to be closed"), not at the next request
        self.on_lost: Callable[[str], None] | None = None
        self._backoff = retry_backoff_ms / 1000
        self._clock = clock
        self._in_flight: Future[dict[str, Any]] | None = None
        self._retry_at = 0.0
        network.closed_listeners.append(self._node_closed)

    def _node_closed(self, node_id: int) -> None:
        if node_id != self.node:
            return
        reason = f"the connection to the coordinator (broker {self.broker_id}) closed"
        if self.on_lost is not None:
            self.on_lost(reason)
        else:
            self.mark_unknown()

    def poll(self) -> None:
        """Ask a broker, if the coordinator is unknown, nobody is asking and no backoff runs."""
        if self.node is not None or self._in_flight is not None:
            return
        if self._clock() < self._retry_at:
            return
        future = self.network.send(
            self.network.least_loaded_node(), ApiKey.FIND_COORDINATOR, {"group_id": self.group_id}
        )
        self._in_flight = future
        future.add_done_callback(self._on_response)

    def mark_unknown(self) -> None:
        """Forget the coordinator; the next ``poll`` asks again after the backoff (seed: "the
        consumer backs off and resends the ConsumerMetadataRequest")."""
        if self.node is not None:
            self.node = None
            self._retry_at = self._clock() + self._backoff

    def wait(self, deadline: float) -> int:
        """Block (driving I/O) until the coordinator is known; its node id."""
        while self.node is None:
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise ClientTimeoutError(
                    f"no coordinator found for group {self.group_id!r}: "
                    f"{self.last_error or 'no answer'}"
                )
            self.poll()
            self.network.poll(min(remaining, self._backoff))
        return self.node

    def _on_response(self, future: Future[dict[str, Any]]) -> None:
        self._in_flight = None
        error = future.exception()
        if error is None and future.value["error_code"] != ErrorCode.NONE:
            error = error_for(future.value["error_code"], future.value["error_message"] or "")
        if error is not None:
            self.last_error = error
            self._retry_at = self._clock() + self._backoff
        else:
            body = future.value
            self.broker_id = body["node_id"]
            self.node = COORDINATOR_NODE_BASE - body["node_id"]
            self.network.set_dedicated_node(self.node, body["host"], body["port"])
            self.last_error = None
        if self.on_answer is not None:
            self.on_answer(error)

