"""The API registry: every request the broker answers, in one table.

Keys keep Kafka's numbers. Field lists follow seed 001 "Request formats" where it gives them
(JoinGroup: GroupId, SessionTimeout, Topics, ConsumerId, PartitionAssignmentStrategy ->
ErrorCode, GroupGenerationId, ConsumerId, PartitionsToOwn) plus what later Kafka found necessary
(a rebalance timeout, offsets' metadata and commit timestamps, error messages). The client id
travels in every request header. docs/protocol.md is generated from this table
(``python -m protocol.docs``) and a test fails when the file is out of date.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from protocol.schema import Array, Bool, Bytes, Field, Int, Map, String, Struct

INT8 = Int(8)
INT16 = Int(16)
INT32 = Int(32)
INT64 = Int(64)
STRING = String()
NSTRING = String(nullable=True)
BYTES = Bytes()


class ApiKey(IntEnum):
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
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_GROUPS = 42


@dataclass(frozen=True)
class Api:
    key: ApiKey
    name: str
    min_version: int
    max_version: int
    request: Struct
    response: Struct
    doc: str

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _s(name: str, *fields: Field) -> Struct:
    return Struct(name, tuple(fields))


def _f(name: str, type_: object, doc: str = "", since: int = 0) -> Field:
    return Field(name, type_, doc, since)  # type: ignore[arg-type]


ERROR_CODE = _f("error_code", INT16, "0, or an error code from the error table")
ERROR_MESSAGE = _f("error_message", NSTRING, "human-readable detail, or null")
TOPIC_NAME = _f("name", STRING, "topic name")
PARTITION = _f("partition", INT32, "partition index")

# Every request- or response-level failure the broker reports without running the handler
# (unknown API, unsupported version, a body that does not match its schema) has this body.
REQUEST_ERROR = _s("RequestError", ERROR_CODE, ERROR_MESSAGE)

# ---------------------------------------------------------------------------------- ApiVersions
API_VERSIONS = Api(
    ApiKey.API_VERSIONS, "ApiVersions", 0, 0,
    _s("ApiVersionsRequest"),
    _s("ApiVersionsResponse",
       ERROR_CODE,
       _f("apis", Array(_s("ApiVersionRange",
                           _f("api_key", INT16), _f("name", STRING),
                           _f("min_version", INT16), _f("max_version", INT16))))),
    "Which APIs and versions the broker supports. Always answered, whatever the version.",
)

# ------------------------------------------------------------------------------------- Metadata
BROKER = _s("Broker", _f("node_id", INT32), _f("host", STRING), _f("port", INT32))
METADATA = Api(
    ApiKey.METADATA, "Metadata", 0, 0,
    _s("MetadataRequest",
       _f("topics", Array(STRING, nullable=True), "topics to describe; null for all"),
       _f("allow_auto_topic_creation", Bool(),
          "create missing topics if the broker allows auto-creation")),
    _s("MetadataResponse",
       _f("brokers", Array(BROKER)),
       _f("cluster_id", STRING, "22 characters of URL-safe base64"),
       _f("controller_id", INT32),
       _f("topics", Array(_s("TopicMetadata",
                             ERROR_CODE, TOPIC_NAME,
                             _f("is_internal", Bool()),
                             _f("partitions", Array(_s(
                                 "PartitionMetadata", ERROR_CODE, PARTITION,
                                 _f("leader", INT32, "broker id of the leader, -1 if none"),
                                 _f("replicas", Array(INT32)),
                                 _f("isr", Array(INT32))))))))),
    "Brokers, the controller, the cluster id, and each topic's partitions with their leaders.",
)

# -------------------------------------------------------------------------------------- Produce
PRODUCE = Api(
    ApiKey.PRODUCE, "Produce", 0, 0,
    _s("ProduceRequest",
       _f("acks", INT16, "0: no response; 1: leader wrote it; -1: all in-sync replicas have it"),
       _f("timeout_ms", INT32, "how long to wait for acks=-1"),
       _f("topics", Array(_s("ProduceTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ProducePartition", PARTITION,
                                 _f("records", BYTES, "a message set (see Message format)")))))))),
    _s("ProduceResponse",
       _f("topics", Array(_s("ProduceTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ProducePartitionResult", PARTITION, ERROR_CODE, ERROR_MESSAGE,
                                 _f("base_offset", INT64, "offset of the first message, or -1"),
                                 _f("log_append_time", INT64,
                                    "broker time if the topic uses log-append time, else -1"))))))
       )),
    "Append message sets to partitions. The broker validates CRCs and assigns offsets; it "
    "stores compressed wrappers as they came. With acks=0 no response is sent.",
)

# ---------------------------------------------------------------------------------------- Fetch
FETCH = Api(
    ApiKey.FETCH, "Fetch", 0, 0,
    _s("FetchRequest",
       _f("replica_id", INT32, "-1 for consumers; the follower's broker id for replicas"),
       _f("max_wait_ms", INT32, "long-poll: wait up to this long for min_bytes"),
       _f("min_bytes", INT32, "answer as soon as this many bytes are available"),
       _f("max_bytes", INT32, "bound on the whole response's record bytes"),
       _f("topics", Array(_s("FetchTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "FetchPartition", PARTITION,
                                 _f("fetch_offset", INT64),
                                 _f("max_bytes", INT32, "bound on this partition's bytes")))))))),
    _s("FetchResponse",
       _f("topics", Array(_s("FetchTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "FetchPartitionResult", PARTITION, ERROR_CODE,
                                 _f("high_watermark", INT64),
                                 _f("log_start_offset", INT64),
                                 _f("records", BYTES,
                                    "stored bytes from the entry holding fetch_offset; may end "
                                    "in a partial entry")))))))),
    "Read stored message-set bytes by offset (seed 000 'Reads').",
)

# ---------------------------------------------------------------------------------- ListOffsets
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
LIST_OFFSETS = Api(
    ApiKey.LIST_OFFSETS, "ListOffsets", 0, 0,
    _s("ListOffsetsRequest",
       _f("replica_id", INT32, "-1 for clients"),
       _f("topics", Array(_s("ListOffsetsTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ListOffsetsPartition", PARTITION,
                                 _f("timestamp", INT64,
                                    "-1 latest, -2 earliest, else the first offset whose "
                                    "timestamp is at or after this (ms)")))))))),
    _s("ListOffsetsResponse",
       _f("topics", Array(_s("ListOffsetsTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ListOffsetsPartitionResult", PARTITION, ERROR_CODE,
                                 _f("timestamp", INT64, "the found message's timestamp, or -1"),
                                 _f("offset", INT64, "-1 if no message is that recent")))))))),
    "Earliest, latest, or by-timestamp offsets of partitions.",
)

# --------------------------------------------------------------------------------- CreateTopics
TOPIC_RESULT = _s("TopicResult", TOPIC_NAME, ERROR_CODE, ERROR_MESSAGE)
CREATE_TOPICS = Api(
    ApiKey.CREATE_TOPICS, "CreateTopics", 0, 0,
    _s("CreateTopicsRequest",
       _f("topics", Array(_s("CreatableTopic", TOPIC_NAME,
                             _f("num_partitions", INT32),
                             _f("replication_factor", INT16),
                             _f("configs", Map(), "per-topic settings, e.g. cleanup_policy")))),
       _f("timeout_ms", INT32),
       _f("validate_only", Bool())),
    _s("CreateTopicsResponse", _f("topics", Array(TOPIC_RESULT))),
    "Create topics with a partition count, replication factor and settings.",
)

DELETE_TOPICS = Api(
    ApiKey.DELETE_TOPICS, "DeleteTopics", 0, 0,
    _s("DeleteTopicsRequest", _f("topic_names", Array(STRING)), _f("timeout_ms", INT32)),
    _s("DeleteTopicsResponse", _f("topics", Array(TOPIC_RESULT))),
    "Delete topics and their data.",
)

# ------------------------------------------------------------------------------ FindCoordinator
FIND_COORDINATOR = Api(
    ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 0,
    _s("FindCoordinatorRequest", _f("group_id", STRING)),
    _s("FindCoordinatorResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("node_id", INT32), _f("host", STRING), _f("port", INT32)),
    "Seed 001 ConsumerMetadataRequest: which broker coordinates a group -- the leader of "
    "partition crc32(group_id) % offsets_topic_partitions of __consumer_offsets.",
)

# ------------------------------------------------------------------------------------ JoinGroup
ASSIGNMENT = Array(_s("TopicPartitions", _f("topic", STRING), _f("partitions", Array(INT32))))
JOIN_GROUP = Api(
    ApiKey.JOIN_GROUP, "JoinGroup", 0, 0,
    _s("JoinGroupRequest",
       _f("group_id", STRING),
       _f("session_timeout_ms", INT32, "seed: SessionTimeout"),
       _f("rebalance_timeout_ms", INT32,
          "how long the coordinator waits for members to rejoin during a rebalance"),
       _f("topics", Array(STRING), "seed: Topics -- the subscription"),
       _f("member_id", STRING, "seed: ConsumerId; empty on the first join"),
       _f("assignment_strategy", STRING, "seed: PartitionAssignmentStrategy, e.g. range")),
    _s("JoinGroupResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("generation_id", INT32, "seed: GroupGenerationId"),
       _f("member_id", STRING, "seed: ConsumerId, <group>-<uuid>"),
       _f("assignment_strategy", STRING),
       _f("partitions_to_own", ASSIGNMENT, "seed: PartitionsToOwn")),
    "Join (or rejoin) a group. One round: the coordinator computes the assignment and returns "
    "each member's share in its own response.",
)

HEARTBEAT = Api(
    ApiKey.HEARTBEAT, "Heartbeat", 0, 0,
    _s("HeartbeatRequest", _f("group_id", STRING), _f("generation_id", INT32),
       _f("member_id", STRING)),
    _s("HeartbeatResponse", ERROR_CODE, ERROR_MESSAGE),
    "Keep a member alive; REBALANCE_IN_PROGRESS in the answer tells it to rejoin.",
)

LEAVE_GROUP = Api(
    ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 0,
    _s("LeaveGroupRequest", _f("group_id", STRING), _f("member_id", STRING)),
    _s("LeaveGroupResponse", ERROR_CODE, ERROR_MESSAGE),
    "Leave a group at once, so the others rebalance without waiting for a session timeout.",
)

# --------------------------------------------------------------------------------- OffsetCommit
OFFSET_COMMIT = Api(
    ApiKey.OFFSET_COMMIT, "OffsetCommit", 0, 0,
    _s("OffsetCommitRequest",
       _f("group_id", STRING, "seed: ConsumerGroup"),
       _f("generation_id", INT32, "seed: GroupGenerationId; -1 for manual assignment"),
       _f("member_id", STRING, "seed: ConsumerId; empty for manual assignment"),
       _f("topics", Array(_s("OffsetCommitTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "OffsetCommitPartition", PARTITION,
                                 _f("offset", INT64, "the next offset to consume"),
                                 _f("metadata", NSTRING),
                                 _f("commit_timestamp", INT64,
                                    "seed: TimeStamp; -1 for the broker's time")))))))),
    _s("OffsetCommitResponse",
       _f("topics", Array(_s("OffsetCommitTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "OffsetCommitPartitionResult", PARTITION, ERROR_CODE))))))),
    "Store committed offsets in __consumer_offsets; answered once written.",
)

OFFSET_FETCH = Api(
    ApiKey.OFFSET_FETCH, "OffsetFetch", 0, 0,
    _s("OffsetFetchRequest",
       _f("group_id", STRING),
       _f("topics", Array(_s("OffsetFetchTopic", TOPIC_NAME,
                             _f("partitions", Array(INT32))), nullable=True),
          "null for every partition the group has committed")),
    _s("OffsetFetchResponse", ERROR_CODE,
       _f("topics", Array(_s("OffsetFetchTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "OffsetFetchPartitionResult", PARTITION,
                                 _f("offset", INT64, "-1 if never committed"),
                                 _f("metadata", NSTRING),
                                 ERROR_CODE))))))),
    "Read a group's committed offsets from the coordinator's cache.",
)

# ------------------------------------------------------------------- ListGroups / DescribeGroups
LIST_GROUPS = Api(
    ApiKey.LIST_GROUPS, "ListGroups", 0, 0,
    _s("ListGroupsRequest"),
    _s("ListGroupsResponse", ERROR_CODE,
       _f("groups", Array(_s("ListedGroup", _f("group_id", STRING), _f("state", STRING))))),
    "Every group this broker coordinates, with its state.",
)

DESCRIBE_GROUPS = Api(
    ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 0,
    _s("DescribeGroupsRequest", _f("group_ids", Array(STRING))),
    _s("DescribeGroupsResponse",
       _f("groups", Array(_s("DescribedGroup", ERROR_CODE, _f("group_id", STRING),
                             _f("state", STRING),
                             _f("assignment_strategy", STRING),
                             _f("generation_id", INT32),
                             _f("members", Array(_s(
                                 "DescribedMember",
                                 _f("member_id", STRING), _f("client_id", STRING),
                                 _f("client_host", STRING), _f("session_timeout_ms", INT32),
                                 _f("subscription", Array(STRING)),
                                 _f("assignment", ASSIGNMENT)))))))),
    "State, strategy, generation and members (with subscriptions and assignments) of groups.",
)

DELETE_GROUPS = Api(
    ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 0,
    _s("DeleteGroupsRequest", _f("group_ids", Array(STRING))),
    _s("DeleteGroupsResponse",
       _f("results", Array(_s("DeletedGroup", _f("group_id", STRING), ERROR_CODE)))),
    "Delete Empty groups and their offsets (NON_EMPTY_GROUP otherwise).",
)

REGISTRY: dict[ApiKey, Api] = {
    api.key: api
    for api in (
        API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS,
        FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH,
        LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS,
    )
}
assert set(REGISTRY) == set(ApiKey), "every ApiKey needs an Api row"
