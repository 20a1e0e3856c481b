"""A cluster on distinct hosts: each broker and the ZooKeeper server in a network namespace of
its own on a private bridge (tests/netns.py), instead of ports on 127.0.0.1.

    with PrivateNetwork(host_names(3)) as network:
        zookeeper = zookeeper_on(network, tmp / "zk").start()
        cluster = HostCluster(tmp / "cluster", f"{zookeeper.connect}/t", settings, network,
                              racks={0: "rack-a", 1: "rack-b", 2: "rack-b"})
        cluster.broker(0); ...; cluster.start()
        network.detach(broker_host(0))      # a real partition: peers see timeouts

Broker i listens on, and advertises, the address of host ``broker-i``, so clients, the
controller and replica fetchers all reach it there; the test's own clients run in the root
namespace, which reaches every host (except a detached one).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster
from tests.netns import PrivateNetwork
from tooling.local.zookeeper import ZooKeeperServer

ZOOKEEPER_HOST = "zookeeper"
_ESTABLISHED = "01"  # the st column of /proc/net/tcp


def broker_host(broker_id: int) -> str:
    return f"broker-{broker_id}"


def host_names(brokers: int) -> list[str]:
    """The hosts of a cluster: ZooKeeper's and one per broker."""
    return [ZOOKEEPER_HOST, *(broker_host(i) for i in range(brokers))]


def zookeeper_on(network: PrivateNetwork, directory: Path) -> ZooKeeperServer:
    """A standalone ZooKeeper (not started) serving on the ZooKeeper host's address."""
    host = network.hosts[ZOOKEEPER_HOST]
    return ZooKeeperServer(directory, host=host.address, launcher=host.command())


class HostCluster(Cluster):
    """A ``Cluster`` whose broker i runs on host ``broker-i``, in rack ``racks[i]``."""

    def __init__(self, root: Path, zk_connect: str, settings: Mapping[str, Any],
                 network: PrivateNetwork, racks: Mapping[int, str]) -> None:
        super().__init__(root, zk_connect, settings)
        self.network = network
        self.racks = dict(racks)

    def broker(self, broker_id: int, **settings: Any) -> BrokerProcess:
        host = self.network.hosts[broker_host(broker_id)]
        rack = {"broker_rack": self.racks[broker_id]} if broker_id in self.racks else {}
        process = BrokerProcess(self.root / f"broker-{broker_id}", broker_id=broker_id,
                                settings={**self.settings, **rack, **settings},
                                host=host.address, netns=host.namespace)
        self.brokers[broker_id] = process
        return process

    def address(self, broker_id: int) -> str:
        return self.network.hosts[broker_host(broker_id)].address


def established(pid: int) -> set[tuple[tuple[str, int], tuple[str, int]]]:
    """The (local, remote) address pairs of the process's network namespace's established
    IPv4 TCP connections (``/proc/PID/net/tcp`` shows the namespace the process is in)."""
    out = set()
    with open(f"/proc/{pid}/net/tcp") as table:
        next(table)  # the header
        for line in table:
            fields = line.split()
            if fields[3] == _ESTABLISHED:
                out.add((_endpoint(fields[1]), _endpoint(fields[2])))
    return out


def _endpoint(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` -> ("127.0.0.1", 8080): the address is a 32-bit word in the
    machine's byte order."""
    address, port = text.split(":")
    return socket.inet_ntoa(struct.pack("=I", int(address, 16))), int(port, 16)
