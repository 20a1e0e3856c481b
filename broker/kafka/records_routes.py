"""Produce, Fetch and ListOffsets from Kafka's clients, onto the native handlers.

Message sets pass through untouched: Kafka's message formats are the ones odradek stores
(docs/message-format.md), so a producer's bytes are validated and appended as the native
Produce appends them, and a Fetch answers with the stored bytes, from file to socket -- but
for a reader below Fetch v4, which gets record batches down-converted as Kafka converts them:
to magic 1 for v2-3, to magic 0 for v0-1 (v0/v1 entries are passed to both as stored).
"""

from __future__ import annotations

import struct

from broker.kafka.route import Body, Route
from protocol.apis import ApiKey
from protocol.compression import BatchCodec
from protocol.errors import ErrorCode
from protocol.messageset import LOG_OVERHEAD
from protocol.record_batch import HEADER_BYTES, MAGIC

# ------------------------------------------------------------------------------------ Produce

#: Produce v3 carries exactly one record batch per partition (Kafka's
#: ProduceRequest.validateRecords); zstd needs v7, which this table does not reach
BATCHES_ONLY_FROM = 3
_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21  # base offset, length, leader epoch, magic, CRC: then the attributes
_CODEC_MASK = 0x07


def produce_records_error(records: bytes | memoryview | None, version: int,
                          transactional_id: str | None = None) -> ErrorCode | None:
    """Why Kafka refuses a partition's records in a Produce of this version, or None: from v3
    they must be exactly one record batch (magic 2), else CORRUPT_MESSAGE (what a 0.11 client
    knows Kafka's InvalidRecordException by), and not zstd (UNSUPPORTED_COMPRESSION_TYPE); a
    transactional produce is INVALID_REQUEST, there being no transactions yet."""
    if version < BATCHES_ONLY_FROM:
        return None
    if transactional_id is not None:
        return ErrorCode.INVALID_REQUEST
    if records is None or len(records) < HEADER_BYTES or records[16] != MAGIC:
        return ErrorCode.CORRUPT_MESSAGE
    (length,) = _BATCH_LENGTH.unpack_from(records, 8)
    if LOG_OVERHEAD + length != len(records):
        return ErrorCode.CORRUPT_MESSAGE
    if _ATTRIBUTES.unpack_from(records, _ATTRIBUTES_AT)[0] & _CODEC_MASK == BatchCodec.ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return None


def _produce_request(body: Body, version: int) -> Body:
    txn = body.get("transactional_id")
    topics = []
    for t in body["topic_data"]:
        partitions = [{"partition": p["index"], "records": p["records"] or b""}
                      for p in t["partition_data"]
                      if produce_records_error(p["records"], version, txn) is None]
        if partitions:  # a topic whose every partition is refused is not touched
            topics.append({"name": t["name"], "partitions": partitions})
    return {"acks": body["acks"], "timeout_ms": body["timeout_ms"], "topics": topics}


def _produce_response(reply: Body, body: Body, version: int) -> Body:
    """Every partition asked for, in order: refused ones with their error, the rest as the
    handler answered."""
    answered = {(t["name"], p["partition"]): p for t in reply["topics"] for p in t["partitions"]}
    responses = []
    for t in body["topic_data"]:
        partitions = []
        for p in t["partition_data"]:
            refused = produce_records_error(p["records"], version, body.get("transactional_id"))
            result = answered.get((t["name"], p["index"]))
            if refused is not None or result is None:
                partitions.append({"index": p["index"],
                                   "error_code": refused or ErrorCode.UNKNOWN_SERVER_ERROR,
                                   "base_offset": -1, "log_append_time_ms": -1})
            else:
                partitions.append({"index": p["index"], "error_code": result["error_code"],
                                   "base_offset": result["base_offset"],
                                   "log_append_time_ms": result["log_append_time"]})
        responses.append({"name": t["name"], "partition_responses": partitions})
    return {"responses": responses, "throttle_time_ms": reply.get("throttle_time_ms", 0)}


def _produce_refusal(body: Body, version: int, code: int) -> Body:
    return {
        "responses": [
            {"name": t["name"],
             "partition_responses": [
                 {"index": p["index"], "error_code": code, "base_offset": -1,
                  "log_append_time_ms": -1} for p in t["partition_data"]]}
            for t in body["topic_data"]
        ],
        "throttle_time_ms": 0,
    }


PRODUCE = Route(ApiKey.PRODUCE, 1, _produce_request, _produce_response, _produce_refusal)

# -------------------------------------------------------------------------------------- Fetch

#: Kafka's Fetch below v3 has no bound on the whole response
_UNBOUNDED = 0x7FFFFFFF
#: Kafka's Fetch v4 readers take record batches: native Fetch v4 gives them as stored
BATCH_READERS_FROM = 4
#: Fetch v4's isolation level for a reader of committed data only
READ_COMMITTED = 1


def _fetch_request(body: Body, version: int) -> Body:
    return {
        "replica_id": body["replica_id"],
        "max_wait_ms": body["max_wait_ms"],
        "min_bytes": body["min_bytes"],
        "max_bytes": body["max_bytes"] if version >= 3 else _UNBOUNDED,
        "topics": [
            {"name": t["topic"],
             "partitions": [{"partition": p["partition"], "fetch_offset": p["fetch_offset"],
                             "max_bytes": p["partition_max_bytes"],
                             "log_start_offset": p.get("log_start_offset", -1)}
                            for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


def fetch_reader_magic(version: int) -> int:
    """The magic Kafka converts record batches to for a reader of this Fetch version (below
    v4): 0 for v0-1, 1 for v2-3."""
    return 0 if version < 2 else 1


def _fetch_response(reply: Body, body: Body, version: int) -> Body:
    """Records stay what the handler gave: bytes, or a file slice sent with sendfile
    (broker/kafka/fetch_encoding.py). Without transactions the last stable offset is the high
    watermark and nothing was aborted (none for read_uncommitted, an empty list for
    read_committed, as Kafka answers)."""
    aborted: list[Body] | None = (
        [] if body.get("isolation_level", 0) == READ_COMMITTED else None)
    return {
        "throttle_time_ms": reply.get("throttle_time_ms", 0),
        "responses": [
            {"topic": t["name"],
             "partitions": [
                 {"partition_index": p["partition"], "error_code": p["error_code"],
                  "high_watermark": p["high_watermark"],
                  "last_stable_offset": p["high_watermark"],
                  "log_start_offset": p["log_start_offset"],
                  "aborted_transactions": aborted, "records": p["records"]}
                 for p in t["partitions"]]}
            for t in reply["topics"]
        ],
    }


def _fetch_refusal(body: Body, version: int, code: int) -> Body:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {"topic": t["topic"],
             "partitions": [{"partition_index": p["partition"], "error_code": code,
                             "high_watermark": -1, "last_stable_offset": -1,
                             "log_start_offset": -1, "aborted_transactions": None,
                             "records": b""} for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


FETCH = Route(ApiKey.FETCH, 3, _fetch_request, _fetch_response, _fetch_refusal,
              newer_from=BATCH_READERS_FROM, newer_native_version=4)

# -------------------------------------------------------------------------------- ListOffsets


def _list_offsets_request(body: Body, version: int) -> Body:
    return {
        "replica_id": body["replica_id"],
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition": p["partition_index"], "timestamp": p["timestamp"]}
                            for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


def _list_offsets_partition(partition: Body, version: int) -> Body:
    offset = partition["offset"]
    answer = {"partition_index": partition["partition"], "error_code": partition["error_code"],
              "timestamp": partition["timestamp"], "offset": offset}
    if version == 0:  # v0 answers a list of offsets: the one found, or none
        answer["old_style_offsets"] = [offset] if offset >= 0 else []
    return answer


def _list_offsets_response(reply: Body, body: Body, version: int) -> Body:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"],
             "partitions": [_list_offsets_partition(p, version) for p in t["partitions"]]}
            for t in reply["topics"]
        ],
    }


def _list_offsets_refusal(body: Body, version: int, code: int) -> Body:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition_index": p["partition_index"], "error_code": code,
                             "old_style_offsets": [], "timestamp": -1, "offset": -1}
                            for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


LIST_OFFSETS = Route(ApiKey.LIST_OFFSETS, 0, _list_offsets_request, _list_offsets_response,
                     _list_offsets_refusal)
