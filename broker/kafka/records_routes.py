"""Produce, Fetch and ListOffsets from Kafka's clients, onto the native handlers.

Message sets pass through untouched: Kafka's message formats are the ones odradek stores
(docs/message-format.md), so a producer's bytes are validated and appended as the native
Produce appends them, and a Fetch answers with the stored bytes, from file to socket -- but
for a reader below Fetch v4, which gets record batches down-converted as Kafka converts them:
to magic 1 for v2-3, to magic 0 for v0-1 (v0/v1 entries are passed to both as stored).
"""

from __future__ import annotations

from broker.kafka.route import Body, Route
from protocol.apis import ApiKey

# ------------------------------------------------------------------------------------ Produce


def _produce_request(body: Body, version: int) -> Body:
    return {
        "acks": body["acks"],
        "timeout_ms": body["timeout_ms"],
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition": p["index"], "records": p["records"] or b""}
                            for p in t["partition_data"]]}
            for t in body["topic_data"]
        ],
    }


def _produce_response(reply: Body, body: Body, version: int) -> Body:
    return {
        "responses": [
            {"name": t["name"],
             "partition_responses": [
                 {"index": p["partition"], "error_code": p["error_code"],
                  "base_offset": p["base_offset"], "log_append_time_ms": p["log_append_time"]}
                 for p in t["partitions"]]}
            for t in reply["topics"]
        ],
        "throttle_time_ms": reply.get("throttle_time_ms", 0),
    }


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


def _fetch_request(body: Body, version: int) -> Body:
    return {
        "replica_id": body["replica_id"],
        "max_wait_ms": body["max_wait_ms"],
        "min_bytes": body["min_bytes"],
        "max_bytes": body["max_bytes"] if version >= 3 else _UNBOUNDED,
        "topics": [
            {"name": t["topic"],
             "partitions": [{"partition": p["partition"], "fetch_offset": p["fetch_offset"],
                             "max_bytes": p["partition_max_bytes"], "log_start_offset": -1}
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
    (broker/kafka/fetch_encoding.py)."""
    return {
        "throttle_time_ms": reply.get("throttle_time_ms", 0),
        "responses": [
            {"topic": t["name"],
             "partitions": [
                 {"partition_index": p["partition"], "error_code": p["error_code"],
                  "high_watermark": p["high_watermark"], "records": p["records"]}
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
                             "high_watermark": -1, "records": b""} for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


FETCH = Route(ApiKey.FETCH, 3, _fetch_request, _fetch_response, _fetch_refusal)

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
        "topics": [
            {"name": t["name"],
             "partitions": [_list_offsets_partition(p, version) for p in t["partitions"]]}
            for t in reply["topics"]
        ],
    }


def _list_offsets_refusal(body: Body, version: int, code: int) -> Body:
    return {
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
