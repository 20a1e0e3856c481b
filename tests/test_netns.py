"""tests/netns.py: the private network of hosts that the cluster tests on distinct hosts run on.

The subnet choice and the refusal without root need nothing; the rest makes real namespaces
(as root; skipped with the reason elsewhere): a host detached or split off is unreachable by
timeouts, healing brings it back, and closing leaves nothing behind.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.netns import TEST_PROCESS, NetworkUnavailableError, PrivateNetwork, free_subnet

#: a one-connection-at-a-time TCP server printing "ready" once listening, then its peer's address
_SERVER = """
import socket, sys
server = socket.create_server((sys.argv[1], 7000))
print("ready", flush=True)
while True:
    conn, peer = server.accept()
    conn.sendall(peer[0].encode())
    conn.close()
"""
#: connects to argv[1]:7000 within argv[2] seconds: prints what the server said, or the error
_CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2])) as conn:
        print(conn.recv(64).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


def test_the_subnet_overlaps_none_of_the_machines_networks() -> None:
    taken = [ipaddress.IPv4Network("10.20.0.0/16"), ipaddress.IPv4Network("10.30.5.0/24")]
    draws = iter([20, 7, 30, 5, 30, 6])  # 10.20.7.0 and 10.30.5.0 are taken, 10.30.6.0 is not
    assert free_subnet(taken, lambda low, high: next(draws)) == ipaddress.IPv4Network(
        "10.30.6.0/24")
    with pytest.raises(NetworkUnavailableError):
        free_subnet([ipaddress.IPv4Network("10.0.0.0/8")])


def test_without_root_it_says_so_and_makes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    network = PrivateNetwork(["a"])
    with pytest.raises(NetworkUnavailableError, match="root"):
        network.open()
    assert network.hosts == {}


@pytest.fixture
def network() -> Iterator[PrivateNetwork]:
    try:
        net = PrivateNetwork(["server", "near", "far"]).open()
    except NetworkUnavailableError as exc:
        pytest.skip(f"needs network namespaces: {exc}")
    server = subprocess.Popen(net.hosts["server"].command(
        sys.executable, "-c", _SERVER, net.hosts["server"].address),
        stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield net
    finally:
        server.kill()
        server.wait()
        net.close()


def _reach(net: PrivateNetwork, source: str) -> str:
    """What a connection from ``source`` (a host, or the test's process) to the server got."""
    client = [sys.executable, "-c", _CLIENT, net.hosts["server"].address, "1.5"]
    if source != TEST_PROCESS:
        client = net.hosts[source].command(*client)
    return subprocess.run(client, capture_output=True, text=True, timeout=30,
                          check=True).stdout.strip()


@pytest.mark.timeout(60)
def test_hosts_reach_each_other_until_detached_or_split_and_again_once_healed(
    network: PrivateNetwork,
) -> None:
    hosts = network.hosts
    assert len({h.address for h in hosts.values()} | {network.gateway}) == 4
    everyone = {"near": hosts["near"].address, "far": hosts["far"].address,
                TEST_PROCESS: network.gateway}
    assert {s: _reach(network, s) for s in everyone} == everyone  # each seen by its address

    network.detach("server")  # frames dropped: a timeout, not a refusal
    assert {s: _reach(network, s) for s in everyone} == dict.fromkeys(everyone, "TimeoutError")
    network.attach("server")
    assert _reach(network, "near") == hosts["near"].address

    network.split(["server"], ["far", TEST_PROCESS])  # "near" is on neither side
    assert {s: _reach(network, s) for s in everyone} == {
        "near": hosts["near"].address, "far": "TimeoutError", TEST_PROCESS: "TimeoutError"}
    network.heal()
    assert {s: _reach(network, s) for s in everyone} == everyone


def test_closing_removes_the_namespaces_the_links_and_the_bridge() -> None:
    before = _addresses()
    try:
        net = PrivateNetwork(["a", "b"]).open()
    except NetworkUnavailableError as exc:
        pytest.skip(f"needs network namespaces: {exc}")
    made = [h.namespace for h in net.hosts.values()]
    links = [net.bridge, *(h.link for h in net.hosts.values())]
    net.detach("a")
    net.split(["a"], ["b"])
    net.close()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                check=True).stdout
    assert not any(name in namespaces for name in made)
    for link in links:
        assert subprocess.run(["ip", "link", "show", link], capture_output=True).returncode != 0
    assert _addresses() == before


def _addresses() -> str:
    return subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                          check=True).stdout
