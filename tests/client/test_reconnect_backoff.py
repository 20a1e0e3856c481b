"""Reconnecting backs off as Kafka's clients do (reconnect.backoff.ms, reconnect.backoff.max.ms):
each connection in a row that ends before any answer doubles the wait, the first answer starts
over. Time is a fake clock the test moves; the "broker" is a socket the test serves by hand."""

from __future__ import annotations

import errno
import itertools
import socket
from typing import Any

import pytest

from client.errors import BrokerConnectionError, ConfigError
from client.network import NetworkClient, reconnect_delay
from protocol.apis import ApiKey
from protocol.wire import encode_response
from tests.client.served_by_hand import drive, read_request


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_delay_doubles_from_the_base_to_the_maximum() -> None:
    delays = [reconnect_delay(n, 0.05, 1.0) for n in range(8)]
    assert delays == [0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert reconnect_delay(10_000, 0.05, 1.0) == 1.0  # a client failing for days: no overflow


def test_failed_connections_are_retried_after_the_doubling_backoff(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    attempts: list[float] = []

    def refuse(*args: object, **kwargs: object) -> list[object]:
        attempts.append(clock.now)
        raise OSError(errno.ECONNREFUSED, "Connection refused")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    client = NetworkClient("broker.invalid:9092", clock=clock,
                           reconnect_backoff_ms=50, reconnect_backoff_max_ms=300)
    try:
        future = client.send(-1, ApiKey.API_VERSIONS, {})  # the first attempt is at once
        for ms in range(1, 2000):
            if len(attempts) == 7:
                break
            if future.done():  # keep a request waiting, so poll reconnects when it may
                assert isinstance(future.exception(), BrokerConnectionError)
                future = client.send(-1, ApiKey.API_VERSIONS, {})
            clock.now = 1000.0 + ms / 1000
            client.poll(0)
        gaps = [round(b - a, 2) for a, b in itertools.pairwise(attempts)]
        assert gaps == [0.05, 0.1, 0.2, 0.3, 0.3, 0.3]
    finally:
        client.close()


def test_an_answer_starts_the_backoff_over_and_an_answered_connection_reconnects_at_once(
        listener: socket.socket, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    attempts: list[float] = []
    resolve = socket.getaddrinfo

    def counted(*args: Any, **kwargs: Any) -> Any:
        attempts.append(clock.now)
        return resolve(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counted)
    client = NetworkClient(f"127.0.0.1:{listener.getsockname()[1]}", clock=clock,
                           reconnect_backoff_ms=50)
    try:
        answered = client.send(-1, ApiKey.API_VERSIONS, {})
        client.poll(0.1)  # connected: the request is written
        first, _ = listener.accept()
        with first:
            first.sendall(encode_response(read_request(first), {"error_code": 0, "apis": []}))
            drive(client, answered)
            lost = client.send(-1, ApiKey.API_VERSIONS, {})
        drive(client, lost)  # the broker closed a connection that had answered
        assert isinstance(lost.exception(), BrokerConnectionError)

        unanswered = client.send(-1, ApiKey.API_VERSIONS, {})
        assert attempts == [1000.0, 1000.0]  # reconnected at once
        client.poll(0.1)
        second, _ = listener.accept()
        with second:
            read_request(second)
        drive(client, unanswered)  # closed before any answer: one failure
        assert isinstance(unanswered.exception(), BrokerConnectionError)

        waiting = client.send(-1, ApiKey.API_VERSIONS, {})
        clock.now += 0.049
        client.poll(0)
        assert len(attempts) == 2  # not within reconnect_backoff_ms
        clock.now += 0.001
        client.poll(0)
        assert len(attempts) == 3
        client.poll(0.1)
        third, _ = listener.accept()
        with third:
            third.sendall(encode_response(read_request(third), {"error_code": 0, "apis": []}))
            drive(client, waiting)
        assert waiting.result() == {"error_code": 0, "apis": []}
    finally:
        client.close()


@pytest.mark.parametrize("name", ["reconnect_backoff_ms", "reconnect_backoff_max_ms"])
def test_a_negative_backoff_is_refused_by_name(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        NetworkClient("127.0.0.1:9092", **{name: -1})  # type: ignore[arg-type]
