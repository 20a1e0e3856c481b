"""kazoo as trio sees it: blocking ZooKeeper calls run in worker threads, and what kazoo reports
on its own threads (watches, session changes) is handed to the trio loop.

``zookeeper_connect`` is Kafka's ``zookeeper.connect``: ``host:port[,host:port...][/chroot]``.
The chroot node is created when missing (ZooKeeper does not create it, and every path of the
cluster lives under it).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import structlog
import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: The longest pause between rounds of reconnection attempts. kazoo doubles it up to 60 s by
#: default, so after a long outage (an ensemble without its majority) a broker would come
#: back long after the ensemble did, its session expired meanwhile: the controller resigns,
#: every broker registers anew. Kafka's ZooKeeper client tries the next server within a second.
RECONNECT_MAX_DELAY = 1.0


class ZooKeeperUnavailableError(RuntimeError):
    """No ZooKeeper server named in ``zookeeper_connect`` answered in time."""


def split_connect(connect: str) -> tuple[str, str]:
    """``hosts[/chroot]`` -> (hosts, chroot) with chroot "" or "/path" without a trailing /."""
    hosts, slash, chroot = connect.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if not hosts:
        raise ValueError(f"zookeeper_connect {connect!r} names no host:port")
    return hosts, chroot


class ZooKeeper:
    """One kazoo session. ``on_state`` is called on the trio thread with kazoo's
    ``KazooState`` values (CONNECTED, SUSPENDED, LOST) as the session changes."""

    def __init__(self, connect: str, *, session_timeout_ms: int,
                 connection_timeout_ms: int) -> None:
        self.connect = connect
        self._hosts, self._chroot = split_connect(connect)
        self._session_timeout = session_timeout_ms / 1000
        self._connection_timeout = connection_timeout_ms / 1000
        self._token: trio.lowlevel.TrioToken | None = None
        self.client: KazooClient | None = None
        self.on_state: Callable[[str], None] = lambda state: None

    @property
    def kazoo(self) -> KazooClient:
        assert self.client is not None, "not connected"
        return self.client

    async def start(self) -> None:
        """Connect (creating the chroot when missing); ZooKeeperUnavailableError when no
        server answers within ``connection_timeout_ms``."""
        self._token = trio.lowlevel.current_trio_token()
        if self._chroot:
            await self._run(self._ensure_chroot)
        client = KazooClient(hosts=self.connect, timeout=self._session_timeout,
                             connection_retry=KazooRetry(max_tries=-1,
                                                         max_delay=RECONNECT_MAX_DELAY))
        client.add_listener(self._kazoo_state)
        try:
            await self._run(functools.partial(client.start, timeout=self._connection_timeout))
        except KazooTimeoutError:
            await self._run(client.close)
            raise ZooKeeperUnavailableError(
                f"no ZooKeeper server at {self._hosts} answered within "
                f"zookeeper_connection_timeout_ms={int(self._connection_timeout * 1000)}"
            ) from None
        self.client = client

    def _ensure_chroot(self) -> None:
        client = KazooClient(hosts=self._hosts, timeout=self._session_timeout)
        try:
            client.start(timeout=self._connection_timeout)
        except KazooTimeoutError:
            client.close()
            raise ZooKeeperUnavailableError(
                f"no ZooKeeper server at {self._hosts} answered within "
                f"zookeeper_connection_timeout_ms={int(self._connection_timeout * 1000)}"
            ) from None
        try:
            client.ensure_path(self._chroot)
        finally:
            client.stop()
            client.close()

    async def stop(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await self._run(client.stop)
            await self._run(client.close)

    @property
    def session_id(self) -> int:
        return int(self.kazoo.client_id[0]) if self.kazoo.client_id else 0

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking kazoo call in a worker thread."""
        return await self._run(functools.partial(fn, *args, **kwargs))

    def forward(self, fn: Callable[..., None]) -> Callable[..., None]:
        """Wrap ``fn`` so that kazoo's threads can call it: it runs on the trio thread.
        Calls arriving after the trio run ended are dropped."""
        token = self._token
        assert token is not None

        def from_kazoo(*args: Any) -> None:
            # never block kazoo's thread: queue the call and return
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(functools.partial(fn, *args))

        return from_kazoo

    async def watch_existing(self, path: str) -> trio.Event | None:
        """An event set when ``path`` next changes or goes; None when it does not exist."""
        changed = trio.Event()
        stat = await self.call(self.kazoo.exists, path,
                               watch=self.forward(lambda event: changed.set()))
        return None if stat is None else changed

    async def _run(self, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)

    def _kazoo_state(self, state: str) -> None:
        # kazoo's listener must not block: hand the change to trio and return
        log.info("zookeeper.session", state=str(state), connect=self.connect)
        token = self._token
        if token is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(self.on_state, state)


def update_znode(kazoo: KazooClient, path: str,
                 change: Callable[[bytes | None], bytes | None]) -> None:
    """Replace the node's data with ``change(data)`` (data None: no node; result None: no node
    then), blocking. The write is conditional on the version read and starts again when another
    writer got in between (another broker, the offline ``users`` command): a read-modify-write
    that loses nobody's change -- a user's node holds both its SCRAM credentials and its
    quotas."""
    while True:
        try:
            data, stat = kazoo.get(path)
        except NoNodeError:
            data, stat = None, None
        new = change(data)
        try:
            if stat is None:
                if new is not None:
                    kazoo.create(path, new, makepath=True)
            elif new is None:
                kazoo.delete(path, version=stat.version)
            else:
                kazoo.set(path, new, version=stat.version)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue


__all__ = ["KazooException", "KazooState", "ZooKeeper", "ZooKeeperUnavailableError",
           "split_connect", "update_znode"]
