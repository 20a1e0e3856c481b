"""``odradek users`` over the wire and offline, and ``--command-config`` for a SASL_SSL
listener: the password is never on the command line, in the output or in --help."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from client.errors import ConfigError
from client.network import NetworkClient
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import SaslAuthenticationFailedError
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.security.support import PASSWORD, make_tls_files

TWO_LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"


def odradek(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tooling.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)


def login(bootstrap: str, user: str = "alice", mechanism: str = "SCRAM-SHA-256") -> object:
    security = SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                              sasl_plain_username=user, sasl_plain_password=PASSWORD)
    network = NetworkClient(bootstrap, request_timeout_ms=10_000, security=security)
    try:
        return network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
    finally:
        network.close()


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "alice.password"
    path.write_text(PASSWORD + "\n")
    return path


def test_users_add_list_delete_over_the_wire(make_broker: Callable[..., BrokerProcess],
                                             password_file: Path):
    broker = make_broker(settings={"listeners": TWO_LISTENERS})
    sasl = f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        added = odradek("users", "add", "alice", "--mechanism", mechanism, "--password-file",
                        str(password_file), "--bootstrap", broker.bootstrap)
        assert added.returncode == 0, added.stderr
        assert PASSWORD not in added.stdout + added.stderr
    listed = odradek("users", "list", "--json", "--bootstrap", broker.bootstrap)
    assert json.loads(listed.stdout) == [
        {"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}]
    assert login(sasl, mechanism="SCRAM-SHA-512")
    assert PASSWORD not in broker.log_text()
    deleted = odradek("users", "delete", "alice", "--bootstrap", broker.bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(odradek("users", "list", "--json", "--bootstrap",
                              broker.bootstrap).stdout) == []
    with pytest.raises(SaslAuthenticationFailedError):
        login(sasl)


def test_the_first_user_is_added_offline_to_a_stopped_brokers_data_directory(
        make_broker: Callable[..., BrokerProcess], tmp_path: Path, password_file: Path):
    data_dir = tmp_path / "broker-0"
    added = odradek("users", "add", "alice", "--password-file", str(password_file),
                    "--data-dir", str(data_dir))
    assert added.returncode == 0, added.stderr
    stored = (data_dir / "scram-credentials.json").read_text()
    assert PASSWORD not in stored and "alice" in stored
    assert (data_dir / "scram-credentials.json").stat().st_mode & 0o077 == 0
    broker = make_broker(settings={"listeners": "SASL_PLAINTEXT://127.0.0.1:0"})
    assert broker.data_dir == data_dir
    assert login(broker.bootstrap)


def test_offline_list_and_delete_read_and_write_the_data_directorys_store(
        tmp_path: Path, password_file: Path):
    data_dir = tmp_path / "broker-0"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        added = odradek("users", "add", "alice", "--mechanism", mechanism, "--password-file",
                        str(password_file), "--data-dir", str(data_dir))
        assert added.returncode == 0, added.stderr
    listed = odradek("users", "list", "--json", "--data-dir", str(data_dir))
    assert json.loads(listed.stdout) == [
        {"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}]
    deleted = odradek("users", "delete", "alice", "--mechanism", "SCRAM-SHA-256",
                      "--data-dir", str(data_dir))
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(odradek("users", "list", "--json", "--data-dir", str(data_dir)).stdout) == [
        {"user": "alice", "mechanisms": ["SCRAM-SHA-512"]}]
    again = odradek("users", "delete", "alice", "--mechanism", "SCRAM-SHA-256",
                    "--data-dir", str(data_dir))
    assert again.returncode == 1
    assert "user 'alice' has no such credential" in again.stderr
    assert (data_dir / "scram-credentials.json").stat().st_mode & 0o077 == 0


@pytest.mark.cluster
def test_offline_users_in_zookeeper_print_only_what_was_asked(zk_connect: str,
                                                              password_file: Path):
    """The broker's store writes the znodes; its session's log lines stay out of the output."""
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        added = odradek("users", "add", "alice", "--mechanism", mechanism, "--password-file",
                        str(password_file), "--zookeeper", zk_connect)
        assert added.returncode == 0, added.stderr
        assert added.stdout == ""
    listed = odradek("users", "list", "--json", "--zookeeper", zk_connect)
    assert json.loads(listed.stdout) == [
        {"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}]
    deleted = odradek("users", "delete", "alice", "--zookeeper", zk_connect)
    assert deleted.returncode == 0, deleted.stderr
    assert "SCRAM-SHA-256, SCRAM-SHA-512 deleted" in deleted.stderr
    assert json.loads(odradek("users", "list", "--json", "--zookeeper",
                              zk_connect).stdout) == []
    missing = odradek("users", "delete", "bob", "--zookeeper", zk_connect)
    assert missing.returncode == 1
    assert "user 'bob' has no such credential" in missing.stderr


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on (bound and closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_zookeeper_is_one_line_naming_it(unused_port: int):
    connect = f"127.0.0.1:{unused_port}"
    refused = odradek("users", "list", "--zookeeper", connect, "--api-timeout-ms", "1000")
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert f"--zookeeper {connect}: no ZooKeeper server answered within" in refused.stderr


def test_the_password_is_never_taken_from_the_command_line_nor_shown_in_help():
    helped = odradek("users", "add", "--help")
    assert "--password-file" in helped.stdout and "--password " not in helped.stdout
    refused = odradek("users", "add", "alice", "--data-dir", "/nonexistent-dir-x")
    assert refused.returncode == 1
    assert "use --password-file" in refused.stderr


def test_command_config_reaches_a_sasl_ssl_listener(make_broker: Callable[..., BrokerProcess],
                                                     tmp_path: Path, password_file: Path):
    tls = make_tls_files(tmp_path / "tls")
    broker = make_broker(settings=tls.broker_settings(
        listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"))
    assert odradek("users", "add", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file",
                   str(password_file), "--bootstrap", broker.bootstrap).returncode == 0
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{PASSWORD}";\n'
        f"ssl.truststore.location={tls.ca}\n")
    bootstrap = f"127.0.0.1:{broker.listener_ports['SASL_SSL']}"
    produced = odradek("produce", "secure", "--bootstrap", bootstrap, "--command-config",
                       str(config), stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = odradek("consume", "secure", "--from-beginning", "--max-messages", "2",
                       "--bootstrap", bootstrap, "--command-config", str(config))
    assert consumed.stdout.split() == ["one", "two"], consumed.stderr
    config.write_text(config.read_text().replace(PASSWORD, "Zq9-not-it"))
    refused = odradek("topics", "list", "--bootstrap", bootstrap, "--command-config",
                      str(config), "--api-timeout-ms", "3000")
    assert refused.returncode == 1
    assert "invalid credentials" in refused.stderr and "Zq9-not-it" not in refused.stderr


def test_command_config_refuses_unknown_keys_by_name(tmp_path: Path):
    config = tmp_path / "bad.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.pasword=oops\n")
    with pytest.raises(ConfigError, match=r"unknown key 'sasl\.pasword'"):
        SecurityConfig.from_file(config)
