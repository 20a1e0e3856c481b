"""Kafka 0.11.0's API table, as far as a client calls it: every request and response schema
the Kafka codec speaks.

One ``KafkaApi`` row per API with its version range and two ``Struct`` tables, fields in wire
order with the versions they exist in, as in Kafka's ``common/message/*.json`` (names in
snake_case). The APIs and versions are Apache Kafka 0.11.0's, because clients infer the broker's
release from the ApiVersions table (kafka-python takes Metadata v4 for 0.11) and then write
record batches (Produce v3), read them (Fetch v4-5) and ask for producer ids (InitProducerId
v0); 0.11's transaction, ACL and config APIs are left out. ApiVersions advertises this table
and nothing else, so nothing unimplemented is ever advertised. Record data (Produce's and
Fetch's records) is ``RECORDS``: opaque bytes, a memoryview of the frame.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any

from protocol.kafka.schema import Array, Field, Struct, compile_struct, decode_with, encode_with
from protocol.kafka.types import (
    BOOLEAN,
    BYTES,
    INT8_T,
    INT16_T,
    INT32_T,
    INT64_T,
    NULLABLE_STRING,
    RECORDS,
    STRING,
)

F = Field


class KafkaApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22


class KafkaApi:
    """One API: its versions and schemas, compiled once per version at import."""

    def __init__(
        self, key: KafkaApiKey, min_version: int, max_version: int,
        request: Struct, response: Struct,
    ) -> None:
        self.key = key
        self.name = "".join(part.capitalize() for part in key.name.split("_"))
        self.min_version = min_version
        self.max_version = max_version
        self.request = request
        self.response = response
        versions = range(min_version, max_version + 1)
        self._requests = {v: compile_struct(request, v) for v in versions}
        self._responses = {v: compile_struct(response, v) for v in versions}

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def decode_request(self, version: int, buf: memoryview, pos: int = 0) -> tuple[Any, int]:
        """The request body at ``pos`` and the position after it."""
        return decode_with(self._requests[version][0], buf, pos, f"{self.name} v{version} request")

    def decode_response(self, version: int, buf: memoryview, pos: int = 0) -> tuple[Any, int]:
        what = f"{self.name} v{version} response"
        return decode_with(self._responses[version][0], buf, pos, what)

    def encode_request(self, version: int, body: Any, out: bytearray) -> None:
        encode_with(self._requests[version][1], body, out, f"{self.name} v{version} request")

    def encode_response(self, version: int, body: Any, out: bytearray) -> None:
        encode_with(self._responses[version][1], body, out, f"{self.name} v{version} response")


_ERROR = F("error_code", INT16_T)
_THROTTLE_V1 = F("throttle_time_ms", INT32_T, since=1, default=0)


def _throttle(since: int) -> Field:
    """``throttle_time_ms`` from the version that brought it (always 0 where the route sets
    none: quotas hold back only Produce and Fetch)."""
    return F("throttle_time_ms", INT32_T, since=since, default=0)


#: Kafka's isolation levels (Fetch v4+, ListOffsets v2+): without transactions, both read up to
#: the high watermark
_ISOLATION_LEVEL = "isolation_level"
_STRINGS = Array(STRING)

PRODUCE = KafkaApi(
    KafkaApiKey.PRODUCE, 0, 3,
    Struct(
        F("transactional_id", NULLABLE_STRING, since=3, default=None),
        F("acks", INT16_T),
        F("timeout_ms", INT32_T),
        F("topic_data", Array(Struct(
            F("name", STRING),
            F("partition_data", Array(Struct(
                F("index", INT32_T),
                F("records", RECORDS),
            ))),
        ))),
    ),
    Struct(
        F("responses", Array(Struct(
            F("name", STRING),
            F("partition_responses", Array(Struct(
                F("index", INT32_T),
                _ERROR,
                F("base_offset", INT64_T),
                F("log_append_time_ms", INT64_T, since=2, default=-1),
            ))),
        ))),
        _THROTTLE_V1,
    ),
)

FETCH = KafkaApi(
    KafkaApiKey.FETCH, 0, 5,
    Struct(
        F("replica_id", INT32_T, default=-1),
        F("max_wait_ms", INT32_T),
        F("min_bytes", INT32_T),
        F("max_bytes", INT32_T, since=3, default=0x7FFFFFFF),
        F(_ISOLATION_LEVEL, INT8_T, since=4, default=0),
        F("topics", Array(Struct(
            F("topic", STRING),
            F("partitions", Array(Struct(
                F("partition", INT32_T),
                F("fetch_offset", INT64_T),
                F("log_start_offset", INT64_T, since=5, default=-1),
                F("partition_max_bytes", INT32_T),
            ))),
        ))),
    ),
    Struct(
        _THROTTLE_V1,
        F("responses", Array(Struct(
            F("topic", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32_T),
                _ERROR,
                F("high_watermark", INT64_T),
                F("last_stable_offset", INT64_T, since=4, default=-1),
                F("log_start_offset", INT64_T, since=5, default=-1),
                F("aborted_transactions", Array(Struct(
                    F("producer_id", INT64_T),
                    F("first_offset", INT64_T),
                )), since=4, nullable_since=4, default=None),
                F("records", RECORDS),
            ))),
        ))),
    ),
)

LIST_OFFSETS = KafkaApi(
    KafkaApiKey.LIST_OFFSETS, 0, 2,
    Struct(
        F("replica_id", INT32_T, default=-1),
        F(_ISOLATION_LEVEL, INT8_T, since=2, default=0),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32_T),
                F("timestamp", INT64_T),
                F("max_num_offsets", INT32_T, until=0, default=1),
            ))),
        ))),
    ),
    Struct(
        _throttle(2),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32_T),
                _ERROR,
                F("old_style_offsets", Array(INT64_T), until=0),
                F("timestamp", INT64_T, since=1, default=-1),
                F("offset", INT64_T, since=1, default=-1),
            ))),
        ))),
    ),
)

METADATA = KafkaApi(
    KafkaApiKey.METADATA, 0, 4,
    # v0: an empty list means every topic; v1+: null means every topic, empty none
    Struct(
        F("topics", Array(Struct(F("name", STRING))), nullable_since=1),
        F("allow_auto_topic_creation", BOOLEAN, since=4, default=True),
    ),
    Struct(
        _throttle(3),
        F("brokers", Array(Struct(
            F("node_id", INT32_T),
            F("host", STRING),
            F("port", INT32_T),
            F("rack", NULLABLE_STRING, since=1, default=None),
        ))),
        F("cluster_id", NULLABLE_STRING, since=2, default=None),
        F("controller_id", INT32_T, since=1, default=-1),
        F("topics", Array(Struct(
            _ERROR,
            F("name", STRING),
            F("is_internal", BOOLEAN, since=1, default=False),
            F("partitions", Array(Struct(
                _ERROR,
                F("partition_index", INT32_T),
                F("leader_id", INT32_T),
                F("replica_nodes", Array(INT32_T)),
                F("isr_nodes", Array(INT32_T)),
            ))),
        ))),
    ),
)

OFFSET_COMMIT = KafkaApi(
    KafkaApiKey.OFFSET_COMMIT, 0, 3,
    Struct(
        F("group_id", STRING),
        F("generation_id", INT32_T, since=1, default=-1),
        F("member_id", STRING, since=1, default=""),
        F("retention_time_ms", INT64_T, since=2, default=-1),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32_T),
                F("committed_offset", INT64_T),
                F("commit_timestamp", INT64_T, since=1, until=1, default=-1),
                F("committed_metadata", NULLABLE_STRING),
            ))),
        ))),
    ),
    Struct(
        _throttle(3),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(F("partition_index", INT32_T), _ERROR))),
        ))),
    ),
)

OFFSET_FETCH = KafkaApi(
    KafkaApiKey.OFFSET_FETCH, 0, 3,
    Struct(
        F("group_id", STRING),
        # null (v2+): every partition the group has committed
        F("topics", Array(Struct(
            F("name", STRING),
            F("partition_indexes", Array(INT32_T)),
        )), nullable_since=2),
    ),
    Struct(
        _throttle(3),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32_T),
                F("committed_offset", INT64_T),
                F("metadata", NULLABLE_STRING),
                _ERROR,
            ))),
        ))),
        F("error_code", INT16_T, since=2, default=0),
    ),
)

FIND_COORDINATOR = KafkaApi(
    KafkaApiKey.FIND_COORDINATOR, 0, 1,
    Struct(F("key", STRING), F("key_type", INT8_T, since=1, default=0)),
    Struct(
        _throttle(1),
        _ERROR,
        F("error_message", NULLABLE_STRING, since=1, default=None),
        F("node_id", INT32_T),
        F("host", STRING),
        F("port", INT32_T),
    ),
)

JOIN_GROUP = KafkaApi(
    KafkaApiKey.JOIN_GROUP, 0, 2,
    Struct(
        F("group_id", STRING),
        F("session_timeout_ms", INT32_T),
        F("rebalance_timeout_ms", INT32_T, since=1, default=-1),
        F("member_id", STRING),
        F("protocol_type", STRING),
        F("protocols", Array(Struct(F("name", STRING), F("metadata", BYTES)))),
    ),
    Struct(
        _throttle(2),
        _ERROR,
        F("generation_id", INT32_T, default=-1),
        F("protocol_name", STRING),
        F("leader", STRING),
        F("member_id", STRING),
        F("members", Array(Struct(F("member_id", STRING), F("metadata", BYTES)))),
    ),
)

HEARTBEAT = KafkaApi(
    KafkaApiKey.HEARTBEAT, 0, 1,
    Struct(F("group_id", STRING), F("generation_id", INT32_T), F("member_id", STRING)),
    Struct(_THROTTLE_V1, _ERROR),
)

LEAVE_GROUP = KafkaApi(
    KafkaApiKey.LEAVE_GROUP, 0, 1,
    Struct(F("group_id", STRING), F("member_id", STRING)),
    Struct(_THROTTLE_V1, _ERROR),
)

SYNC_GROUP = KafkaApi(
    KafkaApiKey.SYNC_GROUP, 0, 1,
    Struct(
        F("group_id", STRING),
        F("generation_id", INT32_T),
        F("member_id", STRING),
        F("assignments", Array(Struct(F("member_id", STRING), F("assignment", BYTES)))),
    ),
    Struct(_THROTTLE_V1, _ERROR, F("assignment", BYTES)),
)

DESCRIBE_GROUPS = KafkaApi(
    KafkaApiKey.DESCRIBE_GROUPS, 0, 1,
    Struct(F("groups", _STRINGS)),
    Struct(
        _THROTTLE_V1,
        F("groups", Array(Struct(
            _ERROR,
            F("group_id", STRING),
            F("group_state", STRING),
            F("protocol_type", STRING),
            F("protocol_data", STRING),
            F("members", Array(Struct(
                F("member_id", STRING),
                F("client_id", STRING),
                F("client_host", STRING),
                F("member_metadata", BYTES),
                F("member_assignment", BYTES),
            ))),
        ))),
    ),
)

LIST_GROUPS = KafkaApi(
    KafkaApiKey.LIST_GROUPS, 0, 1,
    Struct(),
    Struct(
        _THROTTLE_V1,
        _ERROR,
        F("groups", Array(Struct(F("group_id", STRING), F("protocol_type", STRING)))),
    ),
)

SASL_HANDSHAKE = KafkaApi(
    KafkaApiKey.SASL_HANDSHAKE, 0, 0,
    Struct(F("mechanism", STRING)),
    Struct(_ERROR, F("mechanisms", Array(STRING))),
)

API_VERSIONS = KafkaApi(
    KafkaApiKey.API_VERSIONS, 0, 1,
    Struct(),
    Struct(
        _ERROR,
        F("api_keys", Array(Struct(
            F("api_key", INT16_T),
            F("min_version", INT16_T),
            F("max_version", INT16_T),
        ))),
        _THROTTLE_V1,
    ),
)

CREATE_TOPICS = KafkaApi(
    KafkaApiKey.CREATE_TOPICS, 0, 2,
    Struct(
        F("topics", Array(Struct(
            F("name", STRING),
            F("num_partitions", INT32_T),
            F("replication_factor", INT16_T),
            F("assignments", Array(Struct(
                F("partition_index", INT32_T),
                F("broker_ids", Array(INT32_T)),
            ))),
            F("configs", Array(Struct(F("name", STRING), F("value", NULLABLE_STRING)))),
        ))),
        F("timeout_ms", INT32_T, default=60000),
        F("validate_only", BOOLEAN, since=1, default=False),
    ),
    Struct(
        _throttle(2),
        F("topics", Array(Struct(
            F("name", STRING),
            _ERROR,
            F("error_message", NULLABLE_STRING, since=1, default=None),
        ))),
    ),
)

DELETE_TOPICS = KafkaApi(
    KafkaApiKey.DELETE_TOPICS, 0, 1,
    Struct(F("topic_names", _STRINGS), F("timeout_ms", INT32_T)),
    Struct(_THROTTLE_V1, F("responses", Array(Struct(F("name", STRING), _ERROR)))),
)

INIT_PRODUCER_ID = KafkaApi(
    KafkaApiKey.INIT_PRODUCER_ID, 0, 0,
    Struct(F("transactional_id", NULLABLE_STRING), F("transaction_timeout_ms", INT32_T)),
    Struct(
        F("throttle_time_ms", INT32_T),
        _ERROR,
        F("producer_id", INT64_T),
        F("producer_epoch", INT16_T),
    ),
)

#: the table ApiVersions advertises, by key
KAFKA_APIS: dict[int, KafkaApi] = {
    api.key: api
    for api in (
        PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
        JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS,
        SASL_HANDSHAKE, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID,
    )
}
assert set(KAFKA_APIS) == set(KafkaApiKey), "every key needs its schemas"
