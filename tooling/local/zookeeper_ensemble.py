"""A ZooKeeper ensemble on this machine: N servers on 127.0.0.1, each a ``ZooKeeperServer``.

Kafka's production clusters run ZooKeeper as an ensemble of 3 or 5, which keeps serving while a
majority of it runs; tests and ``odradek cluster up --zookeepers 3`` use this to find out what
brokers do when its leader dies, a minority goes, or the quorum is lost. Server N (ids from 1)
keeps zoo.cfg, ``data/myid`` and ``zookeeper.log`` in ``directory/zk-N``; its client, quorum
and election ports are picked free once and kept, so a server killed and restarted comes back
where its peers and the brokers look for it, with its data.

    with ZooKeeperEnsemble(tmp / "zk", size=3) as ensemble:
        connect = ensemble.connect          # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
        leader = ensemble.wait_for_leader()
        leader.kill(); leader.restart()
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from client.durations import seconds_text
from tooling.local.processes import LOOPBACK, START_TIMEOUT, STOP_TIMEOUT, LocalClusterError
from tooling.local.zookeeper import ZooKeeperServer

QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEFAULT_SIZE = 3
_POLL_INTERVAL = 0.05


class EnsembleServer(ZooKeeperServer):
    """One server of an ensemble: its id (``myid``) beside what ``ZooKeeperServer`` knows."""

    def __init__(self, server_id: int, directory: Path, port: int, *, extra_config: str,
                 tick_time_ms: int, detached: bool, host: str = LOOPBACK,
                 launcher: Sequence[str] = ()) -> None:
        super().__init__(directory, port, tick_time_ms=tick_time_ms, detached=detached,
                         main=QUORUM_MAIN, extra_config=extra_config, host=host,
                         launcher=launcher)
        self.server_id = server_id

    def spawn(self) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{self.server_id}\n")
        super().spawn()

    def __repr__(self) -> str:
        return f"<zookeeper {self.server_id} on {self.connect}>"


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers forming one ensemble on 127.0.0.1.

    ``tick_time_ms`` is ZooKeeper's tick: followers give up on a silent leader after
    ``syncLimit`` (5) ticks, which is how long a paused leader takes to be replaced (a killed
    one is noticed at once, its sockets close). ``detached`` as ``ZooKeeperServer``'s.
    ``hosts``: each server's (address, launcher) -- a host of its own in a network namespace
    (tests/netns.py) -- instead of 127.0.0.1.
    """

    def __init__(self, directory: Path, size: int = DEFAULT_SIZE, *, tick_time_ms: int = 1000,
                 detached: bool = False,
                 hosts: Sequence[tuple[str, Sequence[str]]] | None = None) -> None:
        if size < 1:
            raise LocalClusterError("a ZooKeeper ensemble needs at least one server")
        if hosts is not None and len(hosts) != size:
            raise LocalClusterError(f"{len(hosts)} hosts for {size} ZooKeeper servers")
        self.directory = Path(directory).absolute()
        places = list(hosts) if hosts is not None else [(LOOPBACK, ())] * size
        ports = _free_ports(3 * size)
        client, quorum, election = ports[:size], ports[size:2 * size], ports[2 * size:]
        peers = "".join(
            f"server.{n}={places[n - 1][0]}:{quorum[n - 1]}:{election[n - 1]}\n"
            for n in range(1, size + 1)
        )
        extra = f"initLimit=10\nsyncLimit=5\n{peers}"
        self.servers = [
            EnsembleServer(n, self.directory / f"zk-{n}", client[n - 1], extra_config=extra,
                           tick_time_ms=tick_time_ms, detached=detached,
                           host=places[n - 1][0], launcher=places[n - 1][1])
            for n in range(1, size + 1)
        ]

    @property
    def connect(self) -> str:
        """Every server's client address, as brokers' ``zookeeper_connect`` takes them."""
        return ",".join(s.connect for s in self.servers)

    @property
    def quorum(self) -> int:
        """How many servers must run for the ensemble to serve: a majority."""
        return len(self.servers) // 2 + 1

    def server(self, server_id: int) -> EnsembleServer:
        return self.servers[server_id - 1]

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Start every server not running and wait until each serves (as leader or follower).
        On failure the servers are stopped again and LocalClusterError raised."""
        try:
            for server in self.servers:
                if not server.running:
                    server.spawn()
            for server in self.servers:
                server.wait_serving(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        for server in self.servers:
            server.stop(timeout)

    def serving(self) -> list[EnsembleServer]:
        """The servers that answer requests now."""
        return [s for s in self.servers if s.running and s.mode() is not None]

    def leader(self) -> EnsembleServer | None:
        """The server that says it leads; None during an election or without a quorum."""
        return next((s for s in self.servers if s.running and s.mode() == "leader"), None)

    def wait_for_leader(self, timeout: float = START_TIMEOUT, *,
                        besides: Sequence[EnsembleServer] = ()) -> EnsembleServer:
        """The leader once there is one (not one of ``besides``: a paused old leader still
        says it leads when resumed, until it hears of the new one)."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self.leader()
            if leader is not None and leader not in besides:
                return leader
            if time.monotonic() >= deadline:
                raise LocalClusterError(
                    f"no ZooKeeper leader within {seconds_text(timeout)}; modes: "
                    + ", ".join(f"{s.server_id}={s.mode()}" for s in self.servers)
                )
            time.sleep(_POLL_INTERVAL)

    def followers(self) -> list[EnsembleServer]:
        return [s for s in self.servers if s.running and s.mode() == "follower"]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[EnsembleServer]:
        return iter(self.servers)


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on loopback now (held open together while picked, so no
    two are the same)."""
    with contextlib.ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
