"""The handler registry: which coroutine answers each API.

A handler takes the broker context and a decoded, schema-checked request and returns the
response body, a ``WithFileSlices`` body (Fetch), or None for no response (Produce with acks=0).
Raising a ``BrokerError`` answers the whole request with that error code and message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.context import BrokerContext
from broker.frames import WithFileSlices
from broker.handlers import (
    acls,
    cluster,
    fetch,
    groups,
    list_offsets,
    metadata,
    produce,
    producer_ids,
    quotas,
    records,
    security,
    topics,
)
from coordinator import GroupCoordinator
from protocol.apis import ApiKey
from protocol.wire import Request

Reply = dict[str, Any] | WithFileSlices | None
Handler = Callable[[BrokerContext, Request], Awaitable[Reply]]

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.API_VERSIONS: metadata.api_versions,
    ApiKey.METADATA: metadata.metadata,
    ApiKey.CREATE_TOPICS: topics.create_topics,
    ApiKey.DELETE_TOPICS: topics.delete_topics,
    ApiKey.PRODUCE: produce.produce,
    ApiKey.FETCH: fetch.fetch,
    ApiKey.LIST_OFFSETS: list_offsets.list_offsets,
    ApiKey.DELETE_RECORDS: records.delete_records,
    ApiKey.DESCRIBE_LOG_DIRS: records.describe_log_dirs,
    ApiKey.FIND_COORDINATOR: groups.find_coordinator,
    ApiKey.CREATE_PARTITIONS: topics.create_partitions,
    ApiKey.DESCRIBE_CONFIGS: topics.describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: topics.incremental_alter_configs,
    ApiKey.LEADER_AND_ISR: cluster.leader_and_isr,
    ApiKey.UPDATE_METADATA: cluster.update_metadata,
    ApiKey.STOP_REPLICA: cluster.stop_replica,
    ApiKey.CONTROLLED_SHUTDOWN: cluster.controlled_shutdown,
    ApiKey.ELECT_LEADERS: cluster.elect_leaders,
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: cluster.offsets_for_leader_epoch,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: cluster.alter_partition_reassignments,
    ApiKey.DESCRIBE_ACLS: acls.describe_acls,
    ApiKey.CREATE_ACLS: acls.create_acls,
    ApiKey.DELETE_ACLS: acls.delete_acls,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas.describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: quotas.alter_client_quotas,
    ApiKey.SASL_HANDSHAKE: security.sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: security.sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: security.describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security.alter_user_scram_credentials,
    ApiKey.INIT_PRODUCER_ID: producer_ids.init_producer_id,
    **dict.fromkeys(GroupCoordinator.HANDLED_APIS, groups.coordinated),
}
assert set(HANDLERS) == set(ApiKey), "every API needs a handler"
