"""The ZooKeeper layout (``broker.cluster.zk_layout``): every node's codec round-trips, writes
the JSON seed 003 shows, and refuses garbage with a ZkFormatError naming the node's path."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from broker.cluster import zk_layout as zk
from broker.cluster.zk_layout import BrokerRegistration, LeaderIsr, ZkFormatError

# seed 003, verbatim: `get /brokers/topics/cards/partitions/1/state` (dataLength = 75) and
# `get /brokers/topics/cards_1/partitions/1/state`, `get /controller`, `get /brokers/ids/0`
SEED_STATE = b'{"controller_epoch":14,"leader":1,"version":1,"leader_epoch":5,"isr":[1,0]}'
SEED_STATE_DATA_LENGTH = 75
SEED_STATE_2 = b'{"controller_epoch":14,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1]}'
SEED_CONTROLLER = b'{"version":1,"brokerid":1,"timestamp":"1520798869366"}'
SEED_BROKER = (
    b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":'
    b'["PLAINTEXT://192.168.1.125:9092"],"jmx_port":-1,"host":"192.168.1.125",'
    b'"timestamp":"1520798874231","port":9092,"version":4}'
)


def test_paths_are_the_seeds():
    assert zk.state_path("cards", 1) == "/brokers/topics/cards/partitions/1/state"
    assert zk.partition_path("cards", 1) == "/brokers/topics/cards/partitions/1"
    assert zk.partitions_path("cards") == "/brokers/topics/cards/partitions"
    assert zk.topic_path("cards") == "/brokers/topics/cards"
    assert zk.broker_path(0) == "/brokers/ids/0"
    assert zk.delete_topic_path("cards") == "/admin/delete_topics/cards"
    assert zk.topic_config_path("cards") == "/config/topics/cards"
    assert (zk.CONTROLLER, zk.CONTROLLER_EPOCH, zk.CLUSTER_ID) == (
        "/controller", "/controller_epoch", "/cluster/id")
    assert set(zk.PERSISTENT_PATHS) >= {"/brokers/ids", "/brokers/topics",
                                        "/admin/delete_topics", "/config/topics"}


# ---------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("registration", [
    BrokerRegistration(0, "192.168.1.125", 9092, timestamp="1520798874231"),
    BrokerRegistration(7, "::1", 19092, rack="rack-b", directory_id="Wc8Gd-kuRsOXt5bCnlWuGA",
                       timestamp="1"),
    BrokerRegistration(3, "10.0.0.3", 9093, timestamp="1", endpoints=(
        ("PLAINTEXT", "10.0.0.3", 9092), ("SASL_SSL", "10.0.0.3", 9093))),
])
def test_broker_registration_round_trip(registration: BrokerRegistration):
    assert BrokerRegistration.decode(registration.broker_id, registration.encode()) == (
        registration)


def test_broker_registration_has_the_seeds_shape_and_reads_the_seeds_node():
    """Seed 003's `get /brokers/ids/0`; ours adds the rack and the data directory's id."""
    ours = json.loads(BrokerRegistration(0, "192.168.1.125", 9092, rack="r1",
                                         directory_id="d", timestamp="1520798874231").encode())
    assert ours.pop("rack") == "r1" and ours.pop("directory_id") == "d"
    assert ours == json.loads(SEED_BROKER)
    # a node written by Kafka itself (no rack, no directory id) is read too
    assert BrokerRegistration.decode(0, SEED_BROKER) == BrokerRegistration(
        0, "192.168.1.125", 9092, None, "", "1520798874231")


def test_registration_timestamps_are_milliseconds_as_strings():
    stamp = json.loads(BrokerRegistration(1, "h", 1).encode())["timestamp"]
    assert isinstance(stamp, str) and stamp.isdigit() and len(stamp) == 13


def test_controller_round_trip_and_the_seeds_shape(monkeypatch: pytest.MonkeyPatch):
    """Seed 003: "The broker which joins the cluster first becomes the controller and it
    creates a controller ephermal node" -- `get /controller` shows the JSON below."""
    monkeypatch.setattr(zk.time, "time", lambda: 1520798869.366)
    data = zk.encode_controller(1)
    assert json.loads(data) == json.loads(SEED_CONTROLLER)
    assert len(data) == len(SEED_CONTROLLER)  # compact, as Kafka writes it
    assert zk.decode_controller(data) == 1
    assert zk.decode_controller(SEED_CONTROLLER) == 1


@pytest.mark.parametrize("epoch", [0, 1, 14, 2**31 - 1])
def test_controller_epoch_is_a_bare_integer(epoch: int):
    assert zk.encode_epoch(epoch) == str(epoch).encode()
    assert zk.decode_epoch(zk.encode_epoch(epoch)) == epoch


def test_cluster_id_round_trip_and_kafkas_shape():
    cluster_id = "Wc8Gd-kuRsOXt5bCnlWuGA"
    data = zk.encode_cluster_id(cluster_id)
    assert json.loads(data) == {"version": "1", "id": cluster_id}  # Kafka's string version
    assert zk.decode_cluster_id(data) == cluster_id


def test_assignment_round_trip_and_kafkas_shape():
    assignment = {1: (2, 0, 1), 0: (1, 2, 0), 10: (0,)}
    data = zk.encode_assignment(assignment)
    assert json.loads(data) == {"version": 1,
                                "partitions": {"0": [1, 2, 0], "1": [2, 0, 1], "10": [0]}}
    assert zk.decode_assignment("cards", data) == assignment


def test_topic_config_round_trip():
    configs = {"cleanup_policy": "compact", "retention_ms": "86400000"}
    data = zk.encode_topic_config(configs)
    assert json.loads(data) == {"version": 1, "config": configs}
    assert zk.decode_topic_config("cards", data) == configs
    assert zk.decode_topic_config("cards", zk.encode_topic_config({})) == {}
    assert zk.decode_topic_config("cards", b'{"version":1}') == {}


@pytest.mark.parametrize("state", [
    LeaderIsr(1, 5, (1, 0), 14, zk_version=10),
    LeaderIsr(zk.NO_LEADER, 0, (2,), 1, zk_version=0),
])
def test_leader_isr_round_trip(state: LeaderIsr):
    assert LeaderIsr.decode("cards", 1, state.encode(), state.zk_version) == state


@pytest.mark.parametrize("seed", [SEED_STATE, SEED_STATE_2])
def test_leader_isr_has_the_seeds_shape(seed: bytes):
    doc = json.loads(seed)
    state = LeaderIsr.decode("cards", 1, seed, 10)
    assert state == LeaderIsr(doc["leader"], doc["leader_epoch"], tuple(doc["isr"]),
                              doc["controller_epoch"], 10)
    data = state.encode()
    assert json.loads(data) == doc
    assert len(data) == len(seed)


def test_leader_isr_is_as_long_as_the_seeds_node():
    """The seed's stat says dataLength = 75: the same object, compactly, is 75 bytes."""
    assert len(LeaderIsr(1, 5, (1, 0), 14).encode()) == SEED_STATE_DATA_LENGTH
    assert "version" not in LeaderIsr.__dataclass_fields__  # the node's version is zk_version


# ------------------------------------------------------------------------------- garbage

Decoder = Callable[[bytes], Any]

DECODERS: dict[str, tuple[str, Decoder]] = {
    "registration": ("/brokers/ids/3", lambda d: BrokerRegistration.decode(3, d)),
    "controller": ("/controller", zk.decode_controller),
    "epoch": ("/controller_epoch", zk.decode_epoch),
    "cluster id": ("/cluster/id", zk.decode_cluster_id),
    "assignment": ("/brokers/topics/cards", lambda d: zk.decode_assignment("cards", d)),
    "topic config": ("/config/topics/cards", lambda d: zk.decode_topic_config("cards", d)),
    "state": ("/brokers/topics/cards/partitions/2/state",
              lambda d: LeaderIsr.decode("cards", 2, d, 0)),
}

GARBAGE = [b"", b"\xff\xfe", b"not json", b"[1, 2]", b"{}", b"null", b'"text"']

# well-formed JSON objects with a version, but the wrong fields or types for each node
BAD_FIELDS: dict[str, list[bytes]] = {
    "registration": [b'{"version":4}', b'{"version":4,"host":"h","port":"x"}',
                     b'{"version":4,"host":"h","port":null}'],
    "controller": [b'{"version":1}', b'{"version":1,"brokerid":"one"}',
                   b'{"version":1,"brokerid":[1]}'],
    "epoch": [b"1.5", b"-", b"14 15"],
    "cluster id": [b'{"version":"1"}', b'{"version":"1","id":null}', b'{"version":"1","id":5}'],
    "assignment": [b'{"version":1}', b'{"version":1,"partitions":[1,2]}',
                   b'{"version":1,"partitions":{"x":[1]}}', b'{"version":1,"partitions":{"0":5}}'],
    "topic config": [b'{"version":1,"config":[1]}', b'{"version":1,"config":"x"}'],
    "state": [b'{"version":1}', b'{"version":1,"leader":1,"leader_epoch":0,"isr":null,'
              b'"controller_epoch":1}', b'{"version":1,"leader":1,"leader_epoch":0,'
              b'"isr":["a"],"controller_epoch":1}'],
}

CASES = [
    pytest.param(node, data, id=f"{node}-{data[:24]!r}")
    for node in DECODERS for data in GARBAGE + BAD_FIELDS[node]
]


@pytest.mark.parametrize(("node", "data"), CASES)
def test_garbage_raises_zk_format_error_naming_the_path(node: str, data: bytes):
    path, decode = DECODERS[node]
    with pytest.raises(ZkFormatError) as raised:
        decode(data)
    assert path in str(raised.value)
    assert isinstance(raised.value, ValueError)  # callers may catch ValueError


def test_a_registration_names_every_listener_as_kafka_does():
    doc = json.loads(BrokerRegistration(3, "h", 9093, timestamp="1", endpoints=(
        ("PLAINTEXT", "h", 9092), ("SASL_SSL", "h", 9093))).encode())
    assert doc["endpoints"] == ["PLAINTEXT://h:9092", "SASL_SSL://h:9093"]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                     "SASL_SSL": "SASL_SSL"}
    assert (doc["host"], doc["port"]) == ("h", 9093)
