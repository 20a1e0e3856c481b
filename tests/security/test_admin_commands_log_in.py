"""``odradek acls`` and ``odradek quotas`` take ``--command-config`` like every other command:
on a listener that needs a login they log in with it (and so act as that principal)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.security.support import PASSWORD, add_user


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tooling.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=REPO_ROOT)


@pytest.mark.parametrize("command", [
    ("acls", "add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t"),
    ("acls", "list", "--json"),
    ("quotas", "set", "--user", "bob", "--producer-byte-rate", "1048576"),
    ("quotas", "describe", "--json"),
])
def test_acls_and_quotas_commands_log_in_with_the_command_config(
        make_broker: Callable[..., BrokerProcess], tmp_path: Path, command: tuple[str, ...]):
    broker = make_broker(settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "authorizer_enabled": True, "super_users": "User:admin;User:ANONYMOUS"})
    add_user(broker.bootstrap, "admin")
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f'sasl.jaas.config=x required username="admin" password="{PASSWORD}";\n')
    sasl = f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}"
    done = odradek(*command, "--bootstrap", sasl, "--command-config", str(config),
                   "--api-timeout-ms", "5000")
    assert done.returncode == 0, done.stderr
    if "--json" in command:
        assert json.loads(done.stdout) == []
