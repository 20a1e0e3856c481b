"""``odradek acls`` and ``odradek quotas`` against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.acls import CLUSTER_NAME, AclOperation
from protocol.acls import ResourceType as R
from tests.broker_process import BrokerProcess
from tests.security.test_authorization import SECURED, binding, write_acls

pytestmark = pytest.mark.integration


def odradek(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooling.cli", *args, "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=60)


def test_acls_add_list_remove(make_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    write_acls(tmp_path / "b", binding(AclOperation.ALTER, R.CLUSTER, CLUSTER_NAME))
    broker = make_broker("b", settings=SECURED)
    added = odradek(broker, "acls", "add", "--allow-principal", "User:alice",
                    "--allow-principal", "User:bob", "--operation", "Read",
                    "--operation", "describe", "--topic", "orders-",
                    "--resource-pattern-type", "prefixed")
    assert added.returncode == 0, added.stderr
    assert "User:alice" in added.stdout and "Prefixed" in added.stdout
    denied = odradek(broker, "acls", "add", "--deny-principal", "User:mallory",
                     "--operation", "All", "--group", "*", "--host", "10.0.0.7")
    assert denied.returncode == 0, denied.stderr

    listed = odradek(broker, "acls", "list", "--topic", "orders-eu",
                     "--resource-pattern-type", "match", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted((a["principal"], a["operation"]) for a in json.loads(listed.stdout)) == [
        ("User:alice", "Describe"), ("User:alice", "Read"), ("User:bob", "Describe"),
        ("User:bob", "Read")]
    mallory = json.loads(odradek(broker, "acls", "list", "--principal", "User:mallory",
                                 "--json").stdout)
    assert mallory == [{"permission": "Deny", "principal": "User:mallory", "host": "10.0.0.7",
                        "operation": "All", "resource_type": "Group", "pattern_type": "Literal",
                        "resource": "*"}]

    removed = odradek(broker, "acls", "remove", "--allow-principal", "User:bob", "--topic",
                      "orders-", "--resource-pattern-type", "prefixed", "--json")
    assert removed.returncode == 0, removed.stderr
    assert {a["principal"] for a in json.loads(removed.stdout)} == {"User:bob"}
    left = json.loads(odradek(broker, "acls", "list", "--topic", "orders-", "--json").stdout)
    assert {a["principal"] for a in left} == {"User:alice"}
    table = odradek(broker, "acls", "list")
    assert "PRINCIPAL" in table.stdout and "User:mallory" in table.stdout


def test_acls_add_refuses_what_is_not_an_acl(make_broker: Callable[..., BrokerProcess],
                                             tmp_path: Path) -> None:
    write_acls(tmp_path / "b", binding(AclOperation.ALTER, R.CLUSTER, CLUSTER_NAME))
    broker = make_broker("b", settings=SECURED)
    no_principal = odradek(broker, "acls", "add", "--operation", "Read", "--topic", "t")
    assert no_principal.returncode == 1 and "--allow-principal" in no_principal.stderr
    bad_principal = odradek(broker, "acls", "add", "--allow-principal", "alice",
                            "--operation", "Read", "--topic", "t")
    assert bad_principal.returncode == 1 and "TYPE:NAME" in bad_principal.stderr
    bad_operation = odradek(broker, "acls", "add", "--allow-principal", "User:a",
                            "--operation", "Fly", "--topic", "t")
    assert bad_operation.returncode == 2 and "ClusterAction" in bad_operation.stderr


def test_acls_need_an_authorizer(broker: BrokerProcess) -> None:
    listed = odradek(broker, "acls", "list")
    assert listed.returncode == 1 and "authorizer_enabled" in listed.stderr


def test_quotas_set_describe_delete(broker: BrokerProcess) -> None:
    assert odradek(broker, "quotas", "set", "--user", "alice", "--producer-byte-rate",
                   "1048576", "--consumer-byte-rate", "2000").returncode == 0
    assert odradek(broker, "quotas", "set", "--user", "alice", "--client-id-default",
                   "--producer-byte-rate", "5000").returncode == 0
    described = odradek(broker, "quotas", "describe", "--json")
    assert described.returncode == 0, described.stderr
    assert sorted(json.loads(described.stdout), key=str) == sorted([
        {"entity": {"user": "alice"},
         "values": {"consumer_byte_rate": 2000, "producer_byte_rate": 1048576}},
        {"entity": {"user": "alice", "client-id": None}, "values": {"producer_byte_rate": 5000}},
    ], key=str)
    assert "<default>" in odradek(broker, "quotas", "describe").stdout
    assert odradek(broker, "quotas", "delete", "--user", "alice", "--quota",
                   "producer").returncode == 0
    only_alice = json.loads(odradek(broker, "quotas", "describe", "--user", "alice",
                                    "--json").stdout)
    assert {"entity": {"user": "alice"}, "values": {"consumer_byte_rate": 2000}} in only_alice
    missing = odradek(broker, "quotas", "set", "--producer-byte-rate", "1")
    assert missing.returncode == 1 and "--user" in missing.stderr
    broker.restart()  # quotas are kept in the data directory
    kept = json.loads(odradek(broker, "quotas", "describe", "--json").stdout)
    assert {"entity": {"user": "alice"}, "values": {"consumer_byte_rate": 2000}} in kept
