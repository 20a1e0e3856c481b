"""Metadata, CreateTopics, DeleteTopics and SaslHandshake from Kafka's clients, onto the native
handlers.

Metadata names each broker by its address on the listener the request came in on, so a
Kafka client is told every broker's Kafka listener (``KAFKA_PLAINTEXT`` and so on, registered
in ``/brokers/ids/N`` beside the native ones). Below v4 a Kafka client cannot say whether it
wants missing topics created: the broker's ``auto_create_topics_enable`` decides, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.route import Body, Route, same_body
from protocol.apis import ApiKey

# ----------------------------------------------------------------------------------- Metadata


def _metadata_request(body: Body, version: int) -> Body:
    topics = body["topics"]
    names = None if topics is None or (version == 0 and not topics) else [
        t["name"] for t in topics]
    # v4 lets the client say whether a topic it names may be created (before: always)
    return {"topics": names,
            "allow_auto_topic_creation": body.get("allow_auto_topic_creation", True)}


def _metadata_topic(topic: Body) -> Body:
    return {
        "error_code": topic["error_code"],
        "name": topic["name"],
        "is_internal": topic["is_internal"],
        "partitions": [
            {"error_code": p["error_code"], "partition_index": p["partition"],
             "leader_id": p["leader"], "replica_nodes": p["replicas"], "isr_nodes": p["isr"]}
            for p in topic["partitions"]
        ],
    }


def _metadata_response(reply: Body, body: Body, version: int) -> Body:
    return {
        "brokers": [{**b, "rack": None} for b in reply["brokers"]],
        "cluster_id": reply["cluster_id"],
        "controller_id": reply["controller_id"],
        "topics": [_metadata_topic(t) for t in reply["topics"]],
    }


def _metadata_refusal(body: Body, version: int, code: int) -> Body:
    topics = body["topics"] or []
    return {
        "brokers": [], "cluster_id": None, "controller_id": -1,
        "topics": [{"error_code": code, "name": t["name"], "is_internal": False,
                    "partitions": []} for t in topics],
    }


METADATA = Route(ApiKey.METADATA, 0, _metadata_request, _metadata_response, _metadata_refusal)

# ------------------------------------------------------------------------------- CreateTopics


def _creatable(topic: Body) -> Body:
    assignments = topic["assignments"]
    return {
        "name": topic["name"],
        "num_partitions": topic["num_partitions"],
        "replication_factor": topic["replication_factor"],
        # Kafka's config names (retention.ms, cleanup.policy) are aliases of odradek's
        "configs": {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None},
        "assignments": [{"partition": a["partition_index"], "broker_ids": a["broker_ids"]}
                        for a in assignments] if assignments else None,
    }


def _create_topics_request(body: Body, version: int) -> Body:
    return {
        "topics": [_creatable(t) for t in body["topics"]],
        "timeout_ms": body["timeout_ms"],
        "validate_only": body.get("validate_only", False),
    }


def _topic_results(reply: Body, body: Body, version: int) -> list[dict[str, Any]]:
    return [{"name": t["name"], "error_code": t["error_code"],
             "error_message": t["error_message"]} for t in reply["topics"]]


def _create_topics_response(reply: Body, body: Body, version: int) -> Body:
    return {"topics": _topic_results(reply, body, version)}


def _create_topics_refusal(body: Body, version: int, code: int) -> Body:
    return {"topics": [{"name": t["name"], "error_code": code, "error_message": None}
                       for t in body["topics"]]}


CREATE_TOPICS = Route(ApiKey.CREATE_TOPICS, 1, _create_topics_request, _create_topics_response,
                      _create_topics_refusal)

# ------------------------------------------------------------------------------- DeleteTopics


def _delete_topics_request(body: Body, version: int) -> Body:
    return {"topic_names": body["topic_names"], "timeout_ms": body["timeout_ms"]}


def _delete_topics_response(reply: Body, body: Body, version: int) -> Body:
    return {"responses": _topic_results(reply, body, version)}


def _delete_topics_refusal(body: Body, version: int, code: int) -> Body:
    return {"responses": [{"name": name, "error_code": code} for name in body["topic_names"]]}


DELETE_TOPICS = Route(ApiKey.DELETE_TOPICS, 0, _delete_topics_request, _delete_topics_response,
                      _delete_topics_refusal)

# ------------------------------------------------------------------------------ SaslHandshake


def _sasl_handshake_response(reply: Body, body: Body, version: int) -> Body:
    return {"error_code": reply["error_code"], "mechanisms": reply["mechanisms"]}


def _sasl_handshake_refusal(body: Body, version: int, code: int) -> Body:
    return {"error_code": code, "mechanisms": []}


SASL_HANDSHAKE = Route(ApiKey.SASL_HANDSHAKE, 0, same_body, _sasl_handshake_response,
                       _sasl_handshake_refusal)
