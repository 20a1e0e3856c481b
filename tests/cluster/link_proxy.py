"""A TCP link on 127.0.0.1 that a test can cut and restore (DESIGN "Replication": faults are
SIGKILL, SIGSTOP/SIGCONT and cut links through a loopback proxy the test controls).

A process is given the proxy's address instead of its peer's; every connection it opens there
is forwarded to the peer. ``cut()`` is a network partition, not a closed connection: nothing
moves either way, on open connections and new ones alike. Bytes already sent wait (in the
kernel's buffers, or one chunk here) and arrive after ``restore()``, as TCP's retransmissions
would deliver them when a partition heals; nobody sees a reset or an end of stream. A
connection opened during the cut is accepted and held, and reaches the peer on restore.

Threads, blocking sockets: two pumps per connection and one for accepting. The proxy is closed
by ``close()`` (or as a context manager), which closes every socket it holds.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

_CHUNK = 65536


class LinkProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream`` (``(host, port)``) until cut."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        #: connections forwarded so far (a test can tell a reconnect happened)
        self.connections = 0
        #: reads that arrived while the link was cut and waited for the restore (a test can
        #: tell the cut stood in somebody's way)
        self.held = 0
        self._start(self._accept, "accept")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return not self._flowing.is_set()

    def cut(self) -> None:
        self._flowing.clear()

    def restore(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()  # release every waiting thread; they see _closed
        with self._lock:
            held = [self._listener, *self._sockets]
        self._drop(*held)
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ----------------------------------------------------------------------------- threads

    def _start(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name=f"link-proxy-{self.port}-{name}")
        self._threads.append(thread)
        thread.start()

    def _hold(self, sock: socket.socket) -> bool:
        """Keep ``sock`` to close it with the proxy; False (and closed) if already closed."""
        with self._lock:
            if not self._closed:
                self._sockets.add(sock)
                return True
        sock.close()
        return False

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets.difference_update(socks)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the other pump, blocked in recv
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self._hold(client):
                self._start(self._connect, "connect", client)

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()  # a connection opened during a cut reaches the peer on restore
        if self._closed:
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            self._drop(client)  # the peer is down: the client sees its connection end
            return
        upstream.settimeout(None)
        if not self._hold(upstream):
            return
        self.connections += 1
        self._start(self._pump, "up", client, upstream)
        self._start(self._pump, "down", upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                self._flowing.wait()
                data = source.recv(_CHUNK)
                if not self._flowing.is_set():  # read just as the link was cut: it waits here
                    with self._lock:
                        self.held += 1
                    self._flowing.wait()
                if self._closed or not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        # one side ended: so does the connection (ZooKeeper and Kafka never half-close)
        self._drop(source, sink)
