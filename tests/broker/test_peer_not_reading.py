"""A peer that pipelines requests and never reads its answers: the connection's writer gives up
after ``connections_max_idle_ms``, which ends the connection (its reader too, whether it was
waiting for the next request or for room to queue an answer); the broker serves on."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable

from client.admin import Admin
from protocol.apis import ApiKey
from protocol.wire import encode_request
from tests.broker_process import BrokerProcess

REQUESTS = 20_000  # answers of ~0.5 KB each: more than the kernel's buffers hold


def test_a_peer_that_never_reads_is_dropped_and_the_broker_serves_on(
        make_broker: Callable[..., BrokerProcess]):
    broker = make_broker(settings={"connections_max_idle_ms": 1000})
    host, port = broker.bootstrap.split(":")
    pipelined = b"".join(encode_request(ApiKey.API_VERSIONS, 0, i, "stuck", {})
                         for i in range(REQUESTS))
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        # the broker stops reading first, or has dropped the connection already
        with contextlib.suppress(TimeoutError, ConnectionError):
            sock.sendall(pipelined)
        broker.wait_for_log("did not take its response within connections_max_idle_ms=1000")
    with Admin(broker.bootstrap) as admin:
        assert admin.list_topics() == []
