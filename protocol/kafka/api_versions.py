"""ApiVersions answered as Kafka answers it, from the schema table itself.

The advertised table is ``KAFKA_APIS``' version ranges, so an API or version is advertised
exactly when its schemas exist. Clients open with ApiVersions v2, v3 or v4 (kafkajs, librdkafka,
kafka-python), above our maximum of 1: Kafka answers such a request with a v0-shaped body, error
UNSUPPORTED_VERSION (35), and the connection stays open; the client then retries with the
highest version it finds for ApiVersions. Kafka 2.4+ lists only ApiVersions' own row in that
answer (KIP-511) and 0.10.2 listed none; the whole table is sent here, which every client reads
the ApiVersions row of and which tells the older ones (0.10.2-era) what the broker speaks.
"""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode
from protocol.kafka.apis import API_VERSIONS, KAFKA_APIS
from protocol.kafka.header import RequestHeader, encode_response


def advertised_versions() -> list[dict[str, int]]:
    """One row per API, by key: what this codec decodes and encodes."""
    return [
        {"api_key": int(api.key), "min_version": api.min_version, "max_version": api.max_version}
        for api in sorted(KAFKA_APIS.values(), key=lambda api: api.key)
    ]


def api_versions_body(
    error_code: int = ErrorCode.NONE, throttle_time_ms: int = 0
) -> dict[str, Any]:
    """The response body, every version's fields (an encoder ignores those its version lacks)."""
    return {
        "error_code": int(error_code),
        "api_keys": advertised_versions(),
        "throttle_time_ms": throttle_time_ms,
    }


def answer_api_versions(header: RequestHeader, throttle_time_ms: int = 0) -> bytes:
    """The response frame's payload for an ApiVersions request of any version: the table at
    the request's version, or, above the maximum, the v0-shaped UNSUPPORTED_VERSION answer."""
    if API_VERSIONS.supports(header.api_version):
        body = api_versions_body(throttle_time_ms=throttle_time_ms)
        return encode_response(API_VERSIONS, header.api_version, header.correlation_id, body)
    return unsupported_version_answer(header.correlation_id)


def unsupported_version_answer(correlation_id: int) -> bytes:
    """Error 35 and the full table in ApiVersions v0's shape, header v0: what a client that
    asked with a version we lack can read whatever version it asked with."""
    body = api_versions_body(ErrorCode.UNSUPPORTED_VERSION)
    return encode_response(API_VERSIONS, 0, correlation_id, body)
