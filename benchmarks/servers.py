"""Server processes for the benchmarks: an odradek broker, redis-server and nats-server.

Each starts on 127.0.0.1 on a port nobody uses, writes its output to a log file in its own working
directory, and is stopped by its PID (SIGTERM, then SIGKILL after a deadline). Its peak memory
can be read and reset between measurements (benchmarks/processes.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from benchmarks.processes import peak_rss_mb, reset_peak_rss

START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
REPO_ROOT = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"odradek broker (-?\d+) listening on (\S+):(\d+)")
_POLL_INTERVAL = 0.02


class ServerStartError(RuntimeError):
    pass


def find_program(name: str) -> str | None:
    """The program's path, looking in the sbin folders too (Debian puts nats-server there)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """A started server: its PID, its address and its log; a context manager that stops it."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], address: str, log: Path) -> None:
        self.name = name
        self.proc = proc
        self.address = address
        self.log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def peak_rss_mb(self) -> float | None:
        return peak_rss_mb(self.pid)

    def reset_peak_rss(self) -> None:
        reset_peak_rss(self.pid)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        stop_process(self.proc, timeout)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str],
                 timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM (a clean shutdown, as an operator stops it), SIGKILL after ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout)


def _spawn(
    name: str, args: Sequence[str], workdir: Path, env: dict[str, str] | None = None
) -> ServerProcess:
    """Start ``args`` in ``workdir`` with stdout and stderr going to ``workdir/NAME.log``."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            list(args), cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT,
        )
    return ServerProcess(name, proc, "", log)


def _wait(
    server: ServerProcess, ready: Callable[[], str | None], timeout: float
) -> ServerProcess:
    """Poll ``ready`` (which returns the address once the server serves) until a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        address = ready()
        if address is not None:
            server.address = address
            return server
        if server.proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise ServerStartError(
                f"{server.name} did not start (exit status {server.proc.returncode}):\n"
                f"{server.log_tail()}"
            )
        time.sleep(_POLL_INTERVAL)


def _accepts(port: int) -> Callable[[], str | None]:
    def ready() -> str | None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            return None
        return f"127.0.0.1:{port}"

    return ready


def start_odradek(
    workdir: Path, timeout: float = START_TIMEOUT, settings: Mapping[str, str] | None = None
) -> ServerProcess:
    """``python -m broker start --port 0``: its first output line names the port it got.
    ``settings``: ``ODRADEK_*`` variables to set, else defaults."""
    # Default settings whatever the caller's environment says; the package from this checkout.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env.update(settings or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    server = _spawn("odradek", [
        sys.executable, "-m", "broker", "start", "--host", "127.0.0.1", "--port", "0",
        "--data-dir", str(workdir / "data"),
    ], workdir, env)

    def ready() -> str | None:
        match = _LISTENING.search(server.log_tail(100_000))
        return None if match is None else f"{match[2]}:{match[3]}"

    return _wait(server, ready, timeout)


def start_redis(workdir: Path, timeout: float = START_TIMEOUT) -> ServerProcess:
    """redis-server in the foreground, no persistence (the stream lives in memory)."""
    program = find_program("redis-server")
    if program is None:
        raise FileNotFoundError("redis-server is not installed (scripts/bench installs it)")
    port = free_port()
    server = _spawn("redis", [
        program, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
        "--dir", str(workdir), "--daemonize", "no",
    ], workdir)
    return _wait(server, _accepts(port), timeout)


def start_nats(workdir: Path, timeout: float = START_TIMEOUT) -> ServerProcess:
    """nats-server with JetStream, its file store in ``workdir``."""
    program = find_program("nats-server")
    if program is None:
        raise FileNotFoundError("nats-server is not installed (scripts/bench installs it)")
    port = free_port()
    server = _spawn("nats", [
        program, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(workdir / "store"),
    ], workdir)
    return _wait(server, _accepts(port), timeout)


def program_version(name: str) -> str | None:
    """What ``NAME --version`` prints (first line), for the report; None if not installed."""
    program = find_program(name)
    if program is None:
        return None
    try:
        out = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if lines else None
