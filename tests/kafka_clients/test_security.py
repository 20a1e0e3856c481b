"""Kafka's clients log in to the Kafka-protocol listeners as Kafka 0.10.2 has them log in
(SaslHandshake v0, then the mechanism's bare tokens), and what they may do is what the ACLs
grant the user they logged in as.

One broker for the module: a native SASL_SSL listener for the administration, Kafka SASL_SSL
and SASL_PLAINTEXT listeners, ``authorizer_enabled`` with ``User:admin`` the only super user,
and the users admin, alice, bob and carol in its credential store (SCRAM-SHA-512) before it
starts. alice is granted her own topic and group in each test; bob and carol are granted
less. A failed login closes the connection with nothing written, as 0.10.2 did: its framing
has no room for an error (docs/kafka-compatibility.md).
"""

from __future__ import annotations

import logging
import re
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from client.admin import Admin
from client.consumer import Consumer
from client.records import TopicPartition
from client.security import SecurityOptions
from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.apis import LATEST_TIMESTAMP
from protocol.framing import encode_frame
from protocol.kafka.apis import METADATA, SASL_HANDSHAKE
from protocol.kafka.header import decode_response, encode_request
from tests.broker_process import BrokerProcess
from tests.kafka_clients.clients import TIMEOUT_S, Message
from tests.kafka_clients.conftest import unique_topic
from tests.kafka_clients.raw_kafka import (
    api_versions_v0,
    assert_api_versions_answer,
    closed_with_nothing_written,
    connect,
    raw_request,
    read_frame,
    send,
)
from tests.security.support import PASSWORD, TlsFiles, make_tls_files, sasl_ssl, write_users

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SCRAM = "SCRAM-SHA-512"
WRONG_PASSWORD = "not " + PASSWORD
Op = AclOperation
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
#: the clients that log in with SCRAM over SASL_SSL here (kcat is librdkafka, as confluent's;
#: kafkajs is a process with no security options in its driver)
SCRAM_CLIENTS = ("confluent-kafka", "kafka-python")


@dataclass(frozen=True)
class Secured:
    broker: BrokerProcess
    tls: TlsFiles

    def kafka_bootstrap(self, protocol: str) -> str:
        return f"127.0.0.1:{self.broker.kafka_ports[protocol]}"

    def admin(self) -> Admin:
        """The super user, on the native listener."""
        return Admin(self.broker.bootstrap, **self.admin_login())

    def admin_login(self) -> SecurityOptions:
        return sasl_ssl(self.tls, "admin", mechanism=SCRAM).options()

    def grant(self, user: str, resource_type: ResourceType, name: str, *ops: AclOperation) -> None:
        with self.admin() as admin:
            admin.create_acls([AclBinding(
                resource_type=resource_type, resource_name=name, pattern_type=PatternType.LITERAL,
                principal=f"User:{user}", host="*", operation=op,
                permission=AclPermissionType.ALLOW) for op in ops])

    def topic(self, prefix: str) -> str:
        """A new topic of one partition, made by the admin (nobody else may create topics)."""
        name = unique_topic(prefix)
        with self.admin() as admin:
            admin.create_topic(name)
        return name

    def end_offset(self, topic: str) -> int:
        with self.admin() as admin:
            tp = TopicPartition(topic, 0)
            return admin.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset

    def committed(self, group: str, topic: str) -> int | None:
        with Consumer(self.broker.bootstrap, group_id=group, **self.admin_login()) as consumer:
            return consumer.committed(TopicPartition(topic, 0))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp("kafka-security")
    tls = make_tls_files(directory / "tls")
    write_users(directory / "data", "admin", "alice", "bob", "carol", mechanism=SCRAM)
    settings = tls.broker_settings(
        listeners="SASL_SSL://127.0.0.1:0",
        kafka_listeners="SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        authorizer_enabled=True, super_users="User:admin", group_initial_rebalance_delay_ms=0)
    with BrokerProcess(directory / "data", settings=settings) as broker:
        yield Secured(broker, tls)
    print(f"===== broker log =====\n{broker.log_text()}")
    assert PASSWORD not in broker.log_text()


# ---------------------------------------------------------------------- confluent-kafka

def confluent_config(secured: Secured, user: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"bootstrap.servers": secured.kafka_bootstrap("SASL_SSL"),
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.tls.ca),
            "sasl.mechanism": SCRAM, "sasl.username": user, "sasl.password": password}


def confluent_produce(secured: Secured, user: str, topic: str, messages: list[Message],
                      ) -> list[Any]:
    """Each message's delivery error (None once acknowledged), in order."""
    from confluent_kafka import Producer

    producer = Producer({**confluent_config(secured, user), "linger.ms": 5,
                         "enable.idempotence": False, "message.timeout.ms": 20_000})
    reports: list[Any] = []
    for key, value in messages:
        producer.produce(topic, value=value, key=key, partition=0,
                         on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(TIMEOUT_S) == 0, "confluent-kafka: messages left unsent"
    return reports


def confluent_group_read(secured: Secured, user: str, group: str, topic: str, count: int,
                         ) -> tuple[list[Message], Any]:
    """As a member of ``group`` (subscribed), the messages given and the offset after them
    committed; or what the consumer reported instead of a message."""
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import TopicPartition as ConfluentPartition

    consumer = ConfluentConsumer({**confluent_config(secured, user), "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                return got, message.error()
            value = message.value()
            assert value is not None
            got.append((message.key(), value))
        if got:
            consumer.commit(offsets=[ConfluentPartition(topic, 0, len(got))], asynchronous=False)
        return got, None
    finally:
        consumer.close()


# ------------------------------------------------------------------------------ kafka-python

def kafka_python_config(secured: Secured, user: str, password: str = PASSWORD, *,
                        protocol: str = "SASL_SSL", mechanism: str = SCRAM) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": secured.kafka_bootstrap(protocol), "security_protocol": protocol,
        "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password,
        "bootstrap_timeout_ms": 10_000}
    if protocol == "SASL_SSL":
        config["ssl_cafile"] = str(secured.tls.ca)
    return config


def kafka_python_produce(config: dict[str, Any], topic: str, messages: list[Message],
                         **options: Any) -> None:
    """Raises the first message's error, as kafka-python raises it."""
    from kafka import KafkaProducer

    producer = KafkaProducer(**config, linger_ms=5, max_block_ms=20_000, **options)
    try:
        futures = [producer.send(topic, value=v, key=k, partition=0) for k, v in messages]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)


def kafka_python_group_read(config: dict[str, Any], group: str, topic: str, count: int,
                            ) -> list[Message]:
    """As a member of ``group`` (subscribed), the messages given, the offset after them
    committed; raises what the consumer's poll raises."""
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KafkaPartition

    consumer = KafkaConsumer(topic, **config, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        got: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.key, r.value) for r in records]
        if got:
            consumer.commit({KafkaPartition(topic, 0): OffsetAndMetadata(len(got), None, -1)})
        return got
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------- both

def produce_as(secured: Secured, client: str, user: str, topic: str,
               messages: list[Message]) -> None:
    if client == "confluent-kafka":
        assert confluent_produce(secured, user, topic, messages) == [None] * len(messages)
    else:
        kafka_python_produce(kafka_python_config(secured, user), topic, messages)


def group_read_as(secured: Secured, client: str, user: str, group: str, topic: str,
                  count: int) -> list[Message]:
    if client == "confluent-kafka":
        got, error = confluent_group_read(secured, user, group, topic, count)
        assert error is None, error
        return got
    return kafka_python_group_read(kafka_python_config(secured, user), group, topic, count)


def messages(tag: str, count: int = 10) -> list[Message]:
    return [(f"k{i}".encode(), f"{tag}-{i}".encode()) for i in range(count)]


# ------------------------------------------------------------------------------------ tests

def failed_login_pattern(mechanism: str) -> str:
    return rf"event='sasl\.failed'.*mechanism='{mechanism}'"


def failed_login_lines(secured: Secured, mechanism: str) -> int:
    """How many failed logins with ``mechanism`` the broker has logged so far."""
    return len(re.findall(failed_login_pattern(mechanism), secured.broker.log_text()))


def wait_for_failed_login(secured: Secured, mechanism: str, before: int) -> None:
    """The broker logs the failed login (one line more than ``before``)."""
    secured.broker.wait_for_log(failed_login_pattern(mechanism), count=before + 1)


@pytest.mark.parametrize("client", SCRAM_CLIENTS)
def test_scram_over_sasl_ssl_produces_and_consumes_in_a_group_as_the_user(
        secured: Secured, client: str) -> None:
    """alice alone is granted the topic and the group, so every request got through as
    User:alice: the principal is the SASL user."""
    topic, group = secured.topic(f"scram-{client}"), unique_topic(f"g-scram-{client}")
    secured.grant("alice", TOPIC, topic, Op.WRITE, Op.READ)
    secured.grant("alice", GROUP, group, Op.READ)
    sent = messages(client)
    produce_as(secured, client, "alice", topic, sent)
    assert group_read_as(secured, client, "alice", group, topic, len(sent)) == sent
    assert secured.committed(group, topic) == len(sent)


def test_confluent_kafka_reports_a_wrong_password_as_an_authentication_error(
        secured: Secured) -> None:
    from confluent_kafka import KafkaError, Producer

    failed_logins = failed_login_lines(secured, SCRAM)
    errors: list[Any] = []
    producer = Producer({**confluent_config(secured, "alice", WRONG_PASSWORD),
                         "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and not any(
            e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.2)
    del producer
    refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert refused, f"confluent-kafka reported no authentication failure: {errors}"
    assert "SASL authentication failure" in refused[0].str()
    # and otherwise only that it has no broker left to talk to
    assert {e.code() for e in errors} <= {KafkaError._AUTHENTICATION,
                                          KafkaError._ALL_BROKERS_DOWN}, errors
    wait_for_failed_login(secured, SCRAM, failed_logins)
    assert_still_serving(secured, "confluent-kafka")


def test_kafka_python_reports_a_wrong_password_as_no_broker_to_bootstrap_from(
        secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python sees the listener close the connection during the login (0.10.2 has no
    error to send there) and, having no other broker, gives up bootstrapping."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    failed_logins = failed_login_lines(secured, SCRAM)
    with caplog.at_level(logging.WARNING, logger="kafka"), \
            pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(**{**kafka_python_config(secured, "alice", WRONG_PASSWORD),
                         "bootstrap_timeout_ms": 5_000})
    attempts = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("Bootstrap connection to")]
    assert attempts and all("failed: KafkaConnectionError: socket disconnected" in line
                            for line in attempts), attempts
    wait_for_failed_login(secured, SCRAM, failed_logins)
    assert_still_serving(secured, "kafka-python")


def assert_still_serving(secured: Secured, client: str) -> None:
    """After failed logins the broker runs and serves a login with the right password."""
    assert secured.broker.running
    topic = secured.topic(f"after-{client}")
    secured.grant("alice", TOPIC, topic, Op.WRITE)
    produce_as(secured, client, "alice", topic, messages("after", 1))
    assert secured.end_offset(topic) == 1


def test_confluent_kafka_without_write_or_read_gets_topic_authorization_failed(
        secured: Secured) -> None:
    """bob may read the topic but not write it; carol may write it but not read it."""
    from confluent_kafka import KafkaError

    topic, group = secured.topic("denied-confluent"), unique_topic("g-denied-confluent")
    secured.grant("alice", TOPIC, topic, Op.WRITE)
    secured.grant("bob", TOPIC, topic, Op.READ)
    secured.grant("carol", TOPIC, topic, Op.WRITE)
    secured.grant("carol", GROUP, group, Op.READ)
    produce_as(secured, "confluent-kafka", "alice", topic, messages("alice", 3))

    [refused] = confluent_produce(secured, "bob", topic, messages("bob", 1))
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert secured.end_offset(topic) == 3  # nothing of bob's was written

    got, error = confluent_group_read(secured, "carol", group, topic, 3)
    assert got == []
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    assert secured.committed(group, topic) is None


def test_kafka_python_without_write_or_read_gets_topic_authorization_failed(
        secured: Secured) -> None:
    """Idempotent (kafka-python's default against 0.11), a producer without Write on any topic
    is refused its producer id, as Kafka refuses it (KIP-679); without idempotence, the topic's
    Write is what it lacks."""
    from kafka.errors import KafkaError, TopicAuthorizationFailedError

    topic, group = secured.topic("denied-kafka-python"), unique_topic("g-denied-kafka-python")
    secured.grant("alice", TOPIC, topic, Op.WRITE)
    secured.grant("bob", TOPIC, topic, Op.READ)
    secured.grant("carol", TOPIC, topic, Op.WRITE)
    secured.grant("carol", GROUP, group, Op.READ)
    produce_as(secured, "kafka-python", "alice", topic, messages("alice", 3))

    with pytest.raises(KafkaError, match="ClusterAuthorizationFailed"):
        kafka_python_produce(kafka_python_config(secured, "bob"), topic, messages("bob", 1))
    with pytest.raises(TopicAuthorizationFailedError, match=topic):
        kafka_python_produce(kafka_python_config(secured, "bob"), topic, messages("bob", 1),
                             enable_idempotence=False)
    assert secured.end_offset(topic) == 3

    with pytest.raises(TopicAuthorizationFailedError, match=topic):
        kafka_python_group_read(kafka_python_config(secured, "carol"), group, topic, 3)
    assert secured.committed(group, topic) is None


# ------------------------------------------------------------------- SASL_PLAINTEXT, PLAIN

def test_kafka_python_logs_in_with_plain_over_sasl_plaintext(secured: Secured) -> None:
    topic, group = secured.topic("plain-kafka-python"), unique_topic("g-plain-kafka-python")
    secured.grant("alice", TOPIC, topic, Op.WRITE, Op.READ)
    secured.grant("alice", GROUP, group, Op.READ)
    config = kafka_python_config(secured, "alice", protocol="SASL_PLAINTEXT", mechanism="PLAIN")
    sent = messages("plain")
    kafka_python_produce(config, topic, sent)
    assert kafka_python_group_read(config, group, topic, len(sent)) == sent
    assert secured.committed(group, topic) == len(sent)


def kcat(secured: Secured, user: str, password: str, *args: str,
         stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["kcat", "-b", secured.kafka_bootstrap("SASL_PLAINTEXT"),
         "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
         "-X", f"sasl.username={user}", "-X", f"sasl.password={password}", *args],
        input=stdin, capture_output=True, timeout=TIMEOUT_S * 2)


def test_kcat_logs_in_with_plain_over_sasl_plaintext(secured: Secured) -> None:
    topic = secured.topic("plain-kcat")
    secured.grant("alice", TOPIC, topic, Op.WRITE, Op.READ)
    lines = [f"kcat-{i}".encode() for i in range(10)]
    produced = kcat(secured, "alice", PASSWORD, "-P", "-t", topic, "-p", "0",
                    stdin=b"\n".join(lines) + b"\n")
    assert produced.returncode == 0 and b"ERROR" not in produced.stderr, produced.stderr
    consumed = kcat(secured, "alice", PASSWORD, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                    "-c", str(len(lines)), "-e")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split(b"\n")[: len(lines)] == lines

    refused = kcat(secured, "alice", WRONG_PASSWORD, "-L", "-m", "5")
    assert refused.returncode != 0
    assert b"SASL authentication failure" in refused.stderr, refused.stderr
    assert b"Failed to acquire metadata" in refused.stderr, refused.stderr
    assert secured.end_offset(topic) == len(lines)


# ------------------------------------------------------------------ hostile logins, raw

def sasl_plaintext(secured: Secured) -> socket.socket:
    return connect(secured.broker.kafka_ports["SASL_PLAINTEXT"])


def handshake(sock: socket.socket, mechanism: str) -> dict[str, Any]:
    sock.sendall(encode_frame(encode_request(SASL_HANDSHAKE, 0, 1, "raw",
                                             {"mechanism": mechanism})))
    frame = read_frame(sock)
    assert frame is not None, "SaslHandshake not answered"
    correlation_id, body = decode_response(SASL_HANDSHAKE, 0, frame)
    assert correlation_id == 1
    return body


PLAIN_TOKENS = {
    "wrong-password": b"\x00alice\x00" + WRONG_PASSWORD.encode(),
    "unknown-user": b"\x00mallory\x00" + PASSWORD.encode(),
    "no-separators": b"alice" + PASSWORD.encode(),
    "empty": b"",
    "not-utf8": b"\x00\xff\xfe\x00\xff",
    "large": bytes(256 * 1024),
}


@pytest.mark.parametrize("token", PLAIN_TOKENS.values(), ids=PLAIN_TOKENS.keys())
def test_a_bad_plain_token_is_a_failed_login_closed_with_nothing_written(
        secured: Secured, token: bytes) -> None:
    failed_logins = failed_login_lines(secured, "PLAIN")
    with sasl_plaintext(secured) as sock:
        assert handshake(sock, "PLAIN")["error_code"] == 0
        send(sock, encode_frame(token))
        assert closed_with_nothing_written(sock)
    wait_for_failed_login(secured, "PLAIN", failed_logins)
    assert_logs_in_and_is_served(secured)


def test_requests_before_the_login_close_the_connection(secured: Secured) -> None:
    """Only ApiVersions and SaslHandshake are answered before the login; SaslAuthenticate
    (36) is not in 0.10.2's table at all."""
    with sasl_plaintext(secured) as sock:
        sock.sendall(api_versions_v0(3))
        assert_api_versions_answer(sock, 3)
        send(sock, encode_frame(encode_request(METADATA, 0, 4, "raw", {"topics": []})))
        assert closed_with_nothing_written(sock)
    with sasl_plaintext(secured) as sock:
        send(sock, raw_request(36, 0, 5, struct.pack(">i", 5) + b"token"))
        assert closed_with_nothing_written(sock)
    assert_logs_in_and_is_served(secured)


def assert_logs_in_and_is_served(secured: Secured) -> None:
    """A PLAIN login with the right password, and a Metadata pipelined behind its token (the
    topics alice may describe) answered on the same connection."""
    with sasl_plaintext(secured) as sock:
        assert handshake(sock, "PLAIN")["error_code"] == 0
        sock.sendall(encode_frame(b"\x00alice\x00" + PASSWORD.encode())
                     + encode_frame(encode_request(METADATA, 0, 7, "raw", {"topics": []})))
        assert read_frame(sock) == b""  # PLAIN's answer: an empty token
        frame = read_frame(sock)
        assert frame is not None
        correlation_id, body = decode_response(METADATA, 0, frame)
        assert correlation_id == 7 and [b["node_id"] for b in body["brokers"]] == [0]


def test_a_request_in_the_clear_to_the_sasl_ssl_listener_is_closed(secured: Secured) -> None:
    """Not a TLS handshake: the connection is closed with nothing written in the clear."""
    with connect(secured.broker.kafka_ports["SASL_SSL"]) as sock:
        port = sock.getsockname()[1]
        send(sock, api_versions_v0(1))
        assert closed_with_nothing_written(sock)
    secured.broker.wait_for_log(
        rf"connection\.dropped.*127\.0\.0\.1:{port}\b.*TLS handshake failed")
    assert_logs_in_and_is_served(secured)
