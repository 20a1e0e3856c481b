"""``client.producer_ids.init_producer_id`` against a stub network: what it sends, what it asks
again and what it raises. Through a real broker: tests/broker/test_init_producer_id.py."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from client.errors import BrokerConnectionError, ClientTimeoutError
from client.future import Future
from client.producer_ids import ProducerIdAndEpoch, init_producer_id
from protocol.apis import ApiKey
from protocol.errors import (
    ClusterAuthorizationFailedError,
    CoordinatorLoadInProgressError,
    ErrorCode,
    UnsupportedApiError,
)


def answer(error: ErrorCode = ErrorCode.NONE, message: str | None = None,
           producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message,
            "producer_id": producer_id, "producer_epoch": epoch}


class StubNetwork:
    """Answers each request with the next of ``answers`` (a body, or an error to fail with),
    from node 1, 2, 3, ... in turn as the least loaded."""

    def __init__(self, answers: Iterable[dict[str, Any] | Exception]) -> None:
        self._answers: Iterator[dict[str, Any] | Exception] = iter(answers)
        self._nodes = itertools.count(1)
        self.sent: list[tuple[int, ApiKey, dict[str, Any]]] = []

    def least_loaded_node(self) -> int:
        return next(self._nodes)

    def send(self, node: int, api: ApiKey, body: dict[str, Any]) -> Future[dict[str, Any]]:
        self.sent.append((node, api, body))
        future: Future[dict[str, Any]] = Future()
        reply = next(self._answers)
        if isinstance(reply, Exception):
            future.fail(reply)
        else:
            future.succeed(reply)
        return future

    def poll(self, timeout: float) -> None:
        """Nothing to wait for: every answer is already there."""


def test_the_request_names_no_transaction_and_the_answer_is_returned() -> None:
    network = StubNetwork([answer(producer_id=4000, epoch=0)])
    assert init_producer_id(network, 5.0) == ProducerIdAndEpoch(4000, 0)  # type: ignore[arg-type]
    (_, api, body), = network.sent
    assert api is ApiKey.INIT_PRODUCER_ID and body["transactional_id"] is None


def test_what_retrying_can_help_is_asked_again_of_the_least_loaded_node() -> None:
    network = StubNetwork([
        BrokerConnectionError("lost"),
        answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "waiting for a block"),
        answer(producer_id=7, epoch=0),
    ])
    assert init_producer_id(network, 5.0) == ProducerIdAndEpoch(7, 0)  # type: ignore[arg-type]
    assert [node for node, _, _ in network.sent] == [1, 2, 3]


def test_a_refusal_retrying_cannot_help_raises_its_typed_error_at_once() -> None:
    network = StubNetwork([answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "needs IdempotentWrite")])
    with pytest.raises(ClusterAuthorizationFailedError, match=r"^InitProducerId: needs Idem"):
        init_producer_id(network, 5.0)  # type: ignore[arg-type]
    assert len(network.sent) == 1
    old_broker = StubNetwork([UnsupportedApiError("InitProducerId: unknown API key 22")])
    with pytest.raises(UnsupportedApiError):
        init_producer_id(old_broker, 5.0)  # type: ignore[arg-type]


def test_the_deadline_ends_the_retries_naming_the_last_error() -> None:
    waiting = answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "no block yet")
    network = StubNetwork(itertools.repeat(waiting))
    with pytest.raises(ClientTimeoutError, match="no block yet") as raised:
        init_producer_id(network, 0.05, retry_backoff=0.001)  # type: ignore[arg-type]
    assert isinstance(raised.value.__cause__, CoordinatorLoadInProgressError)
    assert len(network.sent) >= 1
