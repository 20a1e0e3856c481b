"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and offsets expiry,
and the ``__consumer_offsets`` records each writes (Kafka's GroupMetadataManager).

A change is answered, and enters the in-memory cache, only once its records are written (on the
ISR, in a cluster), so the cache follows the log's order and OffsetFetch never shows an offset a
new coordinator would not load.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import structlog

from coordinator.answers import append_error_answer, partition_errors_body
from coordinator.config import CoordinatorConfig
from coordinator.effects import RequestContext, TimerKey, TimerKind
from coordinator.group import Group
from coordinator.group_state import COMMIT_ANSWER, GroupEvent, GroupState
from coordinator.loader import OffsetsPartition, OffsetsPartitions
from coordinator.membership import Membership
from coordinator.offsets_topic import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    Record,
    group_record,
    offset_record,
)
from coordinator.outbox import Outbox
from protocol.errors import ErrorCode
from protocol.partitions import TopicPartition

log = structlog.get_logger("odradek.coordinator")

_E = ErrorCode
_S = GroupState
_G = GroupEvent


def _requested(body: dict[str, Any]) -> list[tuple[str, list[int]]]:
    """A commit's topics and partitions, in the order it named them."""
    return [(t["name"], [p["partition"] for p in t["partitions"]]) for t in body["topics"]]


def _tombstone(group_id: str, tp: TopicPartition) -> Record:
    return offset_record(OffsetKey(group_id, tp.topic, tp.partition), None)


class GroupOffsets:
    def __init__(
        self,
        config: CoordinatorConfig,
        partitions: OffsetsPartitions,
        outbox: Outbox,
        membership: Membership,
    ) -> None:
        self.config = config
        self._partitions = partitions
        self._out = outbox
        self._membership = membership

    # ============================================================================ OffsetCommit

    def commit(self, body: dict[str, Any], ctx: RequestContext) -> None:
        now = ctx.now_ms
        requested = [
            (TopicPartition(t["name"], p["partition"]), p)
            for t in body["topics"] for p in t["partitions"]
        ]
        code = self._commit_answer(body, now)
        if code is not _E.NONE or not requested:
            self._answer_commit(ctx, body, {}, code)
            return
        group_id = body["group_id"]
        loader = self._partitions.of(group_id)
        errors: dict[TopicPartition, ErrorCode] = {}
        writes: dict[TopicPartition, OffsetValue] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, p in requested:
            metadata = p["metadata"]
            if metadata is not None and len(metadata.encode("utf-8")) > limit:
                errors[tp] = _E.OFFSET_METADATA_TOO_LARGE
            else:
                stamp = p["commit_timestamp"]
                writes[tp] = OffsetValue(p["offset"], metadata, stamp if stamp >= 0 else now)
        if not writes:
            self._answer_commit(ctx, body, errors)
            return
        records = tuple(
            offset_record(OffsetKey(group_id, tp.topic, tp.partition), value)
            for tp, value in writes.items()
        )
        holder = self._membership.hold_session(loader.groups.get(group_id), body["member_id"])

        def written(error: ErrorCode, now_ms: int) -> None:
            if holder is not None:
                self._membership.release_session(*holder, now_ms)
            if error is _E.NONE:
                group = loader.groups.get(group_id)
                if group is None:  # deleted or expired meanwhile: the log has these offsets now
                    group = loader.groups[group_id] = Group(group_id, loader.partition)
                group.offsets.update(writes)
                self._out.counters["offsets.committed"] += len(writes)
            else:
                errors.update(dict.fromkeys(writes, append_error_answer(error)))
            self._answer_commit(ctx, body, errors)

        self._out.append(loader.partition, records, written)

    def _answer_commit(self, ctx: RequestContext, body: dict[str, Any],
                       errors: Mapping[TopicPartition, ErrorCode],
                       default: ErrorCode = _E.NONE) -> None:
        self._out.respond(ctx.token, {"topics": partition_errors_body(
            _requested(body), lambda tp: errors.get(tp, default))})

    def _commit_answer(self, body: dict[str, Any], now_ms: int) -> ErrorCode:
        """Whether this commit may be written, by the group's state and the member's generation."""
        group_id, member_id, generation = body["group_id"], body["member_id"], body["generation_id"]
        loader, code = self._partitions.gate(group_id)
        if code is not _E.NONE:
            return code
        manual = generation < 0 and not member_id
        group = loader.groups.get(group_id)
        if group is None:
            if not manual:
                return _E.UNKNOWN_MEMBER_ID
            loader.groups[group_id] = Group(group_id, loader.partition)
            self._out.counters["group.created"] += 1
            return _E.NONE
        if manual:  # manual assignment: only while the group has no members
            return _E.NONE if group.state is _S.EMPTY else _E.UNKNOWN_MEMBER_ID
        member = group.member_or_slow(member_id)
        if member is None:
            return _E.FENCED_INSTANCE_ID if group.fenced(member_id) else _E.UNKNOWN_MEMBER_ID
        group.confirm(member)
        if generation != group.generation:
            if generation > group.generation:
                # seed: "rejects it if the generation id in the request is higher than the
                # generation id on the co-ordinator. This indicates a bug in the consumer code."
                log.warning("offset_commit_generation_ahead", group=group_id, member=member_id,
                            generation=generation, current=group.generation)
            return _E.ILLEGAL_GENERATION
        answer = COMMIT_ANSWER[group.state]
        if answer is _E.NONE and member.session_deadline_ms is not None:
            self._membership.touch_session(group, member, now_ms)  # a commit keeps it alive too
        return answer

    # ============================================================================ OffsetFetch

    def fetch(self, body: dict[str, Any], ctx: RequestContext) -> None:
        group_id = body["group_id"]
        loader, code = self._partitions.gate(group_id)
        if code is not _E.NONE:
            self._out.respond(ctx.token, {"error_code": int(code), "topics": []})
            return
        group = loader.groups.get(group_id)
        offsets: Mapping[TopicPartition, OffsetValue] = group.offsets if group else {}
        wanted: dict[str, list[int]] = {}
        if body["topics"] is None:
            for tp in sorted(offsets):
                wanted.setdefault(tp.topic, []).append(tp.partition)
        else:
            for t in body["topics"]:
                wanted.setdefault(t["name"], []).extend(t["partitions"])

        def result(topic: str, partition: int) -> dict[str, Any]:
            value = offsets.get(TopicPartition(topic, partition))
            return {
                "partition": partition, "error_code": 0,
                "offset": -1 if value is None else value.offset,
                "metadata": None if value is None else value.metadata,
            }

        self._out.respond(ctx.token, {"error_code": 0, "topics": [
            {"name": topic, "partitions": [result(topic, p) for p in partitions]}
            for topic, partitions in wanted.items()
        ]})

    # ========================================================================== DeleteGroups

    def delete_groups(self, body: dict[str, Any], ctx: RequestContext) -> None:
        rows: list[dict[str, Any]] = []
        tombstones: dict[int, list[tuple[int, list[Record]]]] = {}
        for group_id in body["group_ids"]:
            rows.append({"group_id": group_id, "error_code": 0})
            code, records = self._delete_group(group_id, ctx.now_ms)
            if code is not _E.NONE:
                rows[-1]["error_code"] = int(code)
            else:
                partition = self._partitions.of(group_id).partition
                tombstones.setdefault(partition, []).append((len(rows) - 1, records))
        outstanding = len(tombstones)
        if not outstanding:
            self._out.respond(ctx.token, {"results": rows})
            return

        def written(indexes: list[int], error: ErrorCode, now_ms: int) -> None:
            nonlocal outstanding
            if error is not _E.NONE:
                for i in indexes:
                    rows[i]["error_code"] = int(append_error_answer(error))
            outstanding -= 1
            if outstanding == 0:
                self._out.respond(ctx.token, {"results": rows})

        for partition, entries in sorted(tombstones.items()):
            self._out.append(
                partition, tuple(r for _, records in entries for r in records),
                functools.partial(written, [i for i, _ in entries]),
            )

    def _delete_group(self, group_id: str, now_ms: int) -> tuple[ErrorCode, list[Record]]:
        """Remove an Empty group from the cache; its tombstones are the caller's to write."""
        loader, code = self._partitions.gate(group_id)
        group = loader.groups.get(group_id) if code is _E.NONE else None
        if code is _E.NONE and group is None:
            code = _E.GROUP_ID_NOT_FOUND
        elif group is not None and group.state is not _S.EMPTY:
            code = _E.NON_EMPTY_GROUP
        if code is not _E.NONE or group is None:
            return code, []
        records = [group_record(GroupKey(group_id), None)]
        records += [_tombstone(group_id, tp) for tp in sorted(group.offsets)]
        del loader.groups[group_id]
        self._out.move(group, _G.DELETED, "DeleteGroups", now_ms)
        return _E.NONE, records

    # ========================================================================== OffsetDelete

    def delete(self, body: dict[str, Any], ctx: RequestContext) -> None:
        """Kafka's rules (KIP-496): the group must exist; while it has members, the offsets of
        topics they subscribe to stay (GROUP_SUBSCRIBED_TO_TOPIC) -- the members would resume
        from them, or reset, at their next rebalance. The others' tombstones are answered once
        written, as commits are, and leave the cache only then, so the cache follows the log's
        order."""
        group_id = body["group_id"]
        loader, code = self._partitions.gate(group_id)
        group = loader.groups.get(group_id) if code is _E.NONE else None
        if code is _E.NONE and group is None:
            code = _E.GROUP_ID_NOT_FOUND
        if code is not _E.NONE or group is None:
            self._out.respond(ctx.token, {"error_code": int(code), "topics": []})
            return
        subscribed = set() if group.state is _S.EMPTY else group.subscribed_topics()
        requested = [(t["name"], t["partitions"]) for t in body["topics"]]
        errors = {
            TopicPartition(topic, p): (
                _E.GROUP_SUBSCRIBED_TO_TOPIC if topic in subscribed else _E.NONE)
            for topic, partitions in requested for p in partitions
        }
        deleted = sorted(tp for tp, e in errors.items() if e is _E.NONE and tp in group.offsets)

        def answer() -> None:
            self._out.respond(ctx.token, {
                "error_code": 0, "topics": partition_errors_body(requested, errors.__getitem__),
            })

        if not deleted:
            answer()
            return

        def written(error: ErrorCode, now_ms: int) -> None:
            if error is _E.NONE:
                current = loader.groups.get(group_id)  # None: deleted or expired meanwhile
                if current is not None:
                    for tp in deleted:
                        current.offsets.pop(tp, None)
                self._out.counters["offsets.deleted"] += len(deleted)
                log.info("offsets_deleted", group=group_id, partitions=len(deleted))
            else:
                errors.update(dict.fromkeys(deleted, append_error_answer(error)))
            answer()

        self._out.append(loader.partition,
                         tuple(_tombstone(group_id, tp) for tp in deleted), written)

    # ======================================================================== offsets expiry

    def expire(self, loader: OffsetsPartition, now_ms: int) -> None:
        """Seed 000: the offsets topic is compacted; retention removes what no group needs.
        An Empty group's offsets expire offsets_retention_ms after their commit or after the
        group became Empty, whichever is later; a group with members keeps the offsets of every
        topic it subscribes to, and loses the others' by their commit time."""
        records: list[Record] = []
        for group_id in sorted(loader.groups):
            group = loader.groups[group_id]
            for tp in sorted(self._expired(group, now_ms)):
                del group.offsets[tp]
                records.append(_tombstone(group_id, tp))
            if group.state is _S.EMPTY and not group.offsets:
                records.append(group_record(GroupKey(group_id), None))
                del loader.groups[group_id]
                self._out.move(group, _G.OFFSETS_EXPIRED, "offsets retention", now_ms)
        if records:
            self._out.append(loader.partition, tuple(records),
                             self._out.log_failure("offsets expiry"))
        self.schedule_expiry(loader.partition, now_ms)

    def _expired(self, group: Group, now_ms: int) -> list[TopicPartition]:
        retention = self.config.offsets_retention_ms
        if group.state is _S.EMPTY:
            return [
                tp for tp, v in group.offsets.items()
                if now_ms >= max(v.commit_timestamp_ms, group.state_since_ms) + retention
            ]
        subscribed = group.subscribed_topics()
        return [
            tp for tp, v in group.offsets.items()
            if tp.topic not in subscribed and now_ms >= v.commit_timestamp_ms + retention
        ]

    def schedule_expiry(self, partition: int, now_ms: int) -> None:
        self._out.set_timer(
            TimerKey(TimerKind.OFFSETS_EXPIRY, partition=partition),
            now_ms + self.config.offsets_retention_check_interval_ms,
        )
