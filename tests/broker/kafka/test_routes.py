"""Every Kafka request of every version becomes a native request the native schema accepts, and
every whole-request refusal is a Kafka response its version can encode: whatever a Kafka client
sends that parses, the translation neither crashes nor hands a handler a malformed body."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.kafka.dispatch import ROUTES
from protocol.apis import REGISTRY
from protocol.errors import ErrorCode
from protocol.kafka.apis import KAFKA_APIS
from protocol.schema import validate
from tests.protocol.kafka.strategies import value_of

CASES = [(key, version) for key in ROUTES
         for version in range(KAFKA_APIS[key].min_version, KAFKA_APIS[key].max_version + 1)]


def _as_received(key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The body as the listener's decoder gives it (views for bytes, fields of that version)."""
    api = KAFKA_APIS[key]
    out = bytearray()
    api.encode_request(version, body, out)
    decoded, _ = api.decode_request(version, memoryview(bytes(out)))
    return decoded  # type: ignore[no-any-return]


@pytest.mark.parametrize(("key", "version"), CASES,
                         ids=[f"{KAFKA_APIS[k].name}-v{v}" for k, v in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_request_translates_to_a_valid_native_request(key: int, version: int,
                                                      data: st.DataObject) -> None:
    api, route = KAFKA_APIS[key], ROUTES[key]  # type: ignore[index]
    body = _as_received(key, version, data.draw(value_of(api.request, version)))
    native = route.request(body, version)
    native_api = REGISTRY[route.native]
    validate(native_api.name, "request", route.native_version_for(version), native_api.request,
             native)
    refusal = route.refusal(body, version, ErrorCode.NOT_COORDINATOR)
    api.encode_response(version, refusal, bytearray())
