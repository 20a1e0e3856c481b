"""InitProducerId from the client's side: the producer id and epoch an idempotent producer
numbers its batches under (KIP-98). Any broker hands one out, so the least loaded is asked;
what retrying can help (a lost connection, a broker waiting for its next block of ids) is
asked again, of whichever broker is least loaded then, until the deadline."""

from __future__ import annotations

import time
from dataclasses import dataclass

from client.errors import ClientTimeoutError
from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import OdradekError, error_for

#: between two attempts after a retriable error (Kafka's retry.backoff.ms default)
RETRY_BACKOFF_S = 0.1
#: what the request says when it names no transaction (Kafka's transaction.timeout.ms default)
TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


def init_producer_id(network: NetworkClient, timeout: float, *,
                     retry_backoff: float = RETRY_BACKOFF_S) -> ProducerIdAndEpoch:
    """A new producer id (epoch 0) from the cluster, within ``timeout`` seconds: a refusal
    retrying cannot help raises its typed error (``ClusterAuthorizationFailedError`` without
    IdempotentWrite on the cluster or Write on a topic, ``UnsupportedApiError`` from a broker
    that has no InitProducerId); otherwise ``ClientTimeoutError`` at the deadline, its cause
    the last error."""
    deadline = time.monotonic() + timeout
    last: OdradekError | None = None
    while (remaining := deadline - time.monotonic()) > 0:
        node = network.least_loaded_node()
        try:
            body = network.send(node, ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
            }).result(remaining)
            if body["error_code"]:
                message = body["error_message"]
                raise error_for(body["error_code"],
                                f"InitProducerId: {message}" if message else "")
            return ProducerIdAndEpoch(body["producer_id"], body["producer_epoch"])
        except OdradekError as exc:
            if not getattr(exc, "retriable", False):  # ClientError and BrokerError say
                raise
            last = exc
        network.poll(min(retry_backoff, max(deadline - time.monotonic(), 0.0)))
    raise ClientTimeoutError(
        f"no producer id within {timeout:g} s"
        + (f"; the last attempt failed: {last}" if last is not None else "")) from last
