"""A ZooKeeper server on this machine: Debian's ZooKeeper (``apt-get install zookeeper``) in a
directory of its own, on a free loopback port unless told one. Tests, ``odradek cluster up``
and the servers of an ensemble (tooling.local.zookeeper_ensemble) run it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from client.durations import seconds_text
from tooling.local.processes import (
    _POLL_INTERVAL,
    LOOPBACK,
    START_TIMEOUT,
    STOP_TIMEOUT,
    LocalClusterError,
    RecordedProcess,
    free_port,
    log_tail,
)

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # Debian's libzookeeper-java
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")  # Debian's libslf4j-java
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = "install it with `apt-get install zookeeper` (Debian; it brings Java 17)"


class ZooKeeperUnavailableError(LocalClusterError):
    """ZooKeeper or Java is not installed; the message says how to install it."""





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


def zookeeper_mode(port: int, host: str = LOOPBACK) -> str | None:
    """What ``srvr`` says the server is ("standalone", "leader", "follower"); None while it
    does not serve (down, paused, or a server of an ensemble without a majority)."""
    for line in four_letter_word(port, "srvr", host=host, timeout=1.0).splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None


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
        main: str = ZOOKEEPER_MAIN,
        extra_config: str = "",
        host: str = LOOPBACK,
        launcher: Sequence[str] = (),
    ) -> None:
        """``main`` and ``extra_config`` (zoo.cfg lines) make it one server of an ensemble
        (tooling.local.zookeeper_ensemble). ``host`` is the address it serves on, and
        ``launcher`` the command that runs java (``ip netns exec NS``: tests put ZooKeeper on
        a host of its own in a network namespace; the PID stays java's)."""
        self.directory = Path(directory).absolute()
        self.port = port
        self.tick_time_ms = tick_time_ms
        # Low enough for tests' short sessions (a dead broker's ephemeral node goes quickly).
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.detached = detached
        self.jar = Path(jar)
        self.main = main
        self.extra_config = extra_config
        self.host = host
        self.launcher = tuple(launcher)
        self.returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._command: tuple[str, ...] = ()

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

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
        pick_port = self.port == 0
        for _attempt in range(3):
            if pick_port:
                self.port = free_port()
            self.spawn()
            failure = self._wait_serving(timeout)
            if failure is None:
                return self
            log = log_tail(self.log_path)
            if not (pick_port and "Address already in use" in log):
                raise LocalClusterError(f"ZooKeeper on port {self.port} {failure}; log:\n{log}")
        raise LocalClusterError(f"ZooKeeper found no free port; log:\n{log_tail(self.log_path)}")

    def spawn(self) -> None:
        """Start the process and return at once: a server of an ensemble serves only once a
        majority of its peers runs, so the ensemble starts them all before waiting."""
        if self.running:
            raise LocalClusterError("ZooKeeper is already running")
        java = find_java()
        for path in (self.jar, SLF4J_SIMPLE_JAR):
            if not path.is_file():
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper is not installed here ({path} is missing); {INSTALL_HINT}"
                )
        self._spawn(java)

    def wait_serving(self, timeout: float = START_TIMEOUT) -> Self:
        """Until it serves (see ``start``); LocalClusterError naming why not."""
        failure = self._wait_serving(timeout)
        if failure is not None:
            raise LocalClusterError(
                f"ZooKeeper on port {self.port} {failure}; log:\n{log_tail(self.log_path)}"
            )
        return self

    def mode(self) -> str | None:
        """As ``zookeeper_mode``."""
        return zookeeper_mode(self.port, self.host)

    def _spawn(self, java: str) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "admin.enableServer=false\n"
            # kazoo's server_version() needs envi
            "4lw.commands.whitelist=ruok,srvr,stat,envi\n"
            + self.extra_config
        )
        # Only these two jars: the first's manifest brings the rest of its classpath, and all
        # of /usr/share/java would bring a second slf4j provider that breaks logging.
        self._command = (
            java, "-Xmx256m", "-cp", f"{self.jar}:{SLF4J_SIMPLE_JAR}",
            self.main, str(self.config_path),
        )
        with self.log_path.open("ab") as log:
            self.returncode = None
            self._proc = subprocess.Popen(
                (*self.launcher, *self._command),
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
            if self.mode() is not None:
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
            self._proc.send_signal(signal.SIGCONT)  # a paused one would not act on SIGTERM
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

    def pause(self) -> None:
        """SIGSTOP: a server that hangs (a long GC, a stuck disk) without closing a socket."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGCONT)

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
