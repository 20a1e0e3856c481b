"""The API registry: every request the broker answers, in one table.

Keys keep Kafka's numbers. Field lists follow seed 001 "Request formats" where it gives them
(JoinGroup: GroupId, SessionTimeout, Topics, ConsumerId, PartitionAssignmentStrategy ->
ErrorCode, GroupGenerationId, ConsumerId, PartitionsToOwn) plus what later Kafka found necessary
(a rebalance timeout, offsets' metadata and commit timestamps, error messages). The client id
travels in every request header. docs/protocol.md is generated from this table
(``python -m tooling.docs.protocol``) and a test fails when the file is out of date.
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
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
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
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSETS_FOR_LEADER_EPOCH = 23
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51


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
    ApiKey.METADATA, "Metadata", 0, 1,
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
                                 _f("isr", Array(INT32)),
                                 _f("leader_epoch", INT32,
                                    "grows by one with every leader change; -1 if unknown",
                                    since=1)))))))),
    "Brokers, the controller, the cluster id, and each topic's partitions with their leaders. "
    "v1 adds each partition's leader_epoch, as Kafka's v7: a client keeps the leader of the "
    "newest epoch it has seen, so an answer from a broker that has not heard of a newer "
    "leader -- one cut off from ZooKeeper, still believing it leads -- cannot send it back to "
    "an old one.",
)

# -------------------------------------------------------------------------------------- Produce
THROTTLE_TIME_MS = _f(
    "throttle_time_ms", INT32,
    "how long the broker delayed this response because the client is over its quota (0 if "
    "not); the client should not send more in that time", since=1)
PRODUCE = Api(
    ApiKey.PRODUCE, "Produce", 0, 2,
    _s("ProduceRequest",
       _f("acks", INT16, "0: no response; 1: leader wrote it; -1: all in-sync replicas have it"),
       _f("timeout_ms", INT32, "how long to wait for acks=-1"),
       _f("topics", Array(_s("ProduceTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ProducePartition", PARTITION,
                                 _f("records", BYTES, "a message set (see Message format); "
                                    "v2: or one record batch (magic 2)")))))))),
    _s("ProduceResponse",
       _f("topics", Array(_s("ProduceTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ProducePartitionResult", PARTITION, ERROR_CODE, ERROR_MESSAGE,
                                 _f("base_offset", INT64, "offset of the first message, or -1"),
                                 _f("log_append_time", INT64,
                                    "broker time if the topic uses log-append time, else -1"))))))
       ),
       THROTTLE_TIME_MS),
    "Append message sets to partitions. The broker validates the format and assigns offsets; "
    "it stores magic 1 compressed wrappers as they came and renumbers and recompresses magic 0 "
    "ones (the rules follow the table). With acks=0 no response is sent. Internal "
    "topics (`__` prefix: `__consumer_offsets`) are written by the broker alone: INVALID_TOPIC "
    "\"cannot append to internal topic '__consumer_offsets'\". v1 adds throttle_time_ms "
    "(produce quotas). v2 may carry one record batch (message format v2, magic 2) per "
    "partition instead of a message set: headers, zstd, and the idempotent producer's "
    "producer id, epoch and sequence, checked by the leader (DUPLICATE_SEQUENCE answers a "
    "retry with its first write's offsets).",
)

# ---------------------------------------------------------------------------------------- Fetch
#: Fetch's replica_id of consumers
CONSUMER_REPLICA_ID = -1
#: Fetch's replica_id of a debugging read (Kafka's ``Request.DebuggingConsumerId``): the broker
#: answers from its own replica, leader or follower, up to that replica's high watermark --
#: what replica verification compares
DEBUGGING_REPLICA_ID = -2
FETCH = Api(
    ApiKey.FETCH, "Fetch", 0, 4,
    _s("FetchRequest",
       _f("replica_id", INT32, "-1 for consumers; the follower's broker id for replicas; -2 "
          "for a debugging read of this broker's own replica, leader or not"),
       _f("max_wait_ms", INT32, "long-poll: wait up to this long for min_bytes"),
       _f("min_bytes", INT32, "answer as soon as this many bytes are available"),
       _f("max_bytes", INT32, "bound on the whole response's record bytes"),
       _f("topics", Array(_s("FetchTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "FetchPartition", PARTITION,
                                 _f("fetch_offset", INT64),
                                 _f("max_bytes", INT32, "bound on this partition's bytes"),
                                 _f("log_start_offset", INT64,
                                    "replica fetches: the follower's own log start offset, "
                                    "which the leader's low watermark counts (DeleteRecords "
                                    "waits for it); consumers send -1", since=3)))))))),
    _s("FetchResponse",
       _f("topics", Array(_s("FetchTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "FetchPartitionResult", PARTITION, ERROR_CODE,
                                 _f("high_watermark", INT64),
                                 _f("log_start_offset", INT64),
                                 _f("records", BYTES,
                                    "stored bytes from the entry holding fetch_offset; may end "
                                    "in a partial entry"),
                                 _f("leader_epochs", Array(_s(
                                     "EpochStart", _f("epoch", INT32),
                                     _f("start_offset", INT64))),
                                    "replica fetches: the leader epochs from the one holding "
                                    "fetch_offset on, with the offset each began at (message "
                                    "format v1 carries none, and a follower that becomes "
                                    "leader must know them); empty for consumers",
                                    since=1))))))),
       _f("throttle_time_ms", INT32, THROTTLE_TIME_MS.doc, since=2)),
    "Read stored message-set bytes by offset (seed 000 'Reads'). Followers fetch with their broker "
    "id as replica_id and read up to the log end; consumers read up to the high watermark. v1 adds "
    "the leader epochs a follower records; v2 adds throttle_time_ms (fetch quotas); v3 adds the "
    "follower's log start offset; v4 readers take record batches (magic 2) as stored, while below "
    "v4 the broker converts them to magic 1 (headers dropped; zstd refused with "
    "UNSUPPORTED_COMPRESSION_TYPE). A follower fetch (v3) whose log_start_offset is below the "
    "leader's is answered at once, data or not, so the follower moves its log start without waiting"
    " out max_wait_ms. replica_id -2 (Kafka's debugging consumer) reads the answering broker's own "
    "replica whether it leads the partition or follows it, up to that replica's high watermark, "
    "with a consumer's permission (Read on the topic): `odradek cluster verify-replicas` compares "
    "replicas with it; a broker without a replica of the partition answers "
    "UNKNOWN_TOPIC_OR_PARTITION.",
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
    ApiKey.CREATE_TOPICS, "CreateTopics", 0, 1,
    _s("CreateTopicsRequest",
       _f("topics", Array(_s(
           "CreatableTopic", TOPIC_NAME,
           _f("num_partitions", INT32, "-1 with assignments"),
           _f("replication_factor", INT16, "-1 with assignments"),
           _f("configs", Map(), "per-topic settings, e.g. cleanup_policy"),
           _f("assignments",
              Array(_s("CreatableReplicaAssignment", PARTITION,
                       _f("broker_ids", Array(INT32),
                          "the replicas, the preferred leader first")),
                    nullable=True),
              "an explicit replica assignment of every partition (0..n-1); null: the broker "
              "places the replicas", since=1)))),
       _f("timeout_ms", INT32),
       _f("validate_only", Bool())),
    _s("CreateTopicsResponse", _f("topics", Array(TOPIC_RESULT))),
    "Create topics with a partition count, replication factor and settings. v1 may give an "
    "explicit replica assignment instead (Kafka's --replica-assignment).",
)

DELETE_TOPICS = Api(
    ApiKey.DELETE_TOPICS, "DeleteTopics", 0, 0,
    _s("DeleteTopicsRequest", _f("topic_names", Array(STRING)), _f("timeout_ms", INT32)),
    _s("DeleteTopicsResponse", _f("topics", Array(TOPIC_RESULT))),
    "Delete topics and their data. Internal topics (`__consumer_offsets`) cannot be deleted: "
    "INVALID_TOPIC \"cannot delete internal topic '__consumer_offsets'\".",
)

# -------------------------------------------------------------------------------- DeleteRecords
DELETE_RECORDS = Api(
    ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 0,
    _s("DeleteRecordsRequest",
       _f("topics", Array(_s("DeleteRecordsTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "DeleteRecordsPartition", PARTITION,
                                 _f("offset", INT64,
                                    "the new log start offset: records below it are deleted; "
                                    "-1 for the high watermark"))))))),
       _f("timeout_ms", INT32,
          "how long to wait for the replicas to move their log starts (Kafka's clients send "
          "30000 unless told otherwise)")),
    _s("DeleteRecordsResponse",
       _f("topics", Array(_s("DeleteRecordsTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "DeleteRecordsPartitionResult", PARTITION, ERROR_CODE,
                                 ERROR_MESSAGE,
                                 _f("low_watermark", INT64,
                                    "the partition's low watermark: the lowest log start "
                                    "offset among its leader and the replicas on live brokers, "
                                    "at least the requested offset; -1 with an error")))))))),
    "Move partitions' log start offsets up (kafka-delete-records), answered by each "
    "partition's leader (NOT_LEADER_FOR_PARTITION elsewhere). Reads below the new log start "
    "fail with OFFSET_OUT_OF_RANGE and ListOffsets' earliest gives it; whole segments below it "
    "are deleted at once. The log start is kept durably (`log-start-offset` in the partition's "
    "directory) and followers follow it (a fetch response carries the leader's log start). The "
    "answer comes once every replica on a live broker, in the ISR or not, has moved its log "
    "start to the offset (Kafka's low watermark; followers report theirs in Fetch v3), so a "
    "follower that leads next serves nothing below it; after timeout_ms (Kafka's default is "
    "30000) the partition is answered REQUEST_TIMED_OUT, its leader's log start moved, the "
    "followers' still on the way. An offset above the high watermark: OFFSET_OUT_OF_RANGE; "
    "internal topics: INVALID_TOPIC.",
)

# ------------------------------------------------------------------------------ DescribeLogDirs
DESCRIBE_LOG_DIRS = Api(
    ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", 0, 0,
    _s("DescribeLogDirsRequest",
       _f("topics", Array(STRING, nullable=True), "topics to describe; null for all")),
    _s("DescribeLogDirsResponse",
       ERROR_CODE,
       _f("log_dirs", Array(_s(
           "LogDirResult", ERROR_CODE,
           _f("log_dir", STRING, "the broker's data directory"),
           _f("topics", Array(_s(
               "LogDirTopic", TOPIC_NAME,
               _f("partitions", Array(_s(
                   "LogDirPartition", PARTITION,
                   _f("size", INT64, "bytes of the partition's segments"),
                   _f("log_start_offset", INT64),
                   _f("log_end_offset", INT64),
                   _f("high_watermark", INT64),
                   _f("segments", INT32, "how many segments the log has"))))))))))),
    "The partitions on this broker's disk (kafka-log-dirs), each replica it holds whether it "
    "leads it or follows: size, log start and end offsets, high watermark, segment count. Ask "
    "every broker for the whole cluster.",
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
    ApiKey.JOIN_GROUP, "JoinGroup", 0, 3,
    _s("JoinGroupRequest",
       _f("group_id", STRING),
       _f("session_timeout_ms", INT32, "seed: SessionTimeout"),
       _f("rebalance_timeout_ms", INT32,
          "how long the coordinator waits for members to rejoin during a rebalance"),
       _f("topics", Array(STRING), "seed: Topics -- the subscription; empty when "
          "protocol_type is not empty"),
       _f("member_id", STRING, "seed: ConsumerId; empty on the first join"),
       _f("assignment_strategy", STRING, "seed: PartitionAssignmentStrategy, e.g. range; "
          "empty when protocol_type is not empty"),
       _f("protocol_type", STRING,
          "empty: the broker assigns (as v0); any other value (Kafka's consumers send "
          "consumer): the leader assigns, through SyncGroup", since=1),
       _f("protocols", Array(_s("JoinGroupProtocol", _f("name", STRING),
                                _f("metadata", BYTES))),
          "the assignors the member supports, preferred first, each with its metadata (for "
          "consumer: a ConsumerProtocol Subscription); empty when protocol_type is empty",
          since=1),
       _f("group_instance_id", NSTRING,
          "KIP-345's static membership: the member's name across restarts (null: a dynamic "
          "member). A join with an empty member_id and a known instance id takes that "
          "member's place and assignment without a rebalance", since=2),
       _f("rebalance_protocol", STRING,
          "eager (as v0-v2): the member has let go of every partition before it rejoins; "
          "incremental: it keeps fetching the partitions it owns while it rejoins, and lets "
          "go only of those its answer leaves out", since=3),
       _f("owned_partitions", ASSIGNMENT,
          "incremental: the partitions the member still owns; the coordinator gives none of "
          "them to another member until this one has rejoined without them", since=3)),
    _s("JoinGroupResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("generation_id", INT32, "seed: GroupGenerationId"),
       _f("member_id", STRING, "seed: ConsumerId, <group>-<uuid>"),
       _f("assignment_strategy", STRING),
       _f("partitions_to_own", ASSIGNMENT, "seed: PartitionsToOwn; empty when the leader "
          "assigns"),
       _f("protocol_name", STRING, "the protocol chosen for this generation (empty when the "
          "broker assigns)", since=1),
       _f("leader_id", STRING, "the member that assigns (empty when the broker assigns)",
          since=1),
       _f("members", Array(_s("JoinGroupMember", _f("member_id", STRING),
                              _f("metadata", BYTES))),
          "to the leader only: every member with its metadata for the chosen protocol",
          since=1)),
    "Join (or rejoin) a group. With protocol_type empty, one round: the coordinator computes "
    "the assignment and returns each member's share in its own response. Otherwise (v1, "
    "Kafka's classic protocol) the leader gets every member's metadata, assigns, and sends "
    "the assignments with SyncGroup. v2 adds static membership (group_instance_id); v3 "
    "incremental rebalancing (rebalance_protocol, owned_partitions).",
)

SYNC_GROUP = Api(
    ApiKey.SYNC_GROUP, "SyncGroup", 0, 0,
    _s("SyncGroupRequest", _f("group_id", STRING), _f("generation_id", INT32),
       _f("member_id", STRING),
       _f("assignments", Array(_s("SyncGroupAssignment", _f("member_id", STRING),
                                  _f("assignment", BYTES))),
          "the leader's assignment of every member; empty from the others")),
    _s("SyncGroupResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("assignment", BYTES, "this member's assignment as the leader sent it (for "
          "consumer: a ConsumerProtocol Assignment); empty on error")),
    "The second step of a group whose leader assigns (JoinGroup v1 with a protocol_type): "
    "the leader sends every member's assignment, and each member gets its own once the "
    "generation is written.",
)

HEARTBEAT = Api(
    ApiKey.HEARTBEAT, "Heartbeat", 0, 0,
    _s("HeartbeatRequest", _f("group_id", STRING), _f("generation_id", INT32),
       _f("member_id", STRING)),
    _s("HeartbeatResponse", ERROR_CODE, ERROR_MESSAGE),
    "Keep a member alive; REBALANCE_IN_PROGRESS in the answer tells it to rejoin.",
)

LEAVE_GROUP = Api(
    ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 1,
    _s("LeaveGroupRequest", _f("group_id", STRING),
       _f("member_id", STRING, "empty with a group_instance_id: remove that static member "
          "(Kafka's RemoveMembersFromGroup)"),
       _f("group_instance_id", NSTRING,
          "a static member's instance id: from the member itself, it stays in the group "
          "until its session times out (a restart takes its place without a rebalance)",
          since=1)),
    _s("LeaveGroupResponse", ERROR_CODE, ERROR_MESSAGE),
    "Leave a group at once, so the others rebalance without waiting for a session timeout. "
    "v1: a static member's own leave keeps it in the group until its session times out; "
    "an empty member_id with a group_instance_id removes that static member at once.",
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
    ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 3,
    _s("DescribeGroupsRequest", _f("group_ids", Array(STRING))),
    _s("DescribeGroupsResponse",
       _f("groups", Array(_s("DescribedGroup", ERROR_CODE, _f("group_id", STRING),
                             _f("state", STRING),
                             _f("state_since_ms", INT64,
                                "when the group entered its state (the coordinator's wall "
                                "clock, ms since the epoch; across a coordinator move, when "
                                "its generation was written); -1 if unknown: no group, or "
                                "one used only with manual assignment", since=1),
                             _f("assignment_strategy", STRING,
                                "the strategy; the chosen protocol when the leader assigns"),
                             _f("generation_id", INT32),
                             _f("members", Array(_s(
                                 "DescribedMember",
                                 _f("member_id", STRING), _f("client_id", STRING),
                                 _f("client_host", STRING), _f("session_timeout_ms", INT32),
                                 _f("subscription", Array(STRING),
                                    "decoded from metadata for protocol type consumer"),
                                 _f("assignment", ASSIGNMENT,
                                    "decoded from assignment_bytes for protocol type consumer"),
                                 _f("metadata", BYTES, "the member's metadata for the chosen "
                                    "protocol; empty when the broker assigns", since=2),
                                 _f("assignment_bytes", BYTES, "the assignment as the leader "
                                    "sent it; empty when the broker assigns", since=2),
                                 _f("group_instance_id", NSTRING, "a static member's instance "
                                    "id; null for a dynamic member", since=3)))),
                             _f("protocol_type", STRING, "empty when the broker assigns; "
                                "else the members' protocol type, e.g. consumer", since=2))))),
    "State, strategy, generation and members (with subscriptions and assignments) of groups. "
    "v1 adds when each group entered its state; v2 the protocol type and each member's "
    "metadata and assignment bytes, for groups whose leader assigns; v3 each member's "
    "instance id.",
)

DELETE_GROUPS = Api(
    ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 0,
    _s("DeleteGroupsRequest", _f("group_ids", Array(STRING))),
    _s("DeleteGroupsResponse",
       _f("results", Array(_s("DeletedGroup", _f("group_id", STRING), ERROR_CODE)))),
    "Delete Empty groups and their offsets (NON_EMPTY_GROUP otherwise).",
)

OFFSET_DELETE = Api(
    ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0,
    _s("OffsetDeleteRequest",
       _f("group_id", STRING),
       _f("topics", Array(_s("OffsetDeleteTopic", TOPIC_NAME,
                             _f("partitions", Array(INT32)))))),
    _s("OffsetDeleteResponse", ERROR_CODE,
       _f("topics", Array(_s("OffsetDeleteTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "OffsetDeletePartitionResult", PARTITION, ERROR_CODE))))))),
    "Delete a group's committed offsets of some partitions (tombstones in __consumer_offsets); "
    "answered once written. GROUP_ID_NOT_FOUND for a group that does not exist; a group with "
    "members keeps the offsets of topics they subscribe to (GROUP_SUBSCRIBED_TO_TOPIC in those "
    "partitions' entries). A partition without a committed offset is answered with no error.",
)

# -------------------------------------------------------------------------- CreatePartitions
CREATE_PARTITIONS = Api(
    ApiKey.CREATE_PARTITIONS, "CreatePartitions", 0, 0,
    _s("CreatePartitionsRequest",
       _f("topics", Array(_s("CreatePartitionsTopic", TOPIC_NAME,
                             _f("count", INT32, "the new total number of partitions"),
                             _f("assignments", Array(Array(INT32), nullable=True),
                                "replica lists of the new partitions; null: placed by the "
                                "broker")))),
       _f("timeout_ms", INT32),
       _f("validate_only", Bool())),
    _s("CreatePartitionsResponse", _f("topics", Array(TOPIC_RESULT))),
    "Increase topics' partition counts (never decrease). Groups subscribed to them rebalance.",
)

# ------------------------------------------------------- DescribeConfigs / IncrementalAlterConfigs
RESOURCE_TYPE = _f("resource_type", INT8, "2: a topic (the only resource with configs here)")
RESOURCE_NAME = _f("resource_name", STRING, "the topic name")
DESCRIBE_CONFIGS = Api(
    ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 0, 0,
    _s("DescribeConfigsRequest",
       _f("resources", Array(_s("DescribeConfigsResource", RESOURCE_TYPE, RESOURCE_NAME,
                                _f("config_names", Array(STRING, nullable=True),
                                   "configs to describe (any of their names); null for all")))),
       ),
    _s("DescribeConfigsResponse",
       _f("results", Array(_s("DescribeConfigsResult", ERROR_CODE, ERROR_MESSAGE,
                              RESOURCE_TYPE, RESOURCE_NAME,
                              _f("configs", Array(_s(
                                  "DescribeConfigsEntry",
                                  _f("name", STRING, "the config by our name (retention_ms)"),
                                  _f("value", NSTRING, "its effective value; null for none"),
                                  _f("source", INT8,
                                     "1: the topic's override, 4: the broker's setting, "
                                     "5: the built-in default")))))))),
    "Every config of topics with its effective value and where it comes from. An override "
    "shows its value as set, whichever of its names (ours or Kafka's) it was set by.",
)

INCREMENTAL_ALTER_CONFIGS = Api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 0,
    _s("IncrementalAlterConfigsRequest",
       _f("resources", Array(_s("AlterConfigsResource", RESOURCE_TYPE, RESOURCE_NAME,
                                _f("configs", Array(_s(
                                    "AlterableConfig", _f("name", STRING),
                                    _f("config_operation", INT8, "0: set, 1: delete"),
                                    _f("value", NSTRING, "the new value; null to delete"))))))),
       _f("timeout_ms", INT32, "cluster mode: how long to wait for this broker to apply it"),
       _f("validate_only", Bool())),
    _s("IncrementalAlterConfigsResponse",
       _f("results", Array(_s("AlterConfigsResult", ERROR_CODE, ERROR_MESSAGE,
                              RESOURCE_TYPE, RESOURCE_NAME)))),
    "Set or delete topics' config overrides (a deleted one falls back to the broker's "
    "setting). Each topic's changes apply all together or not at all: INVALID_CONFIG names "
    "the topic and the bad config. Internal topics are refused (INVALID_TOPIC). In a cluster "
    "the answer comes once the receiving broker has the new configs (or after timeout_ms).",
)

# ------------------------------------------------------------- between brokers (cluster mode)
# Sent by the controller to brokers (LeaderAndIsr, UpdateMetadata, StopReplica) and by a
# stopping broker to the controller (ControlledShutdown). Each controller request carries the
# controller epoch; a broker refuses an epoch older than the newest it has seen with
# STALE_CONTROLLER_EPOCH, so a controller that was paused and replaced changes nothing.
CONTROLLER_FIELDS = (
    _f("controller_id", INT32, "the sending controller's broker id"),
    _f("controller_epoch", INT32, "the sending controller's epoch (/controller_epoch)"),
    _f("broker_epoch", INT64,
       "the registration of the receiving broker the controller addresses: the czxid of its "
       "/brokers/ids node (KIP-380)", since=1),
)
#: what v1 of LeaderAndIsr, UpdateMetadata and StopReplica adds
BROKER_EPOCH_NOTE = (
    " v1 adds broker_epoch (Kafka's KIP-380): a broker refuses a request naming an older "
    "registration of itself with STALE_BROKER_EPOCH -- one sent before it registered again, "
    "which a cut link delivered late, would roll its state back.")
LEADER_AND_ISR_FIELDS = (
    _f("topic", STRING), PARTITION,
    _f("controller_epoch", INT32, "epoch of the controller that last wrote this state"),
    _f("leader", INT32, "broker id of the leader; -1 if none"),
    _f("leader_epoch", INT32, "grows by one with every leader change"),
    _f("isr", Array(INT32), "in-sync replicas"),
    _f("zk_version", INT32, "version of the partition's state znode"),
    _f("replicas", Array(INT32), "every replica, the preferred leader first"),
)
LIVE_BROKER = _s("LiveBroker", _f("node_id", INT32),
                 _f("host", STRING, "the inter-broker listener's host"),
                 _f("port", INT32, "the inter-broker listener's port"),
                 _f("rack", NSTRING),
                 _f("endpoints", Array(_s("BrokerEndpoint",
                                          _f("listener", STRING, "PLAINTEXT, SSL, ..."),
                                          _f("host", STRING), _f("port", INT32))),
                    "every listener, as advertised: clients are given the one they came in on"))
TOPIC_PARTITION = _s("TopicPartition", _f("topic", STRING), PARTITION)
PARTITION_ERROR = _s("PartitionError", _f("topic", STRING), PARTITION, ERROR_CODE)

LEADER_AND_ISR = Api(
    ApiKey.LEADER_AND_ISR, "LeaderAndIsr", 0, 1,
    _s("LeaderAndIsrRequest", *CONTROLLER_FIELDS,
       _f("partitions", Array(_s("LeaderAndIsrPartition", *LEADER_AND_ISR_FIELDS,
                                 _f("is_new", Bool(), "the replica is being created")))),
       _f("live_leaders", Array(LIVE_BROKER), "the leaders named above")),
    _s("LeaderAndIsrResponse", ERROR_CODE, _f("partitions", Array(PARTITION_ERROR))),
    "Controller to broker: become leader or follower of these partitions. A partition whose "
    "leader_epoch is older than the one the broker has is left as it is (STALE_CONTROLLER_EPOCH "
    "in its entry)." + BROKER_EPOCH_NOTE,
)

UPDATE_METADATA = Api(
    ApiKey.UPDATE_METADATA, "UpdateMetadata", 0, 1,
    _s("UpdateMetadataRequest", *CONTROLLER_FIELDS,
       _f("partitions", Array(_s("UpdateMetadataPartition", *LEADER_AND_ISR_FIELDS))),
       _f("live_brokers", Array(LIVE_BROKER)),
       _f("topics", Array(_s("UpdateMetadataTopic", TOPIC_NAME,
                             _f("configs", Map(), "the topic's config overrides")))),
       ),
    _s("UpdateMetadataResponse", ERROR_CODE),
    "Controller to broker: the whole cluster view -- live brokers and every partition's state. "
    "It replaces the broker's metadata cache, from which Metadata requests are answered."
    + BROKER_EPOCH_NOTE,
)

STOP_REPLICA = Api(
    ApiKey.STOP_REPLICA, "StopReplica", 0, 1,
    _s("StopReplicaRequest", *CONTROLLER_FIELDS,
       _f("delete_partitions", Bool(), "also delete the partitions' logs (topic deletion)"),
       _f("partitions", Array(TOPIC_PARTITION))),
    _s("StopReplicaResponse", ERROR_CODE, _f("partitions", Array(PARTITION_ERROR))),
    "Controller to broker: stop leading or following these partitions." + BROKER_EPOCH_NOTE,
)

CONTROLLED_SHUTDOWN = Api(
    ApiKey.CONTROLLED_SHUTDOWN, "ControlledShutdown", 0, 1,
    _s("ControlledShutdownRequest", _f("broker_id", INT32, "the broker that is stopping")),
    _s("ControlledShutdownResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("remaining_partitions", Array(TOPIC_PARTITION),
          "partitions it still leads that another live replica may take once in sync: "
          "worth another attempt"),
       _f("unmovable_partitions", Array(TOPIC_PARTITION),
          "partitions it still leads with no other replica that is live and not stopping "
          "itself: they go offline when it stops, and no attempt can change that", since=1)),
    "Broker to controller, on SIGTERM: move the leadership of its partitions to other in-sync "
    "replicas before it closes. NOT_CONTROLLER from a broker that is not the controller. v1 "
    "answers apart the partitions no attempt can move (a whole-cluster stop, replication "
    "factor 1); v0 leaves them out of remaining_partitions too.",
)

OFFSETS_FOR_LEADER_EPOCH = Api(
    ApiKey.OFFSETS_FOR_LEADER_EPOCH, "OffsetsForLeaderEpoch", 0, 0,
    _s("OffsetsForLeaderEpochRequest",
       _f("replica_id", INT32, "the asking follower's broker id"),
       _f("topics", Array(_s("OffsetsForLeaderEpochTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "OffsetsForLeaderEpochPartition", PARTITION,
                                 _f("current_leader_epoch", INT32,
                                    "the epoch the follower knows the leader by"),
                                 _f("leader_epoch", INT32,
                                    "the follower's latest epoch")))))))),
    _s("OffsetsForLeaderEpochResponse",
       _f("topics", Array(_s("OffsetsForLeaderEpochTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "OffsetsForLeaderEpochPartitionResult", PARTITION, ERROR_CODE,
                                 _f("leader_epoch", INT32,
                                    "the largest epoch at or below the one asked, -1 if none"),
                                 _f("end_offset", INT64,
                                    "where that epoch ends in the leader's log (the start of "
                                    "the next epoch, or the log end); -1 if unknown")))))))),
    "Follower to leader (KIP-101): where does my latest leader epoch end in your log? The "
    "follower truncates its log there before fetching, instead of to its high watermark.",
)

ELECT_LEADERS = Api(
    ApiKey.ELECT_LEADERS, "ElectLeaders", 0, 0,
    _s("ElectLeadersRequest",
       _f("topic_partitions", Array(_s("ElectLeadersTopic", _f("topic", STRING),
                                       _f("partitions", Array(INT32))), nullable=True),
          "partitions to move back to their preferred (first) replica; null for all"),
       _f("timeout_ms", INT32)),
    _s("ElectLeadersResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("elected", Array(TOPIC_PARTITION),
          "partitions whose leadership moved (others already had their preferred leader, or "
          "it is not a live in-sync replica)")),
    "Preferred-leader election, answered by the controller (NOT_CONTROLLER elsewhere: ask "
    "the controller_id given by Metadata).",
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 0,
    _s("AlterPartitionReassignmentsRequest",
       _f("topics", Array(_s("ReassignableTopic", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ReassignablePartition", PARTITION,
                                 _f("replicas", Array(INT32),
                                    "the new replicas, the preferred leader first"))))))),
       _f("timeout_ms", INT32)),
    _s("AlterPartitionReassignmentsResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("topics", Array(_s("ReassignableTopicResult", TOPIC_NAME,
                             _f("partitions", Array(_s(
                                 "ReassignablePartitionResult", PARTITION, ERROR_CODE,
                                 ERROR_MESSAGE))))))),
    "Move partitions to new replicas, answered by the controller (NOT_CONTROLLER elsewhere). "
    "The new replicas are added and catch up; once all are in the ISR the old ones are "
    "removed. The answer comes when the move has started; Metadata shows its end.",
)

# ------------------------------------------------------------------------------------------ ACLs
ACL_BINDING_FIELDS = (
    _f("resource_type", INT8, "2: Topic, 3: Group, 4: Cluster"),
    _f("resource_name", STRING, "a topic or group name, `*` for all; the cluster is "
       "`kafka-cluster`"),
    _f("pattern_type", INT8, "3: Literal, 4: Prefixed (the name is a prefix)"),
    _f("principal", STRING, "`User:alice`; `User:*` for every principal"),
    _f("host", STRING, "the client's address; `*` for any"),
    _f("operation", INT8, "2: All, 3: Read, 4: Write, 5: Create, 6: Delete, 7: Alter, "
       "8: Describe, 9: ClusterAction, 10: DescribeConfigs, 11: AlterConfigs"),
    _f("permission_type", INT8, "2: Deny, 3: Allow"),
)
ACL_BINDING = _s("AclBinding", *ACL_BINDING_FIELDS)
ACL_FILTER = _s(
    "AclBindingFilter",
    _f("resource_type", INT8, "1: Any, else as in AclBinding"),
    _f("resource_name", NSTRING, "null for any"),
    _f("pattern_type", INT8, "1: Any, 2: Match (every ACL that applies to resource_name: "
       "literal, `*` or prefix), 3: Literal, 4: Prefixed"),
    _f("principal", NSTRING, "null for any"),
    _f("host", NSTRING, "null for any"),
    _f("operation", INT8, "1: Any, else as in AclBinding"),
    _f("permission_type", INT8, "1: Any, else as in AclBinding"),
)
DESCRIBE_ACLS = Api(
    ApiKey.DESCRIBE_ACLS, "DescribeAcls", 0, 0,
    _s("DescribeAclsRequest", _f("filter", ACL_FILTER)),
    _s("DescribeAclsResponse", ERROR_CODE, ERROR_MESSAGE, _f("acls", Array(ACL_BINDING))),
    "The ACLs a filter matches. SECURITY_DISABLED when the broker has no authorizer.",
)
CREATE_ACLS = Api(
    ApiKey.CREATE_ACLS, "CreateAcls", 0, 0,
    _s("CreateAclsRequest", _f("creations", Array(ACL_BINDING))),
    _s("CreateAclsResponse",
       _f("results", Array(_s("AclCreationResult", ERROR_CODE, ERROR_MESSAGE)),
          "one per creation, in order")),
    "Add ACLs (adding one that exists changes nothing). Every broker of a cluster enforces "
    "them within moments (ZooKeeper's change notification). An invalid binding: "
    "INVALID_REQUEST in its result.",
)
DELETE_ACLS = Api(
    ApiKey.DELETE_ACLS, "DeleteAcls", 0, 0,
    _s("DeleteAclsRequest", _f("filters", Array(ACL_FILTER))),
    _s("DeleteAclsResponse",
       _f("filter_results", Array(_s("DeleteAclsFilterResult", ERROR_CODE, ERROR_MESSAGE,
                                     _f("matching_acls", Array(ACL_BINDING),
                                        "the ACLs it deleted"))),
          "one per filter, in order")),
    "Delete every ACL each filter matches.",
)

# -------------------------------------------------------------------------------- client quotas
QUOTA_ENTITY = Array(_s("EntityData",
                        _f("entity_type", STRING, "`user` or `client-id`"),
                        _f("entity_name", NSTRING, "null: the default entity of the type")))
DESCRIBE_CLIENT_QUOTAS = Api(
    ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 0,
    _s("DescribeClientQuotasRequest",
       _f("components", Array(_s("ComponentData",
                                 _f("entity_type", STRING, "`user` or `client-id`"),
                                 _f("match_type", INT8,
                                    "0: exactly `match`, 1: the default entity, 2: any"),
                                 _f("match", NSTRING)))),
       _f("strict", Bool(), "only entities with no other component than those named")),
    _s("DescribeClientQuotasResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("entries", Array(_s("QuotaEntry", _f("entity", QUOTA_ENTITY),
                              _f("values", Array(_s("QuotaValue", _f("key", STRING),
                                                    _f("value", INT64)))))))),
    "The quotas set for the entities the components match (Kafka's kafka-configs "
    "--describe --entity-type users/clients).",
)
ALTER_CLIENT_QUOTAS = Api(
    ApiKey.ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 0,
    _s("AlterClientQuotasRequest",
       _f("entries", Array(_s("AlterQuotaEntry", _f("entity", QUOTA_ENTITY),
                              _f("ops", Array(_s(
                                  "QuotaOp",
                                  _f("key", STRING,
                                     "`producer_byte_rate` or `consumer_byte_rate` (bytes/s)"),
                                  _f("value", INT64, "the new quota, at least 1"),
                                  _f("remove", Bool(), "delete the quota (value ignored)"))))))),
       _f("validate_only", Bool())),
    _s("AlterClientQuotasResponse",
       _f("entries", Array(_s("AlterQuotaResult", ERROR_CODE, ERROR_MESSAGE,
                              _f("entity", QUOTA_ENTITY))))),
    "Set or remove produce and fetch byte-rate quotas of users, client ids, or both together; "
    "an entity named null is the default of its type. Kafka's precedence picks a client's "
    "quota: user+client-id, user+default client-id, user, default user+client-id, default "
    "user+default client-id, default user, client-id, default client-id.",
)

# ------------------------------------------------------------------------------- SASL and users
SASL_HANDSHAKE = Api(
    ApiKey.SASL_HANDSHAKE, "SaslHandshake", 0, 0,
    _s("SaslHandshakeRequest", _f("mechanism", STRING, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")),
    _s("SaslHandshakeResponse", ERROR_CODE,
       _f("mechanisms", Array(STRING), "the mechanisms enabled on this listener")),
    "The first request on a SASL listener (after ApiVersions, if any): choose the mechanism. "
    "UNSUPPORTED_SASL_MECHANISM lists the enabled ones; a second handshake is "
    "ILLEGAL_SASL_STATE. Until authenticated, any other request closes the connection.",
)

SASL_AUTHENTICATE = Api(
    ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", 0, 0,
    _s("SaslAuthenticateRequest",
       _f("auth_bytes", BYTES, "the mechanism's next client message (PLAIN: "
          "authzid NUL user NUL password; SCRAM: client-first, then client-final)")),
    _s("SaslAuthenticateResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("auth_bytes", BYTES, "the mechanism's next server message (empty for PLAIN)"),
       _f("session_lifetime_ms", INT64, "0: the session does not expire")),
    "One step of the chosen mechanism (Kafka's v1 flow: the tokens travel in these requests). "
    "SASL_AUTHENTICATION_FAILED closes the connection after the answer; before a handshake, "
    "ILLEGAL_SASL_STATE.",
)

SCRAM_MECHANISM = _f("mechanism", STRING, "SCRAM-SHA-256 or SCRAM-SHA-512")
DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0,
    _s("DescribeUserScramCredentialsRequest",
       _f("users", Array(STRING, nullable=True), "users to describe; null for all")),
    _s("DescribeUserScramCredentialsResponse", ERROR_CODE, ERROR_MESSAGE,
       _f("results", Array(_s("DescribeUserScramCredentialsResult",
                              _f("user", STRING), ERROR_CODE, ERROR_MESSAGE,
                              _f("credential_infos", Array(_s(
                                  "CredentialInfo", SCRAM_MECHANISM,
                                  _f("iterations", INT32)))))))),
    "Which SCRAM credentials users have: names, mechanisms and iteration counts only, never "
    "salts or keys. RESOURCE_NOT_FOUND for a user named that has none.",
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0,
    _s("AlterUserScramCredentialsRequest",
       _f("deletions", Array(_s("ScramCredentialDeletion", _f("name", STRING),
                                SCRAM_MECHANISM))),
       _f("upsertions", Array(_s("ScramCredentialUpsertion", _f("name", STRING),
                                 SCRAM_MECHANISM,
                                 _f("iterations", INT32),
                                 _f("salt", BYTES),
                                 _f("stored_key", BYTES, "H(HMAC(salted password, 'Client Key'))"),
                                 _f("server_key", BYTES, "HMAC(salted password, 'Server Key')"))))),
    _s("AlterUserScramCredentialsResponse",
       _f("results", Array(_s("AlterUserScramCredentialsResult", _f("user", STRING),
                              ERROR_CODE, ERROR_MESSAGE)))),
    "Create, replace or delete users' SCRAM credentials (KIP-554). The client derives the "
    "stored and server keys from the password, so neither the password nor the salted "
    "password travels. RESOURCE_NOT_FOUND when deleting a credential that does not exist; "
    "UNACCEPTABLE_CREDENTIAL for iterations outside 4096-16384 or empty keys.",
)

# ------------------------------------------------------------------------------ InitProducerId
#: InitProducerId's ``producer_id`` and ``producer_epoch`` when the request is refused, and a
#: record batch's when it comes from no idempotent producer
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INIT_PRODUCER_ID = Api(
    ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 0,
    _s("InitProducerIdRequest",
       _f("transactional_id", NSTRING,
          "must be null: transactions are not supported (INVALID_REQUEST otherwise)"),
       _f("transaction_timeout_ms", INT32, "a transaction's timeout; unused without one")),
    _s("InitProducerIdResponse",
       _f("throttle_time_ms", INT32, "always 0: no quota delays this request (Kafka's field)"),
       ERROR_CODE, ERROR_MESSAGE,
       _f("producer_id", INT64, "a producer id no other producer of the cluster has had, or -1"),
       _f("producer_epoch", INT16, "0 for a new producer id, or -1")),
    "A producer id for an idempotent producer (KIP-98): each call hands out a new one, with "
    "epoch 0, as Kafka does for a null transactional_id. The producer numbers its batches "
    "per partition under it, and the leader keeps the last five of each producer, so a "
    "retried batch already written is answered with its first write's offsets instead of "
    "being written twice. Ids are unique in the cluster: a broker takes them in blocks of "
    "1000 from ZooKeeper's `/latest_producer_id_block`, as Kafka's do; a broker without "
    "ZooKeeper from a counter in its data directory, whose block is on disk before any of "
    "its ids is handed out. Needs IdempotentWrite on the cluster or Write on any topic "
    "(KIP-679), else CLUSTER_AUTHORIZATION_FAILED.",
)

REGISTRY: dict[ApiKey, Api] = {
    api.key: api
    for api in (
        API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS,
        DELETE_RECORDS, DESCRIBE_LOG_DIRS,
        FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT,
        OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CREATE_PARTITIONS,
        LEADER_AND_ISR,
        UPDATE_METADATA, STOP_REPLICA, CONTROLLED_SHUTDOWN, ELECT_LEADERS,
        OFFSETS_FOR_LEADER_EPOCH, ALTER_PARTITION_REASSIGNMENTS, DESCRIBE_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS,
        DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS, SASL_HANDSHAKE, SASL_AUTHENTICATE,
        DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS, INIT_PRODUCER_ID,
    )
}
assert set(REGISTRY) == set(ApiKey), "every ApiKey needs an Api row"
