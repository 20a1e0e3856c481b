"""A request refused for want of an ACL on the cluster says which operation it needs and for
which principal, whatever the API: an operator reads what to grant from the error alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocol.acls import AclBindingFilter, ResourceType, operation_for
from protocol.apis import ApiKey
from protocol.errors import ClusterAuthorizationFailedError
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

REFUSED: list[tuple[ApiKey, dict[str, Any]]] = [
    (ApiKey.DESCRIBE_ACLS, {"filter": AclBindingFilter().to_wire()}),
    (ApiKey.DELETE_ACLS, {"filters": [AclBindingFilter().to_wire()]}),
    (ApiKey.ELECT_LEADERS, {"topic_partitions": None, "timeout_ms": 1_000}),
    (ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}),
    (ApiKey.CONTROLLED_SHUTDOWN, {"broker_id": 0}),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False}),
    (ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [], "validate_only": False}),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None}),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": []}),
]


def test_a_cluster_refusal_names_the_operation_and_the_principal(
        make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(settings={"authorizer_enabled": True})
    with RawClient(broker.address) as raw:
        for api, body in REFUSED:
            with pytest.raises(ClusterAuthorizationFailedError) as refused:
                raw.request(api, body)
            needed = operation_for(api, ResourceType.CLUSTER)
            assert f"needs {needed.title} on the cluster" in str(refused.value), api
            assert "User:ANONYMOUS" in str(refused.value), api
