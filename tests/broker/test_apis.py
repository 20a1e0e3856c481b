"""The broker's APIs against a real broker process, over raw sockets."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import msgpack
import pytest

from protocol.apis import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, REGISTRY, ApiKey
from protocol.compression import Codec
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.messageset import LOG_OVERHEAD, Record, decode_messages, encode_message_set
from protocol.wire import decode_response_body, encode_request
from tests.broker.raw import RawClient, fetch_body
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def client(broker: BrokerProcess):
    with RawClient(broker.address) as raw:
        yield raw


# ------------------------------------------------------------------------ ApiVersions, Metadata


def test_api_versions_lists_every_api(client: RawClient) -> None:
    answer = client.request(ApiKey.API_VERSIONS, {})
    assert answer["error_code"] == 0
    assert {(a["api_key"], a["min_version"], a["max_version"]) for a in answer["apis"]} == {
        (int(api.key), api.min_version, api.max_version) for api in REGISTRY.values()
    }


def test_api_versions_at_an_unknown_version_still_lists_every_api(client: RawClient) -> None:
    """KIP-511: UNSUPPORTED_VERSION together with the whole list, in the v0 answer's shape, so
    a client that asked too new a version learns which to use. The body is not looked at."""
    client.sock.sendall(encode_frame(msgpack.packb([18, 9, 41, "future-client", {"x": 1}])))
    correlation_id, body = client.receive()
    assert correlation_id == 41
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    answer = decode_response_body(ApiKey.API_VERSIONS, 0, body)
    assert {(a["api_key"], a["min_version"], a["max_version"]) for a in answer["apis"]} == {
        (int(api.key), api.min_version, api.max_version) for api in REGISTRY.values()
    }


def test_a_null_client_id_is_allowed(client: RawClient) -> None:
    """As in Kafka, the header's client_id may be nil; a group member then has client id ""."""
    client.sock.sendall(encode_frame(msgpack.packb([18, 0, 5, None, {}])))
    correlation_id, body = client.receive()
    assert correlation_id == 5 and body["error_code"] == 0
    join = {"group_id": "anonymous", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "topics": ["t"], "member_id": "", "assignment_strategy": "range"}
    client.sock.sendall(encode_request(ApiKey.JOIN_GROUP, 0, 6, None, join))
    correlation_id, body = client.receive()
    assert correlation_id == 6
    assert decode_response_body(ApiKey.JOIN_GROUP, 0, body)["error_code"] == 0
    (group,) = client.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["anonymous"]})["groups"]
    assert [m["client_id"] for m in group["members"]] == [""]


def test_metadata_describes_the_broker_and_cluster(broker: BrokerProcess, client: RawClient):
    answer = client.metadata(None)
    assert answer["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": broker.port}]
    assert answer["controller_id"] == 0
    assert re.fullmatch(r"[a-zA-Z0-9_-]{22}", answer["cluster_id"])
    assert answer["topics"] == []


def test_metadata_auto_creates_named_topics(client: RawClient) -> None:
    answer = client.metadata(["fresh"])
    (topic,) = answer["topics"]
    assert topic["error_code"] == 0 and topic["is_internal"] is False
    assert topic["partitions"] == [
        {"error_code": 0, "partition": 0, "leader": 0, "replicas": [0], "isr": [0]}
    ]
    assert [t["name"] for t in client.metadata(None)["topics"]] == ["fresh"]


def test_metadata_without_auto_creation(client: RawClient) -> None:
    (topic,) = client.metadata(["absent"], auto_create=False)["topics"]
    assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert topic["partitions"] == []
    (internal,) = client.metadata(["__internal"])["topics"]  # never auto-created
    assert internal["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert internal["is_internal"] is True
    (bad,) = client.metadata(["no spaces"])["topics"]
    assert bad["error_code"] == ErrorCode.INVALID_TOPIC
    assert client.metadata(None)["topics"] == []


def test_broker_setting_turns_auto_creation_off(make_broker: Callable[..., BrokerProcess]):
    broker = make_broker(env={"ODRADEK_AUTO_CREATE_TOPICS_ENABLE": "false"})
    with RawClient(broker.address) as client:
        (topic,) = client.metadata(["absent"])["topics"]
        assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_auto_created_topics_get_num_partitions(make_broker: Callable[..., BrokerProcess]):
    broker = make_broker(settings={"num_partitions": 4})
    with RawClient(broker.address) as client:
        (topic,) = client.metadata(["four"])["topics"]
        assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2, 3]


# ----------------------------------------------------------------------- CreateTopics, Delete


def _create(client: RawClient, *topics: dict, validate_only: bool = False) -> list[dict]:
    body = {"topics": list(topics), "timeout_ms": 5000, "validate_only": validate_only}
    return list(client.request(ApiKey.CREATE_TOPICS, body)["topics"])


def _spec(name: str, partitions: int = 1, rf: int = 1, **configs: str) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "configs": configs}


def test_create_topics_each_succeeds_or_fails_alone(client: RawClient) -> None:
    client.create_topic("exists")
    results = _create(
        client,
        _spec("three", 3, retention_ms="60000"),
        _spec("exists"),
        _spec("replicated", 1, rf=3),
        _spec("bad/name"),
        _spec("zero", 0),
        _spec("badconfig", 1, colour="red"),
        _spec("twice"),
        _spec("twice"),
    )
    codes = {(r["name"], r["error_code"]) for r in results}
    assert codes == {
        ("three", 0),
        ("exists", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("replicated", ErrorCode.INVALID_REPLICATION_FACTOR),
        ("bad/name", ErrorCode.INVALID_TOPIC),
        ("zero", ErrorCode.INVALID_PARTITIONS),
        ("badconfig", ErrorCode.INVALID_CONFIG),
        ("twice", ErrorCode.INVALID_REQUEST),
    }
    message = next(r["error_message"] for r in results if r["name"] == "replicated")
    assert message == "replication factor 3 is larger than the number of live brokers (1)"
    described = {t["name"]: len(t["partitions"]) for t in client.metadata(None)["topics"]}
    assert described == {"exists": 1, "three": 3}


def test_create_topics_validate_only(client: RawClient) -> None:
    (result,) = _create(client, _spec("dry", 2), validate_only=True)
    assert result["error_code"] == 0
    assert client.metadata(None)["topics"] == []


def test_topic_configs_apply(client: RawClient) -> None:
    (result,) = _create(client, _spec("stamped", message_timestamp_type="LogAppendTime"))
    assert result["error_code"] == 0
    before = int(time.time() * 1000)
    produced = client.produce_set("stamped", 0, encode_message_set([Record(None, b"v", 1)]))
    assert produced["error_code"] == 0 and produced["log_append_time"] >= before
    (message,) = client.fetch("stamped")
    assert message.timestamp == produced["log_append_time"] and message.timestamp_type == 1

    _create(client, _spec("compacted", cleanup_policy="compact"))
    keyless = client.produce_set("compacted", 0, encode_message_set([Record(None, b"v", 1)]))
    assert keyless["error_code"] == ErrorCode.INVALID_RECORD
    assert "without a key" in keyless["error_message"]


def test_delete_topics(client: RawClient) -> None:
    client.create_topic("doomed", 2)
    client.produce("doomed", [b"a", b"b"], partition=1)
    body = {"topic_names": ["doomed", "never"], "timeout_ms": 5000}
    results = client.request(ApiKey.DELETE_TOPICS, body)["topics"]
    assert [(r["name"], r["error_code"]) for r in results] == [
        ("doomed", 0), ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert client.metadata(None)["topics"] == []
    assert client.produce("doomed", [b"new"]) == 0  # auto-created again, empty


# ------------------------------------------------------------------------------------ Produce


def test_produce_assigns_consecutive_offsets(client: RawClient) -> None:
    assert client.produce("t", [b"a", b"b", b"c"]) == 0
    assert client.produce("t", [b"d"]) == 3
    assert [(m.offset, m.value) for m in client.fetch("t")] == [
        (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")
    ]


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_compressed_sets_are_stored_as_they_came(client: RawClient, codec: Codec) -> None:
    client.produce("t", [b"first"])
    records = [Record(f"k{i}".encode(), b"v" * 100, 1000 + i) for i in range(50)]
    wrapper = encode_message_set(records, codec=codec)
    assert client.produce_set("t", 0, wrapper)["base_offset"] == 1
    result = client.fetch_partition("t", 0, 1)
    stored = result["records"]
    assert stored[LOG_OVERHEAD - 4 :] == wrapper[LOG_OVERHEAD - 4 :]  # all but the offset
    messages, _ = decode_messages(stored)
    assert [m.offset for m in messages] == list(range(1, 51))
    assert [m.key for m in messages] == [r.key for r in records]


def test_produce_acks(client: RawClient) -> None:
    one = encode_message_set([Record(None, b"x", 1)])
    assert client.produce_set("t", 0, one, acks=-1)["error_code"] == 0
    bad = client.produce_set("t", 0, one, acks=2)
    assert bad["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
    # acks=0: no response -- the next answer on this connection is the ApiVersions one
    body = {"acks": 0, "timeout_ms": 1000,
            "topics": [{"name": "t", "partitions": [{"partition": 0, "records": one}]}]}
    client.send(ApiKey.PRODUCE, body)
    versions = client.send(ApiKey.API_VERSIONS, {})
    assert client.receive()[0] == versions
    assert [m.offset for m in client.fetch("t")] == [0, 1]


def test_produce_to_a_missing_partition(client: RawClient) -> None:
    client.create_topic("two", 2)
    result = client.produce_set("two", 5, encode_message_set([Record(None, b"x", 1)]))
    assert result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert result["base_offset"] == -1


# -------------------------------------------------------------------------------------- Fetch


def test_fetch_bounds_and_partial_entries(client: RawClient) -> None:
    client.produce("t", [bytes([i]) * 100 for i in range(10)])
    whole = client.fetch_partition("t", 0, 0)
    size = len(whole["records"]) // 10
    assert whole["high_watermark"] == 10 and whole["log_start_offset"] == 0

    part = client.fetch_partition("t", 0, 0, max_bytes=size * 3 + 20)
    assert len(part["records"]) == size * 3 + 20  # may end inside an entry
    messages, complete = decode_messages(part["records"])
    assert [m.offset for m in messages] == [0, 1, 2] and complete == size * 3

    middle = client.fetch_partition("t", 0, 7)
    assert [m.offset for m in decode_messages(middle["records"])[0]] == [7, 8, 9]

    at_end = client.fetch_partition("t", 0, 10)
    assert at_end["error_code"] == 0 and at_end["records"] == b""

    beyond = client.fetch_partition("t", 0, 11)
    assert beyond["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    # the answer says what the range is, so the fetcher can name it
    assert beyond["log_start_offset"] == 0 and beyond["high_watermark"] == 10

    missing = client.fetch_partition("nowhere", 0, 0)
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_partition_max_bytes_of_zero_returns_nothing_without_error(client: RawClient) -> None:
    """As in Kafka: no records and no error for that partition; the others are read."""
    client.create_topic("z", 2)
    for partition in range(2):
        client.produce("z", [b"v"] * 3, partition=partition)
    body = fetch_body("z", 0, 0, max_bytes=1 << 20, max_wait_ms=0, min_bytes=0)
    body["topics"][0]["partitions"] = [
        {"partition": 0, "fetch_offset": 0, "max_bytes": 0},
        {"partition": 1, "fetch_offset": 1, "max_bytes": 1 << 20},
    ]
    (topic,) = client.request(ApiKey.FETCH, body)["topics"]
    zero, other = topic["partitions"]
    assert (zero["error_code"], zero["records"], zero["high_watermark"]) == (0, b"", 3)
    assert [m.offset for m in decode_messages(other["records"])[0]] == [1, 2]


def test_large_fetches_arrive_intact(client: RawClient) -> None:
    values = [bytes([i % 256]) * 1000 for i in range(700)]  # ~720 kB: sent with sendfile
    for start in range(0, 700, 100):
        client.produce("big", values[start : start + 100])
    whole = client.fetch_partition("big", 0, 0, max_bytes=1 << 20)
    messages, complete = decode_messages(whole["records"])
    assert [m.value for m in messages] == values and complete == len(whole["records"])
    part = client.fetch_partition("big", 0, 123, max_bytes=300_000)
    assert len(part["records"]) == 300_000
    messages, _ = decode_messages(part["records"])
    assert [m.offset for m in messages] == list(range(123, 123 + len(messages)))
    assert [m.value for m in messages] == values[123 : 123 + len(messages)]


def test_fetch_response_max_bytes_spans_partitions(client: RawClient) -> None:
    client.create_topic("p", 3)
    for partition in range(3):
        client.produce("p", [b"x" * 100] * 10, partition=partition)
    size = len(client.fetch_partition("p", 0, 0)["records"])
    body = fetch_body("p", 0, 0, max_bytes=size + size // 2, max_wait_ms=0, min_bytes=0)
    body["topics"][0]["partitions"] = [
        {"partition": p, "fetch_offset": 0, "max_bytes": size} for p in range(3)
    ]
    (topic,) = client.request(ApiKey.FETCH, body)["topics"]
    lengths = [len(p["records"]) for p in topic["partitions"]]
    assert lengths == [size, size // 2, 0]

    # the first partition with data may exceed the response bound, so fetches make progress
    body["max_bytes"] = 10
    (topic,) = client.request(ApiKey.FETCH, body)["topics"]
    assert [len(p["records"]) for p in topic["partitions"]] == [size, 0, 0]


# -------------------------------------------------------------------------------- ListOffsets


def test_list_offsets(client: RawClient) -> None:
    for ts in (1000, 2000, 3000):
        client.produce_set("t", 0, encode_message_set([Record(None, b"v", ts)] * 2))
    assert client.list_offset("t", 0, EARLIEST_TIMESTAMP)["offset"] == 0
    assert client.list_offset("t", 0, LATEST_TIMESTAMP)["offset"] == 6
    found = client.list_offset("t", 0, 1500)
    assert (found["offset"], found["timestamp"]) == (2, 2000)
    assert client.list_offset("t", 0, 9999)["offset"] == -1
    assert client.list_offset("t", 0, -7)["error_code"] == ErrorCode.INVALID_REQUEST
    missing = client.list_offset("t", 3, LATEST_TIMESTAMP)
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ---------------------------------------------------------------------------- the rest, order


def test_pipelined_requests_are_answered_in_order(client: RawClient) -> None:
    client.produce("t", [b"x"] * 5)
    sent = []
    for i in range(30):
        if i % 3 == 0:
            sent.append(client.send(ApiKey.FETCH, fetch_body("t", 0, i % 5, 1 << 16, 0, 0)))
        elif i % 3 == 1:
            sent.append(client.send(ApiKey.METADATA,
                                    {"topics": ["t"], "allow_auto_topic_creation": False}))
        else:
            sent.append(client.send(ApiKey.API_VERSIONS, {}))
    assert [client.receive()[0] for _ in sent] == sent
