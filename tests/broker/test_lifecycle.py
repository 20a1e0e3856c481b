"""Starting, stopping and restarting the broker process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.identity import META_FILE
from protocol.apis import ApiKey
from tests.broker.raw import RawClient, fetch_body
from tests.broker_process import REPO_ROOT, BrokerProcess, BrokerStartError

pytestmark = pytest.mark.integration


def test_sigterm_stops_cleanly(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("t", 2)
        client.produce("t", [b"a"], partition=1)
    assert broker.stop() == 0
    assert "event='broker.stopped'" in broker.log_text()
    for partition in (0, 1):
        assert (broker.data_dir / f"t-{partition}" / "clean-shutdown").exists()


def test_sigint_stops_cleanly(broker: BrokerProcess) -> None:
    os.kill(broker.pid, signal.SIGINT)
    assert broker.wait() == 0
    assert "event='broker.stopped'" in broker.log_text()


def test_restart_keeps_data_and_identity(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("kept", 2, retention_ms="3600000")
        client.produce("kept", [b"one", b"two"], partition=1)
        before = client.metadata(None)
    broker.restart()
    with RawClient(broker.address) as client:
        after = client.metadata(None)
        assert after["cluster_id"] == before["cluster_id"]
        assert after["brokers"] == before["brokers"]  # same id, and the same port again
        assert after["topics"] == before["topics"]
        assert [m.value for m in client.fetch("kept", 1)] == [b"one", b"two"]
        assert client.produce("kept", [b"three"], partition=1) == 2


def test_restart_after_sigkill_keeps_acknowledged_data(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as client:
        for i in range(20):
            client.produce("t", [f"m{i}".encode()])
    broker.kill()
    broker.start(port=broker.port)
    with RawClient(broker.address) as client:
        assert [m.value for m in client.fetch("t")] == [f"m{i}".encode() for i in range(20)]


def test_broker_id_is_kept_and_checked(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(broker_id=3)
    assert broker.node_id == 3
    assert "broker.id=3" in (broker.data_dir / META_FILE).read_text()
    broker.stop()
    broker.broker_id = None
    broker.start()
    assert broker.node_id == 3  # from the data directory
    broker.stop()
    broker.broker_id = 4
    with pytest.raises(BrokerStartError, match=r"does not match broker\.id=3"):
        broker.start()
    assert broker.returncode == 1


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
def test_a_port_in_use_is_one_line_before_anything_else(
    broker: BrokerProcess, tmp_path: Path, cluster: bool
) -> None:
    """The port is taken first: before the data directory is created, and in cluster mode
    before ZooKeeper is asked (here one nobody runs, which the broker would wait for)."""
    settings: dict[str, str] = {}
    if cluster:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            settings["zookeeper_connect"] = f"127.0.0.1:{s.getsockname()[1]}"
    other = BrokerProcess(tmp_path / "other", settings=settings)
    with pytest.raises(BrokerStartError):
        other.start(port=broker.port)
    assert other.returncode == 1
    assert _stderr_lines(other) == [
        f"odradek broker: cannot start: 127.0.0.1:{broker.port} is in use (another broker or "
        "program listens on it); stop it or choose another port (--port)"
    ]
    assert not other.data_dir.exists()


def test_a_data_directory_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    for data_dir, problem in [
        (tmp_path / "file", f"data directory {tmp_path / 'file'} is a regular file"),
        (tmp_path / "file" / "data",
         f"data directory {tmp_path / 'file' / 'data'}: {tmp_path / 'file'} is a regular file"),
    ]:
        broker = BrokerProcess(data_dir)
        with pytest.raises(BrokerStartError):
            broker.start()
        assert broker.returncode == 1
        assert _stderr_lines(broker) == [
            f"odradek broker: cannot start: {problem}, not a directory"
        ]


def _stderr_lines(broker: BrokerProcess) -> list[str]:
    """What the broker wrote to stderr, without the harness's own "--- " lines."""
    return [line for line in broker.log_text().splitlines() if not line.startswith("--- ")]


def test_a_data_directory_serves_one_broker(broker: BrokerProcess) -> None:
    other = BrokerProcess(broker.data_dir)
    with pytest.raises(BrokerStartError, match="is used by another process"):
        other.start()
    assert other.returncode == 1
    assert broker.running


def test_a_bad_setting_is_exit_status_2(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", env={"ODRADEK_NUM_PARTITIONS": "many"})
    with pytest.raises(BrokerStartError, match="ODRADEK_NUM_PARTITIONS"):
        broker.start()
    assert broker.returncode == 2


def test_sigterm_answers_a_parked_fetch_first(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker(env={"ODRADEK_LOG_LEVEL": "debug"})
    with RawClient(broker.address) as client:
        client.create_topic("quiet")
        waiting = client.send(ApiKey.FETCH, fetch_body("quiet", 0, 0, 1 << 20, 600_000, 1))
        broker.wait_for_log("fetch.parked")
        os.kill(broker.pid, signal.SIGTERM)
        correlation_id, body = client.receive()  # answered, with what there was
        assert correlation_id == waiting
        assert body["topics"][0]["partitions"][0]["records"] == b""
        assert client.closed_by_broker()
    assert broker.wait() == 0


def test_defaults_listen_locally_with_data_in_the_working_directory(tmp_path: Path) -> None:
    # The default port 9092 may be taken on a test machine; everything else is the default.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env.update(ODRADEK_PORT="0", PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "start"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        host_port = line.rsplit(" ", 1)[-1]
        assert line.startswith("odradek broker 0 listening on 127.0.0.1:")
        host, port = host_port.split(":")
        with socket.create_connection((host, int(port)), timeout=10):
            pass
        assert (tmp_path / "odradek-data" / META_FILE).exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
