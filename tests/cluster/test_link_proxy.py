"""The cut-link proxy the cluster fault tests use: a cut holds traffic both ways without ending
any connection, a restore delivers what waited, in order."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.cluster.link_proxy import LinkProxy

#: how long a cut link is watched for bytes that must not come through
QUIET_S = 0.3


class EchoServer:
    """Echoes every connection's bytes back; counts the connections it accepted."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.accepted = threading.Semaphore(0)
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.listener.getsockname()[:2]
        return host, port

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.release()
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def _connect(proxy: LinkProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.settimeout(5)
    return sock


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def _nothing_arrives(sock: socket.socket) -> bool:
    """No byte and no end of stream for ``QUIET_S``."""
    sock.settimeout(QUIET_S)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)
    return False


@pytest.mark.timeout(30)
def test_bytes_pass_both_ways(echo: EchoServer) -> None:
    with LinkProxy(echo.address) as proxy, _connect(proxy) as sock:
        payload = bytes(range(256)) * 1000
        sock.sendall(payload)
        assert _receive(sock, len(payload)) == payload
        assert proxy.connections == 1


@pytest.mark.timeout(30)
def test_a_cut_holds_the_bytes_of_an_open_connection_and_a_restore_delivers_them(
    echo: EchoServer,
) -> None:
    with LinkProxy(echo.address) as proxy, _connect(proxy) as sock:
        sock.sendall(b"before")
        assert _receive(sock, 6) == b"before"
        proxy.cut()
        sock.sendall(b"during")
        assert _nothing_arrives(sock)  # no answer, and no end of stream either
        _wait_for(lambda: proxy.held == 1)  # the proxy's reader takes them when it is scheduled
        proxy.restore()
        assert _receive(sock, 6) == b"during"
        sock.sendall(b"after")
        assert _receive(sock, 5) == b"after"
        assert proxy.connections == 1  # the same connection all along


@pytest.mark.timeout(30)
def test_a_connection_opened_during_a_cut_reaches_the_peer_on_restore(
    echo: EchoServer,
) -> None:
    with LinkProxy(echo.address) as proxy:
        proxy.cut()
        with _connect(proxy) as sock:
            sock.sendall(b"hello")
            assert not echo.accepted.acquire(timeout=QUIET_S)
            assert _nothing_arrives(sock)
            proxy.restore()
            assert echo.accepted.acquire(timeout=5)
            assert _receive(sock, 5) == b"hello"


@pytest.mark.timeout(30)
def test_closing_the_proxy_ends_its_connections(echo: EchoServer) -> None:
    proxy = LinkProxy(echo.address)
    with _connect(proxy) as sock:
        sock.sendall(b"ping")
        assert _receive(sock, 4) == b"ping"
        proxy.close()
        assert sock.recv(1) == b""
