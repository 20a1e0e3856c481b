"""A "broker" the test serves by hand: a listening socket on 127.0.0.1, accepted and answered
in the test's own thread between client polls (the client connects without blocking)."""

from __future__ import annotations

import socket
import time

from client.future import Future
from client.network import NetworkClient
from protocol.framing import FrameDecoder
from protocol.wire import decode_request


def drive(client: NetworkClient, future: Future, timeout: float = 5.0) -> None:
    """Poll the client until ``future`` is done, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not future.done():
        assert time.monotonic() < deadline, "future not done in time"
        client.poll(0.05)


def read_request(conn: socket.socket) -> int:
    """Read one request frame; return its correlation id."""
    decoder = FrameDecoder()
    while (payload := decoder.next_frame()) is None:
        decoder.receive_data(conn.recv(65536))
    return decode_request(payload).header.correlation_id
