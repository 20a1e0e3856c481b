"""Requests and responses: round trips for every API and version, and schema violations."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.apis import REGISTRY, Api, ApiKey
from protocol.errors import (
    ErrorCode,
    ProtocolError,
    RebalanceInProgressError,
    SchemaError,
    UnsupportedVersionError,
)
from protocol.framing import FrameDecoder
from protocol.messageset import decode_messages, encode_message_set
from protocol.wire import (
    RequestDecodeError,
    RequestHeader,
    decode_heartbeat,
    decode_request,
    decode_response_body,
    decode_response_envelope,
    encode_error_code_response,
    encode_request,
    encode_request_error,
    encode_response,
    pack,
)
from tests.protocol.examples import FLAVOURS, example

CASES = [
    pytest.param(api, version, flavour, id=f"{api.name}-v{version}-{flavour}")
    for api in REGISTRY.values()
    for version in range(api.min_version, api.max_version + 1)
    for flavour in FLAVOURS
]


def through_frames(frame: bytes) -> bytes:
    decoder = FrameDecoder()
    for i in range(len(frame)):  # one byte at a time, the hardest chunking
        decoder.receive_data(frame[i : i + 1])
    payload = decoder.next_frame()
    assert payload is not None and decoder.next_frame() is None
    return payload


@pytest.mark.parametrize(("api", "version", "flavour"), CASES)
def test_request_round_trip(api: Api, version: int, flavour: str) -> None:
    body = example(api.request, version, flavour)
    frame = encode_request(api.key, version, 2**31 - 1, "client-ü", body)
    request = decode_request(through_frames(frame))
    assert request.api is api
    assert (request.header.api_key, request.header.api_version) == (api.key, version)
    assert (request.header.correlation_id, request.header.client_id) == (2**31 - 1, "client-ü")
    assert request.body == body


@pytest.mark.parametrize(("api", "version", "flavour"), CASES)
def test_response_round_trip(api: Api, version: int, flavour: str) -> None:
    body = example(api.response, version, flavour)
    correlation_id, raw = decode_response_envelope(through_frames(encode_response(-7, body)))
    assert correlation_id == -7
    assert decode_response_body(api.key, version, raw) == body


def test_a_null_client_id_is_allowed() -> None:
    """Kafka's request header has a nullable client id; so has ours."""
    request = decode_request(through_frames(encode_request(ApiKey.API_VERSIONS, 0, 3, None, {})))
    assert request.header.client_id is None


def test_every_api_the_design_needs_is_registered() -> None:
    names = {api.name for api in REGISTRY.values()}
    assert names >= {
        "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "CreateTopics",
        "DeleteTopics", "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup",
        "OffsetCommit", "OffsetFetch", "ListGroups", "DescribeGroups",
    }
    assert all(api.key == key for key, api in REGISTRY.items())


# ------------------------------------------------------------------------ realistic bodies


def test_join_group_as_the_seed_describes_it() -> None:
    """Seed 001: JoinGroupRequest {GroupId, SessionTimeout, Topics, ConsumerId,
    PartitionAssignmentStrategy} -> {ErrorCode, GroupGenerationId, ConsumerId, PartitionsToOwn}."""
    request = {
        "group_id": "billing", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000,
        "topics": ["invoices", "refunds"], "member_id": "", "assignment_strategy": "range",
    }
    decoded = decode_request(through_frames(encode_request(ApiKey.JOIN_GROUP, 0, 5, "c1", request)))
    assert decoded.body == request
    response = {
        "error_code": 0, "error_message": None, "generation_id": 3,
        "member_id": "billing-6f1c0d7e-2b1c-4a53-9a55-0d8c2f7f3a10",
        "assignment_strategy": "range",
        "partitions_to_own": [{"topic": "invoices", "partitions": [0, 1]},
                              {"topic": "refunds", "partitions": [2]}],
    }
    assert decode_response_body(ApiKey.JOIN_GROUP, 0, response) == response


def test_produce_and_fetch_carry_message_sets_as_bin() -> None:
    records = encode_message_set([(b"k", b"v" * 100, 1_000), (None, None, 1_001)], base_offset=9)
    request = {"acks": -1, "timeout_ms": 1_500, "topics": [
        {"name": "t", "partitions": [{"partition": 0, "records": records}]}]}
    decoded = decode_request(through_frames(encode_request(ApiKey.PRODUCE, 0, 1, "p", request)))
    sent = decoded.body["topics"][0]["partitions"][0]["records"]
    assert type(sent) is bytes and sent == records

    response = {"topics": [{"name": "t", "partitions": [{
        "partition": 0, "error_code": 0, "high_watermark": 11, "log_start_offset": 0,
        "records": records + records[:20],  # a fetch chunk may end inside an entry
    }]}]}
    _, raw = decode_response_envelope(through_frames(encode_response(2, response)))
    body = decode_response_body(ApiKey.FETCH, 0, raw)
    messages, whole = decode_messages(body["topics"][0]["partitions"][0]["records"])
    assert [(m.offset, m.key, m.value) for m in messages] == [(9, b"k", b"v" * 100),
                                                              (10, None, None)]
    assert whole == len(records)


def test_offset_commit_with_metadata_and_timestamp() -> None:
    request = {"group_id": "g", "generation_id": -1, "member_id": "", "topics": [
        {"name": "t", "partitions": [
            {"partition": 0, "offset": 42, "metadata": "checkpoint 7", "commit_timestamp": -1},
            {"partition": 1, "offset": 0, "metadata": None, "commit_timestamp": 1_700_000_000_000},
        ]}]}
    frame = encode_request(ApiKey.OFFSET_COMMIT, 0, 3, "c", request)
    assert decode_request(through_frames(frame)).body == request


# ------------------------------------------------------------------------- request errors


def test_request_error_body_raises_its_typed_error() -> None:
    frame = encode_request_error(8, ErrorCode.UNSUPPORTED_VERSION, "JoinGroup v3 is not supported")
    correlation_id, body = decode_response_envelope(through_frames(frame))
    assert correlation_id == 8
    with pytest.raises(UnsupportedVersionError, match="JoinGroup v3 is not supported"):
        decode_response_body(ApiKey.JOIN_GROUP, 0, body)


def test_error_only_responses_are_returned_for_the_caller_to_read() -> None:
    """Heartbeat's response is just error_code/error_message: the client reads the code."""
    body = {"error_code": int(ErrorCode.REBALANCE_IN_PROGRESS), "error_message": None}
    assert decode_response_body(ApiKey.HEARTBEAT, 0, body) == body
    with pytest.raises(RebalanceInProgressError):
        decode_response_body(ApiKey.JOIN_GROUP, 0, body)


@pytest.mark.parametrize("correlation_id", [0, 1, 127, 128, 65_536, 2**31 - 1, -1, -(2**31)])
def test_an_error_code_answer_is_the_response_encoders_byte_for_byte(correlation_id: int) -> None:
    for code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID):
        assert encode_error_code_response(correlation_id, code) == encode_response(
            correlation_id, {"error_code": int(code), "error_message": None})


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.sampled_from([2**31 - 1, -(2**31)]),
    st.text(max_size=8), st.binary(max_size=4), st.floats(allow_nan=False), st.just([]),
)
_HEARTBEAT_BODIES = st.one_of(
    st.fixed_dictionaries({"group_id": st.text(max_size=8), "member_id": st.text(max_size=8),
                           "generation_id": st.integers(-(2**31), 2**31 - 1)}),
    st.dictionaries(st.sampled_from(["group_id", "member_id", "generation_id", "extra"]),
                    _VALUES, max_size=4),
    _VALUES,
)


@settings(max_examples=400, deadline=None)
@given(
    key=st.one_of(st.sampled_from([12, 11, 13, True]), _VALUES),
    version=st.one_of(st.sampled_from([0, 1, -1]), _VALUES),
    correlation_id=st.one_of(st.integers(-(2**31), 2**31 - 1), _VALUES),
    client_id=st.one_of(st.none(), st.text(max_size=8), _VALUES),
    body=_HEARTBEAT_BODIES,
)
def test_the_heartbeat_decoder_takes_exactly_the_heartbeats_decode_request_takes(
    key: Any, version: Any, correlation_id: Any, client_id: Any, body: Any
) -> None:
    """The idle lane answers what ``decode_heartbeat`` takes and leaves the rest to the
    connection's task, which decodes it with ``decode_request``: the two must agree."""
    payload = pack([key, version, correlation_id, client_id, body])
    fast = decode_heartbeat(payload)
    try:
        request = decode_request(payload)
    except ProtocolError:
        assert fast is None
        return
    if request.api.key is not ApiKey.HEARTBEAT:
        assert fast is None
        return
    body = request.body
    assert fast == (request.header, body["group_id"], body["member_id"], body["generation_id"])


@given(
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.one_of(st.none(), st.text(max_size=8)),
    group_id=st.text(max_size=8), member_id=st.text(max_size=8),
    generation=st.integers(-(2**31), 2**31 - 1),
)
def test_the_heartbeat_decoder_takes_every_heartbeat(
    correlation_id: int, client_id: str | None, group_id: str, member_id: str, generation: int
) -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 0, correlation_id, client_id, {
        "group_id": group_id, "generation_id": generation, "member_id": member_id})
    header = RequestHeader(ApiKey.HEARTBEAT, 0, correlation_id, client_id)
    assert decode_heartbeat(frame[4:]) == (header, group_id, member_id, generation)


@given(st.binary(max_size=64))
def test_the_heartbeat_decoder_never_raises(payload: bytes) -> None:
    decode_heartbeat(payload)


def test_heartbeat_requests_are_three_fields_at_every_version() -> None:
    """``decode_heartbeat`` checks these three; a version with more needs it changed."""
    api = REGISTRY[ApiKey.HEARTBEAT]
    for version in range(api.min_version, api.max_version + 1):
        names = sorted(f.name for f in api.request.fields_for(version))
        assert names == ["generation_id", "group_id", "member_id"], version


def test_heartbeat_answers_are_an_error_code_at_every_version() -> None:
    """The idle lane answers Heartbeats with ``encode_error_code_response``: a version whose
    response carries more must be answered another way."""
    api = REGISTRY[ApiKey.HEARTBEAT]
    for version in range(api.min_version, api.max_version + 1):
        names = [f.name for f in api.response.fields_for(version)]
        assert names == ["error_code", "error_message"], version


def test_unknown_api_key_is_answerable() -> None:
    payload = pack([99, 0, 17, "c", {}])
    with pytest.raises(RequestDecodeError) as info:
        decode_request(payload)
    assert info.value.error_code is ErrorCode.UNSUPPORTED_API
    assert info.value.header is not None and info.value.header.correlation_id == 17
    assert "99" in str(info.value)


def test_unsupported_version_is_answerable() -> None:
    with pytest.raises(RequestDecodeError) as info:
        decode_request(pack([int(ApiKey.HEARTBEAT), 7, 18, "c", {}]))
    assert info.value.error_code is ErrorCode.UNSUPPORTED_VERSION
    assert info.value.header is not None and info.value.header.correlation_id == 18
    assert "Heartbeat v7" in str(info.value)


@pytest.mark.parametrize(
    "envelope",
    [
        {"api_key": 18},
        [18, 0, 1, "c"],
        [18, 0, 1, "c", {}, "extra"],
        ["18", 0, 1, "c", {}],
        [18, 0, 1.5, "c", {}],
        [18, 0, 2**31, "c", {}],
        [18, 0, 1, b"bytes-client-id", {}],
        [18, True, 1, "c", {}],
    ],
    ids=repr,
)
def test_malformed_envelopes_have_no_header(envelope: Any) -> None:
    with pytest.raises(RequestDecodeError) as info:
        decode_request(pack(envelope))
    assert info.value.header is None
    assert info.value.error_code is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("payload", [b"", b"\xc1", pack([18, 0, 1, "c", {}]) + b"\x00",
                                     b"\x95\x12\x00\x01\xa4\xff\xfe\xfd\xfc\x80"])
def test_bad_msgpack_is_a_protocol_error(payload: bytes) -> None:
    with pytest.raises(ProtocolError, match="not valid msgpack"):
        decode_request(payload)
    with pytest.raises(ProtocolError, match="not valid msgpack"):
        decode_response_envelope(payload)


@pytest.mark.parametrize("value", [[1], [1, 2, 3], ["1", {}], [1, []], {"a": 1}, 5])
def test_malformed_response_envelopes(value: Any) -> None:
    with pytest.raises(ProtocolError, match="response must be"):
        decode_response_envelope(pack(value))


# ----------------------------------------------------------------------- schema violations

FETCH_REQUEST = {
    "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
    "topics": [{"name": "t", "partitions": [
        {"partition": 0, "fetch_offset": 0, "max_bytes": 1 << 20}]}],
}


def mutate(body: Any, path: tuple[Any, ...], action: str, value: Any = None) -> Any:
    """A deep copy of ``body`` with the field at ``path`` set or deleted, or (``add``) a field
    named ``value`` added to the struct at ``path``."""
    copy = _deep_copy(body)
    if action == "add":
        path = (*path, value)
        value = 0
    target = copy
    for step in path[:-1]:
        target = target[step]
    if action == "delete":
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return copy


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


VIOLATIONS = [
    # (path, action, value, the field named in the error, what it says)
    (("max_wait_ms",), "set", "500", "max_wait_ms", "expected int32, got str"),
    (("max_wait_ms",), "set", 2**31, "max_wait_ms", "2147483648 does not fit int32"),
    (("max_wait_ms",), "set", True, "max_wait_ms", "expected int32, got bool"),
    (("max_wait_ms",), "set", None, "max_wait_ms", "expected int32, got NoneType"),
    (("min_bytes",), "delete", None, "min_bytes", "missing field"),
    ((), "add", "isolation_level", "isolation_level", "unknown field"),
    (("topics",), "set", {"name": "t"}, "topics", "expected array, got dict"),
    (("topics", 0, "name"), "set", b"t", "topics[0].name", "expected string, got bytes"),
    (("topics", 0, "partitions", 0, "fetch_offset"), "set", 2**63,
     "topics[0].partitions[0].fetch_offset", "9223372036854775808 does not fit int64"),
    (("topics", 0, "partitions", 0, "partition"), "delete", None,
     "topics[0].partitions[0].partition", "missing field"),
    (("topics", 0, "partitions", 0), "add", "epoch", "topics[0].partitions[0].epoch",
     "unknown field"),
    (("topics", 0, "partitions", 0), "set", [0, 0, 1], "topics[0].partitions[0]",
     "expected map FetchPartition, got list"),
]


@pytest.mark.parametrize(("path", "action", "value", "field", "reason"), VIOLATIONS,
                         ids=[v[3] + ":" + v[4] for v in VIOLATIONS])
def test_request_schema_violations_name_api_version_and_field(
    path: tuple[Any, ...], action: str, value: Any, field: str, reason: str
) -> None:
    bad = mutate(FETCH_REQUEST, path, action, value)
    with pytest.raises(SchemaError) as info:
        decode_request(pack([int(ApiKey.FETCH), 0, 4, "c", bad]))
    assert isinstance(info.value, RequestDecodeError)
    assert info.value.error_code is ErrorCode.INVALID_REQUEST
    assert info.value.header is not None and info.value.header.correlation_id == 4
    assert str(info.value) == f"Fetch v0 request: field {field}: {reason}"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error_code": 0, "error_message": None, "node_id": 1, "host": "h", "port": 70_000,
          "extra": 1}, "FindCoordinator v0 response: field extra: unknown field"),
        ({"error_code": 0, "error_message": None, "node_id": 1, "host": "h", "port": 2**31},
         "FindCoordinator v0 response: field port: 2147483648 does not fit int32"),
        ({"error_code": 0, "error_message": 5, "node_id": 1, "host": "h", "port": 1},
         "FindCoordinator v0 response: field error_message: expected string?, got int"),
        ({"error_code": 0, "error_message": None, "node_id": 1, "host": "h"},
         "FindCoordinator v0 response: field port: missing field"),
        ([], "FindCoordinator v0 response: field (body): expected map "
             "FindCoordinatorResponse, got list"),
        ({"error_code": 40_000, "error_message": None},
         "FindCoordinator v0 request error: field error_code: 40000 does not fit int16"),
    ],
)
def test_response_schema_violations_raise_schema_error(body: Any, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        decode_response_body(ApiKey.FIND_COORDINATOR, 0, body)
    assert str(info.value) == message


def test_map_fields_need_string_keys_and_values() -> None:
    topic = {"name": "t", "num_partitions": 1, "replication_factor": 1, "configs": {"a": 1}}
    body = {"topics": [topic], "timeout_ms": 1, "validate_only": False}
    with pytest.raises(SchemaError, match=r"field topics\[0\].configs\['a'\]"):
        decode_request(pack([int(ApiKey.CREATE_TOPICS), 0, 1, "c", body]))
