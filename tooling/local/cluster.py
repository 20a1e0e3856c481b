"""A cluster on this machine: ZooKeeper and N broker processes on 127.0.0.1.

``ZooKeeperServer`` (tooling.local.zookeeper) runs Debian's ZooKeeper in a directory of its
own; ``odradek cluster up`` starts one, or with ``--zookeepers N`` an ensemble of N
(tooling.local.zookeeper_ensemble).
``LocalCluster`` is ``odradek cluster up`` / ``down``: it starts ``python -m broker start`` once
per broker against that ZooKeeper and records every process it started in ``DIR/cluster.json``,
so a later ``down`` -- another process, maybe another day -- stops exactly those and nothing
else. Before signalling a recorded PID it checks that ``/proc/PID/cmdline`` is still the
command it started (PIDs get reused), which makes this module Linux-only. Each broker also
opens a Kafka-protocol listener on a free loopback port (``ODRADEK_KAFKA_LISTENERS``), recorded
beside its own address, so kcat and Kafka's client libraries reach the cluster too.

It starts processes only -- it imports no broker code and never talks to ZooKeeper (a broker
creates its own chroot, as Kafka's does) -- so a cluster it starts runs exactly what
``odradek broker start`` runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from client.durations import seconds_text
from tooling.local.processes import (
    _POLL_INTERVAL,
    LOOPBACK,
    START_TIMEOUT,
    STOP_TIMEOUT,
    LocalClusterError,
    RecordedProcess,
    log_tail,
    process_cmdline,
)
from tooling.local.zookeeper import (
    ZOOKEEPER_JAR,
    ZooKeeperServer,
    ZooKeeperUnavailableError,
    find_java,
    four_letter_word,
    zookeeper_mode,
)
from tooling.local.zookeeper_ensemble import ZooKeeperEnsemble

# what callers have always imported from here, wherever it lives now
__all__ = [
    "CLUSTER_FILE", "DEFAULT_CHROOT", "KAFKA_LISTENERS", "LOOPBACK", "START_TIMEOUT",
    "STOP_TIMEOUT", "ZOOKEEPER_JAR", "BrokerRecord", "ClusterRecord", "LocalCluster",
    "LocalClusterError", "RecordedProcess", "ZooKeeperRecord", "ZooKeeperServer",
    "ZooKeeperUnavailableError", "find_java", "four_letter_word", "process_cmdline",
    "with_chroot", "zookeeper_mode",
]

CLUSTER_FILE = "cluster.json"
DEFAULT_CHROOT = "/odradek"
_LISTENING = re.compile(r"^odradek broker (\d+) listening on (\S+):(\d+)$")
_KAFKA_LISTENING = re.compile(r"^odradek broker \d+ kafka listener \S+ on (\S+:\d+)$")
#: what every broker started here listens on for Kafka's clients: a free port on loopback
KAFKA_LISTENERS = f"PLAINTEXT://{LOOPBACK}:0"


# ---------------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class BrokerRecord:
    broker_id: int
    host: str
    port: int
    rack: str | None
    data_dir: str
    log_file: str  # stderr: the broker's structlog events
    stdout_file: str  # its "listening on" line
    process: RecordedProcess
    kafka_address: str | None = None  # HOST:PORT of its Kafka-protocol listener, once known

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ZooKeeperRecord:
    """One server of a ZooKeeper ensemble that ``up`` started."""

    server_id: int
    port: int  # its client port on LOOPBACK
    log_file: str
    process: RecordedProcess


@dataclass(frozen=True)
class ClusterRecord:
    """What ``DIR/cluster.json`` holds: enough for ``down`` to stop exactly what ``up``
    started, and for ``status --dir`` to find the brokers."""

    zookeeper_connect: str  # as given to the brokers, chroot included
    zookeeper: RecordedProcess | None  # a standalone ZooKeeper started by us, else None
    zookeeper_log: str | None
    brokers: tuple[BrokerRecord, ...]
    zookeeper_servers: tuple[ZooKeeperRecord, ...] = ()  # an ensemble started by us

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers if b.port)

    @property
    def kafka_bootstrap(self) -> str:
        """The brokers' Kafka-protocol listeners, for kcat and Kafka's client libraries."""
        return ",".join(b.kafka_address for b in self.brokers if b.kafka_address)

    def processes(self) -> list[tuple[str, RecordedProcess]]:
        """Every recorded process, named, in the order ``down`` stops them: brokers from the
        highest id, then ZooKeeper (which the brokers need while they shut down): the
        standalone one, or each server of the ensemble."""
        brokers = sorted(self.brokers, key=lambda b: b.broker_id, reverse=True)
        named = [(f"broker {b.broker_id}", b.process) for b in brokers]
        if self.zookeeper is not None:
            named.append(("zookeeper", self.zookeeper))
        named += [(f"zookeeper {z.server_id}", z.process) for z in self.zookeeper_servers]
        return named

    def to_json(self) -> dict[str, Any]:
        zookeeper: dict[str, Any] = {
            "connect": self.zookeeper_connect,
            "started_here": self.zookeeper is not None or bool(self.zookeeper_servers),
        }
        if self.zookeeper is not None:
            zookeeper |= {
                "pid": self.zookeeper.pid,
                "cmdline": list(self.zookeeper.cmdline),
                "log_file": self.zookeeper_log,
            }
        if self.zookeeper_servers:
            zookeeper["servers"] = [
                {
                    "id": z.server_id,
                    "port": z.port,
                    "pid": z.process.pid,
                    "cmdline": list(z.process.cmdline),
                    "log_file": z.log_file,
                }
                for z in self.zookeeper_servers
            ]
        return {
            "bootstrap": self.bootstrap,
            "kafka_bootstrap": self.kafka_bootstrap,
            "zookeeper": zookeeper,
            "brokers": [
                {
                    "id": b.broker_id,
                    "host": b.host,
                    "port": b.port,
                    "kafka_address": b.kafka_address,
                    "rack": b.rack,
                    "pid": b.process.pid,
                    "data_dir": b.data_dir,
                    "log_file": b.log_file,
                    "stdout_file": b.stdout_file,
                    "cmdline": list(b.process.cmdline),
                }
                for b in self.brokers
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterRecord:
        zk = data["zookeeper"]
        return cls(
            zookeeper_connect=zk["connect"],
            zookeeper=(
                RecordedProcess(int(zk["pid"]), tuple(zk["cmdline"]))
                if zk.get("started_here") and "pid" in zk
                else None
            ),
            zookeeper_log=zk.get("log_file"),
            zookeeper_servers=tuple(
                ZooKeeperRecord(
                    server_id=int(z["id"]),
                    port=int(z["port"]),
                    log_file=z["log_file"],
                    process=RecordedProcess(int(z["pid"]), tuple(z["cmdline"])),
                )
                for z in zk.get("servers", ())
            ),
            brokers=tuple(
                BrokerRecord(
                    broker_id=int(b["id"]),
                    host=b["host"],
                    port=int(b["port"]),
                    rack=b.get("rack"),
                    data_dir=b["data_dir"],
                    log_file=b["log_file"],
                    stdout_file=b["stdout_file"],
                    process=RecordedProcess(int(b["pid"]), tuple(b["cmdline"])),
                    kafka_address=b.get("kafka_address"),  # absent from older records
                )
                for b in data["brokers"]
            ),
        )


def with_chroot(connect: str, chroot: str = DEFAULT_CHROOT) -> str:
    """``HOST:PORT[,...]`` gets ``chroot`` appended; a connect string naming its own chroot
    is kept as it is."""
    return connect if "/" in connect else connect + chroot


class LocalCluster:
    """Brokers on 127.0.0.1 (and a ZooKeeper unless one is given) whose processes outlive the
    command that started them, recorded in ``directory/cluster.json``.

    Broker N: data in ``directory/broker-N``, events in ``broker-N.log``, its listening lines
    in ``broker-N.out``; ids count from 0. ``broker_args`` go to every ``broker start``; its
    Kafka-protocol listener is ``KAFKA_LISTENERS`` whatever they or the environment say, as its
    host and port are ours to pick.
    """

    def __init__(
        self,
        directory: Path,
        *,
        broker_args: Sequence[str] = (),
        python: str = sys.executable,
        start_timeout: float = START_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> None:
        self.directory = Path(directory).absolute()
        self.broker_args = tuple(broker_args)
        self.python = python
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout

    @property
    def record_path(self) -> Path:
        return self.directory / CLUSTER_FILE

    def read(self) -> ClusterRecord | None:
        """The recorded cluster, or None when there is none; a damaged file is an error."""
        try:
            data = json.loads(self.record_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LocalClusterError(f"cannot read {self.record_path}: {exc}") from None
        try:
            return ClusterRecord.from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise LocalClusterError(f"{self.record_path} is not a cluster record: {exc}") from None

    def running(self) -> list[str]:
        """Names of the recorded processes still running (still ours, by command line)."""
        record = self.read()
        if record is None:
            return []
        return [name for name, process in record.processes() if process.is_running()]

    def up(
        self, brokers: int, *, zookeeper: str | None = None, rack_count: int = 0,
        zookeepers: int = 1,
    ) -> ClusterRecord:
        """Start a ZooKeeper (unless ``zookeeper`` is given: ``HOST:PORT[,...][/chroot]``) and
        ``brokers`` brokers; return once every broker listens. ``zookeepers`` above 1 starts
        an ensemble of that many servers instead of a standalone one. Racks ``rack-0`` ..
        ``rack-(rack_count-1)`` go round-robin over the brokers. On any failure (or Ctrl-C)
        everything started here is stopped again and the error raised."""
        if brokers < 1:
            raise LocalClusterError("a cluster needs at least one broker")
        if zookeepers < 1:
            raise LocalClusterError("a cluster needs at least one ZooKeeper server")
        if zookeeper is not None and zookeepers != 1:
            raise LocalClusterError("a ZooKeeper to use and servers to start exclude each other")
        if rack_count < 0:
            raise LocalClusterError("the rack count must not be negative")
        alive = self.running()
        if alive:
            raise LocalClusterError(
                f"{self.directory} already has a running cluster ({', '.join(alive)}); "
                f"stop it first with `odradek cluster down --dir {self.directory}`"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        server: ZooKeeperServer | None = None
        servers: list[ZooKeeperServer] = []
        started: list[BrokerRecord] = []
        try:
            if zookeeper is None and zookeepers > 1:
                ensemble = ZooKeeperEnsemble(self.directory / "zookeeper", zookeepers,
                                             detached=True)
                servers = list(ensemble.servers)
                ensemble.start(self.start_timeout)
                zookeeper_connect = with_chroot(ensemble.connect)
            elif zookeeper is None:
                server = ZooKeeperServer(self.directory / "zookeeper", detached=True)
                server.start(self.start_timeout)
                zookeeper_connect = with_chroot(server.connect)
            else:
                zookeeper_connect = with_chroot(zookeeper)
            record = ClusterRecord(
                zookeeper_connect,
                None if server is None else server.process,
                None if server is None else str(server.log_path),
                (),
                tuple(
                    ZooKeeperRecord(n, s.port, str(s.log_path), s.process)
                    for n, s in enumerate(servers, start=1)
                ),
            )
            for broker_id in range(brokers):
                started.append(self._spawn_broker(broker_id, zookeeper_connect, rack_count))
            # Recorded before waiting, so an interrupted ``up`` still leaves ``down`` a record.
            self._write(replace(record, brokers=tuple(started)))
            record = replace(record, brokers=self._wait_listening(started))
            self._write(record)
            return record
        except BaseException:
            for broker in reversed(started):
                broker.process.stop(self.stop_timeout)
            for zk_server in [server, *servers]:
                if zk_server is not None:
                    zk_server.stop(self.stop_timeout)
            self.record_path.unlink(missing_ok=True)
            raise

    def down(self) -> list[tuple[str, int, str]]:
        """Stop every recorded process still running our command: brokers (highest id first),
        then the ZooKeeper servers if ``up`` started them. Returns (name, pid, outcome) per process;
        outcome as ``RecordedProcess.stop``. The record goes once nothing of it runs."""
        record = self.read()
        if record is None:
            raise LocalClusterError(f"no cluster recorded in {self.record_path}")
        outcomes = [
            (name, process.pid, process.stop(self.stop_timeout))
            for name, process in record.processes()
        ]
        self.record_path.unlink(missing_ok=True)
        return outcomes

    # ---------------------------------------------------------------------------- helpers

    def _spawn_broker(
        self, broker_id: int, zookeeper_connect: str, rack_count: int
    ) -> BrokerRecord:
        data_dir = self.directory / f"broker-{broker_id}"
        log_file = self.directory / f"broker-{broker_id}.log"
        stdout_file = self.directory / f"broker-{broker_id}.out"
        rack = f"rack-{broker_id % rack_count}" if rack_count else None
        command = [
            self.python, "-m", "broker", "start",
            "--host", LOOPBACK, "--port", "0", "--data-dir", str(data_dir),
            "--broker-id", str(broker_id), "--zookeeper-connect", zookeeper_connect,
        ]
        if rack is not None:
            command += ["--broker-rack", rack]
        command += self.broker_args
        env = {**os.environ, "ODRADEK_KAFKA_LISTENERS": KAFKA_LISTENERS}
        with stdout_file.open("wb") as out, log_file.open("ab") as log:
            log.write(f"--- odradek cluster up: {' '.join(command[1:])}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=log,
                cwd=self.directory,
                env=env,
                start_new_session=True,  # outlives `odradek cluster up` and its terminal
            )
        return BrokerRecord(
            broker_id, LOOPBACK, 0, rack, str(data_dir), str(log_file), str(stdout_file),
            RecordedProcess(proc.pid, tuple(command)),
        )

    def _wait_listening(self, brokers: Sequence[BrokerRecord]) -> tuple[BrokerRecord, ...]:
        """Each broker with the addresses of its listening lines (its own, then its Kafka
        listener's), all within the start timeout."""
        deadline = time.monotonic() + self.start_timeout
        found: dict[int, BrokerRecord] = {}
        while len(found) < len(brokers):
            for broker in brokers:
                if broker.broker_id in found:
                    continue
                lines = _complete_lines(Path(broker.stdout_file))
                listening = _LISTENING.match(lines[0]) if lines else None
                if lines and listening is None:
                    raise self._start_error(broker, f"printed {lines[0]!r} instead of listening")
                kafka = next(filter(None, map(_KAFKA_LISTENING.match, lines)), None)
                if listening is not None and kafka is not None:
                    found[broker.broker_id] = replace(
                        broker, host=listening[2], port=int(listening[3]), kafka_address=kafka[1]
                    )
                elif not broker.process.is_running():
                    raise self._start_error(broker, "exited before listening")
            if len(found) < len(brokers):
                if time.monotonic() >= deadline:
                    late = next(b for b in brokers if b.broker_id not in found)
                    raise self._start_error(
                        late, f"was not listening within {seconds_text(self.start_timeout)}"
                    )
                time.sleep(_POLL_INTERVAL)
        return tuple(found[b.broker_id] for b in brokers)

    @staticmethod
    def _start_error(broker: BrokerRecord, what: str) -> LocalClusterError:
        log = log_tail(Path(broker.log_file))
        return LocalClusterError(
            f"broker {broker.broker_id} {what}; {broker.log_file} ends:\n{log}"
        )

    def _write(self, record: ClusterRecord) -> None:
        # Written whole and renamed, so a reader never sees half a record.
        temporary = self.record_path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(record.to_json(), indent=2) + "\n")
        temporary.replace(self.record_path)


def _complete_lines(path: Path) -> list[str]:
    """The file's complete lines so far (none while it is missing)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return data[: data.rfind(b"\n") + 1].decode(errors="replace").splitlines()
