"""A real broker process for integration tests: ``python -m broker start`` on 127.0.0.1.

    with BrokerProcess(tmp_path / "data") as broker:
        connect_to(broker.bootstrap)        # "127.0.0.1:PORT"
        broker.kill(); broker.restart()     # SIGKILL, then start again on the same port

It listens on an ephemeral port (``--port 0``) and is stopped by its PID only: ``stop()`` sends
SIGTERM and SIGKILL after a deadline, ``kill()`` sends SIGKILL. Its stderr (the structlog events)
is collected; ``log_text()`` returns it and ``wait_for_log`` waits for an event with a deadline.
``ODRADEK_*`` variables of the calling environment are not passed on, so tests see defaults.
"""

from __future__ import annotations

import os
import queue
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_LISTENING = re.compile(r"^odradek broker (\d+) listening on (\S+):(\d+)$")
_LISTENER = re.compile(r"^odradek broker \d+ listener (\S+) on \S+:(\d+)$")
_KAFKA_LISTENER = re.compile(r"^odradek broker \d+ kafka listener (\S+) on \S+:(\d+)$")
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
REPO_ROOT = Path(__file__).resolve().parents[1]


class BrokerStartError(RuntimeError):
    pass


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        *,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        broker_id: int | None = None,
        extra_args: Sequence[str] = (),
        max_open_files: int | None = None,
        module: str = "broker",
        host: str = "127.0.0.1",
        netns: str | None = None,
    ) -> None:
        """``settings`` are written to a TOML file passed with --config; ``env`` adds
        environment variables (e.g. ``ODRADEK_AUTO_CREATE_TOPICS_ENABLE``);
        ``max_open_files`` lowers the process's descriptor limit (RLIMIT_NOFILE); ``module``
        is what ``python -m`` runs (``tests.coordinator_faults`` wraps the broker's).
        ``netns`` runs it in that network namespace (``ip netns exec``, which execs the
        broker: the PID stays the broker's), listening on ``host``, an address there
        (tests/netns.py)."""
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})
        self.env = dict(env or {})
        self.broker_id = broker_id
        self.extra_args = list(extra_args)
        self.max_open_files = max_open_files
        self.module = module
        self.bind_host = host
        self.netns = netns
        self.port = 0
        #: the port of each listener by name, when the ``listeners`` setting names several
        self.listener_ports: dict[str, int] = {}
        #: the port of each Kafka-protocol listener (``kafka_listeners``) by protocol
        self.kafka_ports: dict[str, int] = {}
        self.host = "127.0.0.1"
        self.node_id: int | None = None
        self.returncode: int | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []
        self._stderr_changed = threading.Condition()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------------------ lifecycle

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def kafka_bootstrap(self) -> str:
        """The address of the first Kafka-protocol listener, for Kafka's clients."""
        return f"{self.host}:{next(iter(self.kafka_ports.values()))}"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def pid(self) -> int:
        assert self._proc is not None, "not started"
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, *, port: int = 0, timeout: float = START_TIMEOUT) -> BrokerProcess:
        assert not self.running, "already running"
        args = [
            sys.executable, "-m", self.module, "start",
            "--host", self.bind_host, "--port", str(port), "--data-dir", str(self.data_dir),
        ]
        if self.broker_id is not None:
            args += ["--broker-id", str(self.broker_id)]
        if self.settings:
            config = self.data_dir.with_name(self.data_dir.name + ".toml")
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text("".join(f"{k} = {_toml(v)}\n" for k, v in self.settings.items()))
            args += ["--config", str(config)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
        env.update(self.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.returncode = None
        with self._stderr_changed:
            self._stderr.append(f"--- start: {' '.join(args[1:])}\n")
        launcher = [] if self.netns is None else ["ip", "netns", "exec", self.netns]
        proc = subprocess.Popen(
            [*launcher, *args, *self.extra_args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=None if self.max_open_files is None else self._limit_open_files,
        )
        self._proc = proc
        lines: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None and proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._pump_stdout, args=(proc.stdout, lines), daemon=True),
            threading.Thread(target=self._pump_stderr, args=(proc.stderr,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        try:
            first = lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise BrokerStartError(f"no listening line in {timeout} s\n{self.log_text()}") from None
        match = _LISTENING.match(first or "")
        if match is None:
            self._reap(timeout=STOP_TIMEOUT)
            raise BrokerStartError(
                f"broker did not start (first stdout line {first!r}, exit {self.returncode})\n"
                f"{self.log_text()}"
            )
        self.node_id, self.host, self.port = int(match[1]), match[2], int(match[3])
        listeners = [item for item in str(self.settings.get("listeners", "")).split(",") if item]
        self.listener_ports = {}
        if len(listeners) > 1:
            for _ in listeners:
                found = _LISTENER.match(lines.get(timeout=timeout) or "")
                assert found is not None, "a listener line for each listener"
                self.listener_ports[found[1]] = int(found[2])
        kafka = [item for item in str(self.settings.get("kafka_listeners", "")).split(",") if item]
        self.kafka_ports = {}
        for _ in kafka:
            found = _KAFKA_LISTENER.match(lines.get(timeout=timeout) or "")
            assert found is not None, "a kafka listener line for each Kafka listener"
            self.kafka_ports[found[1]] = int(found[2])
        return self

    def _limit_open_files(self) -> None:
        assert self.max_open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_open_files, self.max_open_files))

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL. Returns the exit status."""
        if self._proc is None:
            return self.returncode
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        return self._reap(timeout)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Wait for the process to end by itself (e.g. after a signal the test sent); SIGKILL
        after ``timeout``. Returns the exit status."""
        if self._proc is None:
            return self.returncode
        return self._reap(timeout)

    def kill(self) -> int | None:
        if self._proc is None:
            return self.returncode
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
        return self._reap(STOP_TIMEOUT)

    def restart(self, *, same_port: bool = True) -> BrokerProcess:
        """Stop (if still running) and start again on the same data directory -- and the same
        port, so clients holding the bootstrap address find it again."""
        self.stop()
        return self.start(port=self.port if same_port else 0)

    def _reap(self, timeout: float) -> int | None:
        assert self._proc is not None
        try:
            self.returncode = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.send_signal(signal.SIGKILL)
            self.returncode = self._proc.wait(STOP_TIMEOUT)
        for thread in self._threads:
            thread.join(STOP_TIMEOUT)
        self._proc = None
        with self._stderr_changed:
            self._stderr.append(f"--- exit status {self.returncode}\n")
        return self.returncode

    def __enter__(self) -> BrokerProcess:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ output

    def _pump_stdout(self, stream: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def _pump_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            with self._stderr_changed:
                self._stderr.append(line)
                self._stderr_changed.notify_all()

    def log_text(self) -> str:
        """Everything the broker wrote to stderr, over all its starts."""
        with self._stderr_changed:
            return "".join(self._stderr)

    def wait_for_log(self, pattern: str, *, count: int = 1, timeout: float = 30.0) -> str:
        """Wait until ``count`` stderr lines match the regular expression ``pattern``; return
        the last of them. Raises TimeoutError with the log."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._stderr_changed:
            while True:
                found = [line for line in self._stderr if regex.search(line)]
                if len(found) >= count:
                    return found[count - 1]
                left = deadline - time.monotonic()
                if left <= 0:
                    log = "".join(self._stderr)
                    raise TimeoutError(f"no {pattern!r} in the broker log:\n{log}")
                self._stderr_changed.wait(left)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
