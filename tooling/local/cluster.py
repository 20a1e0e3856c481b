"""A cluster on this machine: a standalone ZooKeeper and N broker processes on 127.0.0.1.

``ZooKeeperServer`` runs Debian's ZooKeeper (``apt-get install zookeeper``) in a directory of
its own, on a free loopback port unless told one; tests and ``odradek cluster up`` use it.
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

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from client.durations import seconds_text
from client.errors import ClientError

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # Debian's libzookeeper-java
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")  # Debian's libslf4j-java
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = "install it with `apt-get install zookeeper` (Debian; it brings Java 17)"
CLUSTER_FILE = "cluster.json"
DEFAULT_CHROOT = "/odradek"
LOOPBACK = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
_POLL_INTERVAL = 0.05
_PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread
_LISTENING = re.compile(r"^odradek broker (\d+) listening on (\S+):(\d+)$")
_KAFKA_LISTENING = re.compile(r"^odradek broker \d+ kafka listener \S+ on (\S+:\d+)$")
#: what every broker started here listens on for Kafka's clients: a free port on loopback
KAFKA_LISTENERS = f"PLAINTEXT://{LOOPBACK}:0"


class LocalClusterError(ClientError):
    """A local ZooKeeper or broker would not start or stop; the message says which and why."""


class ZooKeeperUnavailableError(LocalClusterError):
    """ZooKeeper or Java is not installed; the message says how to install it."""


# ------------------------------------------------------------------------------- processes


def process_cmdline(pid: int) -> tuple[str, ...] | None:
    """The command line of a running process; None when it is gone or a zombie, so a reused
    or dead PID never looks like ours."""
    proc = Path(f"/proc/{pid}")
    deadline = time.monotonic() + 1.0
    while True:
        try:
            stat = (proc / "stat").read_text()
            data = (proc / "cmdline").read_bytes()
        except OSError:
            return None
        fields = stat.rpartition(")")[2].split()  # state, ppid, ..., flags (7th)
        if fields[0] in ("Z", "X"):
            return None
        # Empty also for a moment inside exec (the new image's arguments are not yet in
        # place, though Popen has returned); a kernel thread's stays empty.
        kernel_thread = int(fields[6]) & _PF_KTHREAD
        if data or kernel_thread or time.monotonic() >= deadline:
            return tuple(data.rstrip(b"\0").decode("utf-8", "surrogateescape").split("\0"))
        time.sleep(0.005)


@dataclass(frozen=True)
class RecordedProcess:
    """A process this module started: its PID and the exact command line it was started with."""

    pid: int
    cmdline: tuple[str, ...]

    def is_running(self) -> bool:
        _reap_if_child(self.pid)
        return process_cmdline(self.pid) == self.cmdline

    def stop(self, timeout: float = STOP_TIMEOUT) -> str:
        """SIGTERM, then SIGKILL after ``timeout``; only while the PID still runs our command.
        Returns "stopped", "killed", "not running" or "not ours" (the PID now belongs to
        another program, which is left alone)."""
        _reap_if_child(self.pid)
        current = process_cmdline(self.pid)
        if current is None:
            return "not running"
        if current != self.cmdline:
            return "not ours"
        if not self._signal(signal.SIGTERM):
            return "not running"
        if self._wait_gone(timeout):
            return "stopped"
        if self.is_running() and self._signal(signal.SIGKILL) and not self._wait_gone(timeout):
            raise LocalClusterError(f"pid {self.pid} is still running after SIGKILL")
        return "killed"

    def _signal(self, signum: signal.Signals) -> bool:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.is_running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL)
        return True


def _reap_if_child(pid: int) -> None:
    """Collect the exit status of our own finished child, so it stops being a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "".join(text.splitlines(keepends=True)[-lines:])


# ------------------------------------------------------------------------------- ZooKeeper


def find_java(environ: Mapping[str, str] | None = None) -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    if found is None:
        raise ZooKeeperUnavailableError(
            "ZooKeeper needs Java (17): neither $JAVA_HOME/bin/java nor java on PATH; "
            + INSTALL_HINT
        )
    return found


def four_letter_word(port: int, word: str, *, host: str = LOOPBACK, timeout: float = 2.0) -> str:
    """ZooKeeper's answer to a four-letter command (``srvr``, ``ruok``...); "" when it does
    not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(word.encode())
            chunks = []
            while chunk := conn.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """A standalone ZooKeeper: zoo.cfg, its data and its log (``zookeeper.log``) under
    ``directory``, serving 127.0.0.1:``port`` (a free port when 0, kept across restarts).

        with ZooKeeperServer(tmp / "zk") as zk:
            connect = zk.connect            # "127.0.0.1:PORT"
            zk.kill(); zk.restart()         # SIGKILL, then the same port and data again

    ``detached`` starts it in a session of its own so it outlives this process (``odradek
    cluster up``); otherwise it shares our process group and dies with an interrupted test run.
    """

    def __init__(
        self,
        directory: Path,
        port: int = 0,
        *,
        tick_time_ms: int = 2000,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60_000,
        detached: bool = False,
        jar: Path = ZOOKEEPER_JAR,
    ) -> None:
        self.directory = Path(directory).absolute()
        self.port = port
        self.tick_time_ms = tick_time_ms
        # Low enough for tests' short sessions (a dead broker's ephemeral node goes quickly).
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.detached = detached
        self.jar = Path(jar)
        self.returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._command: tuple[str, ...] = ()

    @property
    def connect(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise LocalClusterError("ZooKeeper is not started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def process(self) -> RecordedProcess:
        """This server as ``cluster.json`` records it."""
        return RecordedProcess(self.pid, self._command)

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Start and wait until it serves (``srvr`` prints its ``Mode:``; ``ruok`` answers
        earlier, while it still refuses requests). A port picked here that another process
        took meanwhile is picked again."""
        if self.running:
            raise LocalClusterError("ZooKeeper is already running")
        java = find_java()
        for path in (self.jar, SLF4J_SIMPLE_JAR):
            if not path.is_file():
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper is not installed here ({path} is missing); {INSTALL_HINT}"
                )
        pick_port = self.port == 0
        for _attempt in range(3):
            if pick_port:
                self.port = _free_port()
            self._spawn(java)
            failure = self._wait_serving(timeout)
            if failure is None:
                return self
            log = _tail(self.log_path)
            if not (pick_port and "Address already in use" in log):
                raise LocalClusterError(f"ZooKeeper on port {self.port} {failure}; log:\n{log}")
        raise LocalClusterError(f"ZooKeeper found no free port; log:\n{_tail(self.log_path)}")

    def _spawn(self, java: str) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={LOOPBACK}\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "admin.enableServer=false\n"
            # kazoo's server_version() needs envi
            "4lw.commands.whitelist=ruok,srvr,stat,envi\n"
        )
        # Only these two jars: the first's manifest brings the rest of its classpath, and all
        # of /usr/share/java would bring a second slf4j provider that breaks logging.
        self._command = (
            java, "-Xmx256m", "-cp", f"{self.jar}:{SLF4J_SIMPLE_JAR}",
            ZOOKEEPER_MAIN, str(self.config_path),
        )
        with self.log_path.open("ab") as log:
            self.returncode = None
            self._proc = subprocess.Popen(
                self._command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=self.detached,
            )

    def _wait_serving(self, timeout: float) -> str | None:
        """None once serving; else what went wrong (the process is then stopped)."""
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                self.returncode = self._proc.returncode
                self._proc = None
                return f"exited with status {self.returncode}"
            answer = four_letter_word(self.port, "srvr", timeout=1.0)
            if any(line.startswith("Mode:") for line in answer.splitlines()):
                return None
            if time.monotonic() >= deadline:
                self.kill()
                return f"was not serving within {seconds_text(timeout)}"
            time.sleep(_POLL_INTERVAL)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit status."""
        if self._proc is None:
            return self.returncode
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        try:
            self.returncode = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.send_signal(signal.SIGKILL)
            self.returncode = self._proc.wait(timeout)
        self._proc = None
        return self.returncode

    def kill(self) -> int | None:
        """SIGKILL: a crash, for tests of what brokers do without ZooKeeper."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
        return self.stop()

    def restart(self, timeout: float = START_TIMEOUT) -> Self:
        """Stop if running and start again on the same port with the same data."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> Self:
        return self if self.running else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


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
class ClusterRecord:
    """What ``DIR/cluster.json`` holds: enough for ``down`` to stop exactly what ``up``
    started, and for ``status --dir`` to find the brokers."""

    zookeeper_connect: str  # as given to the brokers, chroot included
    zookeeper: RecordedProcess | None  # None when the ZooKeeper was not started by us
    zookeeper_log: str | None
    brokers: tuple[BrokerRecord, ...]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers if b.port)

    @property
    def kafka_bootstrap(self) -> str:
        """The brokers' Kafka-protocol listeners, for kcat and Kafka's client libraries."""
        return ",".join(b.kafka_address for b in self.brokers if b.kafka_address)

    def processes(self) -> list[tuple[str, RecordedProcess]]:
        """Every recorded process, named, in the order ``down`` stops them: brokers from the
        highest id, then ZooKeeper (which the brokers need while they shut down)."""
        brokers = sorted(self.brokers, key=lambda b: b.broker_id, reverse=True)
        named = [(f"broker {b.broker_id}", b.process) for b in brokers]
        if self.zookeeper is not None:
            named.append(("zookeeper", self.zookeeper))
        return named

    def to_json(self) -> dict[str, Any]:
        zookeeper: dict[str, Any] = {
            "connect": self.zookeeper_connect,
            "started_here": self.zookeeper is not None,
        }
        if self.zookeeper is not None:
            zookeeper |= {
                "pid": self.zookeeper.pid,
                "cmdline": list(self.zookeeper.cmdline),
                "log_file": self.zookeeper_log,
            }
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
                if zk.get("started_here")
                else None
            ),
            zookeeper_log=zk.get("log_file"),
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
        self, brokers: int, *, zookeeper: str | None = None, rack_count: int = 0
    ) -> ClusterRecord:
        """Start a ZooKeeper (unless ``zookeeper`` is given: ``HOST:PORT[,...][/chroot]``) and
        ``brokers`` brokers; return once every broker listens. Racks ``rack-0`` ..
        ``rack-(rack_count-1)`` go round-robin over the brokers. On any failure (or Ctrl-C)
        everything started here is stopped again and the error raised."""
        if brokers < 1:
            raise LocalClusterError("a cluster needs at least one broker")
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
        started: list[BrokerRecord] = []
        try:
            if zookeeper is None:
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
            if server is not None:
                server.stop(self.stop_timeout)
            self.record_path.unlink(missing_ok=True)
            raise

    def down(self) -> list[tuple[str, int, str]]:
        """Stop every recorded process still running our command: brokers (highest id first),
        then the ZooKeeper if ``up`` started it. Returns (name, pid, outcome) per process;
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
        log = _tail(Path(broker.log_file))
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
