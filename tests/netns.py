"""Hosts, not ports: a private network of this machine's own for one test (needs root).

Each host (a broker, a ZooKeeper server) gets a network namespace with loopback up and one end
of a veth pair, the other end plugged into a bridge; each has its own address on a private /24
that is picked here, free of every address and route this machine has. The bridge carries an
address too, so the test's own process -- in the root namespace -- reaches every host; the
hosts reach each other and the test, and nothing else: no default route in any namespace, no
forwarding or NAT set up, no link out of the bridge.

    with PrivateNetwork(["zookeeper", "broker-0", "broker-1"]) as net:
        zk = net.hosts["zookeeper"]          # .address "10.a.b.2", .command(...) to run there
        net.detach("broker-0")               # its link is down: peers see timeouts
        net.attach("broker-0")
        net.split(["broker-0"], ["broker-1", "zookeeper", TEST_PROCESS])
        net.heal()                           # every host attached, every split undone

Faults act on frames, never on sockets, so a peer finds out the way it would across a real
network -- by timeouts, never by a reset or a closed connection:

- ``detach`` sets the bridge's end of the host's veth down: nothing goes in or out (the
  test's process cannot reach it either), its own link reports no carrier.
- ``split`` pins, in each host of one side, every host of the other side to a MAC address no
  host has (a permanent neighbour entry, which ARP does not overwrite): frames between the
  sides go out and are dropped by the bridge's ports, while each side reaches itself and the
  hosts named in neither side. The test's process (``TEST_PROCESS``) reaches both sides unless
  a side names it: its clients are then on that side, as a client on one side of a real split
  is (pinned on the bridge, in the root namespace). ``heal`` removes the pins and ARP
  resolves again. (No nftables, iptables or ``tc`` needed, which not every machine has;
  bridge port isolation cannot split a bridge into two sides.)

Everything made is removed by ``close`` (and on leaving the ``with`` block, however it ends):
the veth pairs, the namespaces and the bridge, each named with a random token, and nothing
else is touched. Processes started in a namespace must be stopped first. Where namespaces
cannot be made (not root, no ``ip``, no permission) ``NetworkUnavailableError`` says why.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

#: the MAC a split pins the other side's hosts to: locally administered, on no host
NOWHERE_MAC = "02:00:00:00:0d:0d"
#: the host's end of each veth pair, inside its namespace
HOST_LINK = "eth0"
#: the test's own process, in the root namespace, as a side of a split may name it
TEST_PROCESS = "(test process)"
_COMMAND_TIMEOUT = 20.0


class NetworkUnavailableError(RuntimeError):
    """This machine or user cannot make network namespaces; the message says why."""


@dataclass(frozen=True)
class Host:
    """One host of the network: its namespace, its address, and the bridge's end of its link."""

    name: str
    namespace: str
    address: str
    link: str

    def command(self, *argv: str) -> list[str]:
        """``argv`` run on this host (``ip netns exec`` execs it: the PID is the program's)."""
        return ["ip", "netns", "exec", self.namespace, *argv]


class PrivateNetwork:
    """A bridge and one namespace per named host, made on ``open`` (or ``with``)."""

    def __init__(self, names: Sequence[str]) -> None:
        if len(set(names)) != len(names) or not names or len(names) > 200:
            raise ValueError(f"between 1 and 200 distinct host names, not {names!r}")
        self.names = list(names)
        self.token = secrets.token_hex(3)
        self.bridge = f"odbr{self.token}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""  # the test's own address on the bridge
        self.hosts: dict[str, Host] = {}
        self.detached: set[str] = set()
        self._pins: set[tuple[str, str]] = set()  # (host, pinned peer)
        self._undo: list[list[str]] = []  # what close() runs, last first

    # ------------------------------------------------------------------------ making it

    def open(self) -> Self:
        """Make the bridge and every host; on any failure remove what was made and raise
        NetworkUnavailableError with the command and what it said."""
        if os.geteuid() != 0:
            raise NetworkUnavailableError("network namespaces need root")
        if shutil.which("ip") is None:
            raise NetworkUnavailableError("no `ip` command (iproute2) to make namespaces with")
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def _make(self) -> None:
        self.subnet = free_subnet(_taken_networks())
        addresses = [str(a) for a in self.subnet.hosts()]
        self.gateway = addresses[0]
        self._made(["ip", "link", "add", self.bridge, "type", "bridge"],
                   ["ip", "link", "del", self.bridge])
        self._run("ip", "addr", "add", f"{self.gateway}/{self.subnet.prefixlen}",
                  "dev", self.bridge)
        self._run("ip", "link", "set", self.bridge, "up")
        for index, name in enumerate(self.names):
            host = Host(name, f"odradek-{self.token}-{index}", addresses[index + 1],
                        f"odv{self.token}-{index}")
            self._made(["ip", "netns", "add", host.namespace],
                       ["ip", "netns", "del", host.namespace])
            self._made(["ip", "link", "add", host.link, "type", "veth", "peer", "name",
                        HOST_LINK, "netns", host.namespace], ["ip", "link", "del", host.link])
            self._run("ip", "link", "set", host.link, "master", self.bridge, "up")
            inside = ["ip", "-n", host.namespace]
            self._run(*inside, "addr", "add", f"{host.address}/{self.subnet.prefixlen}",
                      "dev", HOST_LINK)
            self._run(*inside, "link", "set", HOST_LINK, "up")
            self._run(*inside, "link", "set", "lo", "up")
            self.hosts[name] = host
        # what starting a program there needs (it mounts /sys for the namespace)
        self._run(*self.hosts[self.names[0]].command("true"))

    def _made(self, make: list[str], undo: list[str]) -> None:
        self._run(*make)
        self._undo.append(undo)

    def _run(self, *argv: str) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False,
                                  timeout=_COMMAND_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NetworkUnavailableError(f"`{' '.join(argv)}`: {exc}") from exc
        if done.returncode != 0:
            raise NetworkUnavailableError(
                f"`{' '.join(argv)}` failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def close(self) -> None:
        """Remove everything made here, last made first; raise the first failure after
        trying each (deleting a namespace's veth end before it, the bridge last)."""
        failures = []
        while self._undo:
            undo = self._undo.pop()
            try:
                self._run(*undo)
            except NetworkUnavailableError as exc:
                failures.append(str(exc))
        self.hosts.clear()
        self.detached.clear()
        self._pins.clear()
        if failures:
            raise RuntimeError("the private network was not removed whole: "
                               + "; ".join(failures))

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------------ faults

    def detach(self, name: str) -> None:
        """Take the host off the bridge: its link goes down at the bridge's end, so frames
        to and from it are dropped -- its peers' connections time out, none is closed."""
        self._run("ip", "link", "set", self.hosts[name].link, "down")
        self.detached.add(name)

    def attach(self, name: str) -> None:
        """Put a detached host back on the bridge."""
        self._run("ip", "link", "set", self.hosts[name].link, "up")
        self.detached.discard(name)

    def split(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """No host of ``side_a`` reaches a host of ``side_b`` or back (until ``heal``); the
        hosts of neither side still reach everyone, and so does the test's process unless a
        side names ``TEST_PROCESS``."""
        a, b = list(side_a), list(side_b)
        if set(a) & set(b):
            raise ValueError(f"a host on both sides: {sorted(set(a) & set(b))}")
        for here, there in [(h, t) for h in a for t in b] + [(h, t) for h in b for t in a]:
            self._neighbour(here, "replace", self._address(there),
                            "lladdr", NOWHERE_MAC, "nud", "permanent")
            self._pins.add((here, there))

    def heal(self) -> None:
        """Every host attached, every split undone."""
        for name in sorted(self.detached):
            self.attach(name)
        for here, there in sorted(self._pins):
            self._neighbour(here, "del", self._address(there))
            self._pins.discard((here, there))

    def _address(self, name: str) -> str:
        return self.gateway if name == TEST_PROCESS else self.hosts[name].address

    def _neighbour(self, name: str, action: str, *args: str) -> None:
        """A neighbour entry of the host's link -- or of the bridge, the test's process's."""
        if name == TEST_PROCESS:
            self._run("ip", "neigh", action, *args, "dev", self.bridge)
        else:
            self._run("ip", "-n", self.hosts[name].namespace, "neigh", action, *args,
                      "dev", HOST_LINK)


def free_subnet(taken: Iterable[ipaddress.IPv4Network],
                choose: Callable[[int, int], int] = random.randint) -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that overlaps none of ``taken`` (this machine's addresses and
    routes), so the test's network cannot hide or capture anyone else's."""
    taken = list(taken)
    for _ in range(1000):
        candidate = ipaddress.IPv4Network(f"10.{choose(16, 254)}.{choose(0, 255)}.0/24")
        if not any(candidate.overlaps(network) for network in taken):
            return candidate
    raise NetworkUnavailableError("no free 10.x.y.0/24 for a private network")


def _taken_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine has an address in or a route to (a default route
    counts only as itself, 0.0.0.0/0 would overlap everything)."""
    taken = []
    for what in (["addr", "show"], ["route", "show", "table", "all"]):
        try:
            done = subprocess.run(["ip", "-4", "-json", *what], capture_output=True,
                                  text=True, check=True, timeout=_COMMAND_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            raise NetworkUnavailableError(f"`ip -4 {' '.join(what)}`: {exc}") from exc
        for entry in json.loads(done.stdout or "[]"):
            prefixes = [f"{a['local']}/{a['prefixlen']}" for a in entry.get("addr_info", [])]
            if entry.get("dst") not in (None, "default"):
                prefixes.append(entry["dst"])
            for prefix in prefixes:
                try:
                    taken.append(ipaddress.IPv4Network(prefix, strict=False))
                except ValueError:
                    continue  # "broadcast"/"local" entries name addresses, not networks
    return taken
