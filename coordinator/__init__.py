"""The group coordinator as deterministic logic: no sockets, no trio, no wall clock.

Group and offsets-partition state machines (``group_state``, ``loader_state``), assignment
strategies (``assignors``), the records written to ``__consumer_offsets`` (``offsets_topic``),
the jobs -- ``membership`` (joins, heartbeats, leaves, rounds and their timers), ``offsets``
(commits, fetches, deletes, expiry; Kafka's GroupMetadataManager), ``loader`` (the offsets
partitions and their loading) -- and ``GroupCoordinator``, the thin front that dispatches to
them and hands back the effects collected in their shared ``outbox``. Time comes in as an
argument; effects go out as values. The broker is only its driver.

The driver's contract
---------------------
Construct one ``GroupCoordinator(config, topic_partitions)`` per broker; ``topic_partitions(topic)``
returns a topic's partition count, or None if it does not exist. Every call below returns a list
of effects, to be carried out in order:

- ``Respond(token, body)``: send ``body`` (valid for the API's response schema) as the answer to
  the request that carried ``token``. Every token is answered exactly once, perhaps much later:
  JoinGroup is held until its round ends, SyncGroup until its generation is written,
  OffsetCommit, DeleteGroups and OffsetDelete until their records are written.
- ``AppendRecords(append_id, partition, records)``: append the (key, value) pairs -- value None is a
  tombstone -- to ``__consumer_offsets`` partition ``partition`` (compacted, created with
  ``config.offsets_topic_partitions`` partitions on first use), then call
  ``on_append_done(append_id, error_code, now_ms)`` (``ErrorCode.NONE`` on success).
- ``SetTimer(key, deadline_ms)`` / ``CancelTimer(key)``: one timer per key; setting a key again
  replaces its deadline. When one is due call ``on_timer(key, now_ms)``; a late or stale call is
  harmless.

Inputs:

- ``handle(api_key, body, RequestContext(token, now_ms, client_id, client_host, connection))`` for
  each API in ``GroupCoordinator.HANDLED_APIS`` with the validated request body.
  FindCoordinator is the driver's: the coordinator of a group is the leader of partition
  ``offsets_partition_for(group_id, config.offsets_topic_partitions)``.
- ``heartbeat(group_id, member_id, generation, now_ms)``: a Heartbeat's error code and the
  effects (timers only), answered as ``handle`` would answer it but without a token -- the
  broker's path for its most frequent request.
- ``become_leader(partition, records, now_ms)`` when this broker leads an offsets partition, with
  its records in log order (or ``start_loading`` / ``load_records`` ... / ``finish_loading`` to
  load in batches; requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS), and
  ``resign(partition, now_ms)`` when it stops (requests then get NOT_COORDINATOR). Do not feed
  back records the coordinator appended itself.
- ``on_topic_partitions_changed(topic, count, now_ms)`` after a topic is created, gains
  partitions or is deleted (after ``topic_partitions`` reflects it).
- ``on_disconnect(connection, now_ms)`` whenever a client connection closes (the coordinator
  remembers the connections new members joined on until then; with it, a new member whose first
  JoinGroup answer was lost does not keep partitions until its session times out).

Logs go straight to structlog (``odradek.coordinator``): every state change with group,
generation, from, to and reason. ``GroupCoordinator.counters`` counts them for metrics.
"""

from coordinator.assignors import (
    BUILTIN_STRATEGIES,
    AssignmentStrategy,
    RangeStrategy,
    RoundRobinStrategy,
    StickyStrategy,
)
from coordinator.config import CoordinatorConfig
from coordinator.coordinator import GroupCoordinator, TopicPartitionsLookup
from coordinator.effects import (
    AppendRecords,
    CancelTimer,
    Effect,
    RequestContext,
    Respond,
    SetTimer,
    TimerKey,
    TimerKind,
)
from coordinator.group_state import GroupEvent, GroupState
from coordinator.loader_state import LoaderEvent, LoaderState
from protocol.partitions import OFFSETS_TOPIC, TopicPartition, offsets_partition_for
from protocol.statemachine import IllegalTransition

__all__ = [
    "BUILTIN_STRATEGIES",
    "OFFSETS_TOPIC",
    "AppendRecords",
    "AssignmentStrategy",
    "CancelTimer",
    "CoordinatorConfig",
    "Effect",
    "GroupCoordinator",
    "GroupEvent",
    "GroupState",
    "IllegalTransition",
    "LoaderEvent",
    "LoaderState",
    "RangeStrategy",
    "RequestContext",
    "Respond",
    "RoundRobinStrategy",
    "SetTimer",
    "StickyStrategy",
    "TimerKey",
    "TimerKind",
    "TopicPartition",
    "TopicPartitionsLookup",
    "offsets_partition_for",
]
