"""Authentication and authorization together: the principal a SASL login or a client
certificate gives is the one ACLs and quotas are matched against, and the CLI's ACL, quota,
watch and console commands reach a SASL_SSL listener through ``--command-config``.

One embedded broker per test with a SASL_SSL listener and an SSL listener that asks for client
certificates, ``authorizer_enabled``, ``User:admin`` in ``super_users`` and debug logging (no
password in any line); the users admin, alice and bob are in its credential store before it
starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from client.admin import Admin
from client.consumer import Consumer
from client.network import NetworkClient
from client.producer import Producer
from client.records import TopicPartition
from client.security import SecurityConfig
from protocol.apis import LATEST_TIMESTAMP, ApiKey
from protocol.errors import (
    ErrorCode,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from protocol.messageset import Record, encode_message_set
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.observability.console import ConsoleProcess
from tests.observability.terminal import TerminalCommand
from tests.security.support import (
    PASSWORD,
    TlsFiles,
    make_tls_files,
    properties_file,
    sasl_ssl,
    write_users,
)

pytestmark = pytest.mark.integration


@dataclass
class Secured:
    broker: BrokerProcess
    tls: TlsFiles
    directory: Path

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.listener_ports['SASL_SSL']}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.listener_ports['SSL']}"

    def login(self, user: str) -> SecurityConfig:
        return sasl_ssl(self.tls, user)

    def properties(self, user: str) -> Path:
        return properties_file(self.directory / f"{user}.properties", self.login(user))

    def odradek(self, user: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``odradek ARGS`` on the SASL_SSL listener, logged in as ``user``."""
        done = subprocess.run(
            [sys.executable, "-m", "tooling.cli", *args, "--bootstrap", self.sasl_bootstrap,
             "--command-config", str(self.properties(user))],
            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
        assert PASSWORD not in done.stdout + done.stderr
        return done

    def admin(self) -> Admin:
        return Admin(self.sasl_bootstrap, **self.login("admin").options())

    def allow(self, principal: str, *acl: str) -> None:
        """``odradek acls add --allow-principal PRINCIPAL ACL...`` as the admin; it succeeds."""
        added = self.odradek("admin", "acls", "add", "--allow-principal", principal, *acl)
        assert added.returncode == 0, added.stderr


@pytest.fixture
def secured(make_broker: Callable[..., BrokerProcess], tmp_path: Path) -> Secured:
    tls = make_tls_files(tmp_path / "tls")
    write_users(tmp_path / "secured", "admin", "alice", "bob")
    broker = make_broker("secured", settings=tls.broker_settings(
        listeners="SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0", ssl_client_auth="requested",
        authorizer_enabled=True, super_users="User:admin", log_level="debug"))
    secured = Secured(broker, tls, tmp_path)
    with secured.admin() as admin:
        admin.create_topic("orders")
    return secured


def produce_once(bootstrap: str, security: SecurityConfig, topic: str, value: bytes = b"v",
                 ) -> dict[str, Any]:
    """One Produce v1 request (it has throttle_time_ms); the whole answer."""
    records = encode_message_set([Record(None, value, int(time.time() * 1000))])
    network = NetworkClient(bootstrap, request_timeout_ms=10_000, security=security)
    try:
        return network.send(-1, ApiKey.PRODUCE, {"acks": 1, "timeout_ms": 5_000, "topics": [
            {"name": topic, "partitions": [{"partition": 0, "records": records}]}]},
            api_version=1).result(10)
    finally:
        network.close()


def error_of(answer: dict[str, Any]) -> int:
    return int(answer["topics"][0]["partitions"][0]["error_code"])


def latest_offset(secured: Secured, topic: str) -> int:
    with secured.admin() as admin:
        return admin.list_offsets({TopicPartition(topic, 0): LATEST_TIMESTAMP})[
            TopicPartition(topic, 0)].offset


def test_an_acl_on_a_sasl_user_lets_alice_in_and_keeps_bob_out(secured: Secured) -> None:
    secured.allow("User:alice", "--operation", "Write", "--operation", "Read", "--topic", "orders")
    with Producer(secured.sasl_bootstrap, **secured.login("alice").options()) as producer:
        for value in (b"one", b"two", b"three"):
            producer.send("orders", value)
        producer.flush(30)
    with Consumer(secured.sasl_bootstrap, auto_offset_reset="earliest",
                  **secured.login("alice").options()) as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout_ms=500)]
    assert got == [b"one", b"two", b"three"]

    # what alice may not do is refused by name; no password in any answer (``odradek``)
    listed = secured.odradek("alice", "acls", "list")
    assert listed.returncode == 1 and "Describe on the cluster" in listed.stderr
    quotas = secured.odradek("alice", "quotas", "set", "--user", "alice",
                             "--producer-byte-rate", "1")
    assert quotas.returncode == 1 and "AlterConfigs on the cluster" in quotas.stderr

    # PLAIN sends bob's password to the broker: refused, and in no log line, even at debug
    plain = sasl_ssl(secured.tls, "bob", mechanism="PLAIN")
    refused = produce_once(secured.sasl_bootstrap, plain, "orders")
    assert error_of(refused) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    secured.broker.wait_for_log(r"request\.denied.*User:bob")
    with Producer(secured.sasl_bootstrap, **secured.login("bob").options()) as producer, \
            pytest.raises(TopicAuthorizationFailedError) as denied:
        producer.send("orders", b"bob's").result(30)
    assert "orders" in str(denied.value) and PASSWORD not in repr(denied.value)
    assert latest_offset(secured, "orders") == 3  # bob's records were not written
    assert PASSWORD not in secured.broker.log_text()


def test_topics_describe_without_describe_configs_shows_the_partitions_and_why_no_configs(
    secured: Secured,
) -> None:
    """alice, granted Create, Write and Read on orders as docs/security.md does, lacks
    DescribeConfigs: ``topics describe`` shows her the partitions and says the configs were
    not authorized, instead of failing as a whole."""
    secured.allow("User:alice", "--operation", "Create", "--operation", "Write",
                  "--operation", "Read", "--topic", "orders")
    refusal = "not authorized to describe the configs of topic 'orders'"

    table = secured.odradek("alice", "topics", "describe", "orders")
    assert table.returncode == 0, table.stderr
    assert "orders" in table.stdout and "earliest" in table.stdout
    assert "configs not shown" in table.stderr and refusal in table.stderr
    assert "Traceback" not in table.stderr

    for names in (["orders"], []):  # named, and every topic she may describe
        described = secured.odradek("alice", "topics", "describe", *names, "--json")
        assert described.returncode == 0, described.stderr
        [topic] = json.loads(described.stdout)
        assert topic["topic"] == "orders"
        assert [p["partition"] for p in topic["partitions"]] == [0]
        assert topic["configs"] is None and refusal in topic["configs_error"]

    # with DescribeConfigs (the admin is a super user) the same command shows them
    overrides = secured.odradek("admin", "topics", "describe", "orders", "--json")
    [topic] = json.loads(overrides.stdout)
    assert topic["configs"] == [] and topic["configs_error"] is None


def test_a_client_certificates_principal_is_matched_by_an_acl(secured: Secured) -> None:
    certificate_user = "User:CN=alice,OU=eng,O=example"
    secured.allow(certificate_user, "--operation", "Write", "--topic", "orders")
    without = SecurityConfig(security_protocol="SSL", ssl_cafile=str(secured.tls.ca))
    assert error_of(produce_once(secured.ssl_bootstrap, without, "orders")) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert latest_offset(secured, "orders") == 0
    with_certificate = SecurityConfig(
        security_protocol="SSL", ssl_cafile=str(secured.tls.ca),
        ssl_certfile=str(secured.tls.client), ssl_keyfile=str(secured.tls.client))
    assert error_of(produce_once(secured.ssl_bootstrap, with_certificate, "orders")) == 0
    assert latest_offset(secured, "orders") == 1


def test_a_group_read_acl_lets_its_sasl_user_join_and_not_another(secured: Secured) -> None:
    for user in ("alice", "bob"):
        secured.allow(f"User:{user}", "--operation", "Read", "--topic", "orders")
    secured.allow("User:alice", "--operation", "Read", "--group", "billing")
    with Producer(secured.sasl_bootstrap, **secured.login("admin").options()) as producer:
        producer.send("orders", b"one")
        producer.flush(30)

    with Consumer(secured.sasl_bootstrap, group_id="billing", auto_offset_reset="earliest",
                  **secured.login("alice").options()) as consumer:
        consumer.subscribe(["orders"])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout_ms=500)]
        assert got == [b"one"]
        consumer.commit()
    with Consumer(secured.sasl_bootstrap, group_id="billing", auto_offset_reset="earliest",
                  **secured.login("bob").options()) as consumer:
        consumer.subscribe(["orders"])
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
        assert consumer.assignment() == set()

    # groups watch, as alice: the group and its committed offset, not "disconnected"
    watch = TerminalCommand(["groups", "watch", "billing", "--bootstrap",
                             secured.sasl_bootstrap, "--command-config",
                             str(secured.properties("alice")), "--interval-ms", "100"])
    try:
        watch.wait_for(lambda t: "group billing  state Empty" in t, "the group, Empty")
        assert watch.interrupt() == 0
    finally:
        watch.close()
    assert PASSWORD not in watch.text


def test_a_quota_on_a_user_throttles_that_sasl_user_only(secured: Secured) -> None:
    for user in ("alice", "bob"):
        secured.allow(f"User:{user}", "--operation", "Write", "--topic", "orders")
    quota = secured.odradek("admin", "quotas", "set", "--user", "alice",
                            "--producer-byte-rate", "10000")
    assert quota.returncode == 0, quota.stderr
    described = secured.odradek("admin", "quotas", "describe", "--json")
    assert json.loads(described.stdout) == [
        {"entity": {"user": "alice"}, "values": {"producer_byte_rate": 10_000}}]
    value = b"x" * 20_000  # two seconds of alice's quota: held back about one
    alice = produce_once(secured.sasl_bootstrap, secured.login("alice"), "orders", value)
    assert error_of(alice) == 0 and alice["throttle_time_ms"] > 0
    bob = produce_once(secured.sasl_bootstrap, secured.login("bob"), "orders", value)
    assert error_of(bob) == 0 and bob["throttle_time_ms"] == 0


def test_the_console_reads_a_sasl_ssl_listener(secured: Secured) -> None:
    console = ConsoleProcess(secured.sasl_bootstrap,
                             "--command-config", str(secured.properties("admin")))
    try:
        with urllib.request.urlopen(f"{console.url}/api/topics", timeout=30) as answer:
            topics = json.loads(answer.read())
    finally:
        console.stop()
    assert [t["name"] for t in topics if not t["internal"]] == ["orders"]
    assert PASSWORD not in "".join(console.stderr)
