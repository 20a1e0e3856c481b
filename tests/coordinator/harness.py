"""A fake driver for the coordinator: a fake clock, an in-memory ``__consumer_offsets`` log and
timer table, and every request and response checked against the API registry's schemas."""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coordinator import (
    AppendRecords,
    CancelTimer,
    CoordinatorConfig,
    Effect,
    GroupCoordinator,
    GroupState,
    RequestContext,
    Respond,
    SetTimer,
    TimerKey,
)
from coordinator.answers import assignment_body
from coordinator.group import Group
from coordinator.offsets_topic import OffsetKey, Record, decode_group_value, decode_key
from protocol.apis import REGISTRY, ApiKey
from protocol.errors import ErrorCode
from protocol.schema import validate

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def counting_uuids() -> Any:
    """Member ids that sort in the order they were given out."""
    counter = itertools.count(1)
    return lambda: str(uuid.UUID(int=next(counter)))


def make_config(**overrides: Any) -> CoordinatorConfig:
    settings: dict[str, Any] = {"group_initial_rebalance_delay_ms": 0}
    settings.update(overrides)
    return CoordinatorConfig(**settings)


class FakeDriver:
    """Carries out the coordinator's effects the way the broker will, but synchronously.

    With ``auto_ack`` each append is written to ``log`` and acknowledged right after the effects
    of the call that issued it; otherwise it waits in ``in_flight`` for ``ack()``, which writes
    it unless told it failed. ``advance(ms)`` moves the clock, firing due timers in deadline
    order.
    """

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        topics: dict[str, int] | None = None,
        *,
        auto_ack: bool = True,
        lead: Iterable[int] | None = None,
        new_uuid: Any = None,
    ) -> None:
        self.config = config or make_config()
        self.topics: dict[str, int] = dict(topics or {})
        self.now = 1_000_000
        self.coordinator = GroupCoordinator(
            self.config, self.topics.get, new_uuid=new_uuid or counting_uuids()
        )
        self.log: dict[int, list[Record]] = defaultdict(list)
        self.timers: dict[TimerKey, int] = {}
        self.answers: dict[Hashable, dict[str, Any]] = {}
        self.apis: dict[Hashable, ApiKey] = {}
        self.in_flight: list[AppendRecords] = []
        self.auto_ack = auto_ack
        self._tokens = itertools.count(1)
        partitions = range(self.config.offsets_topic_partitions) if lead is None else lead
        for p in partitions:
            self.apply(self.coordinator.become_leader(p, [], self.now))

    # ------------------------------------------------------------------------------ effects

    def apply(self, effects: list[Effect]) -> None:
        appended: list[AppendRecords] = []
        for effect in effects:
            if isinstance(effect, Respond):
                assert effect.token not in self.answers, f"token {effect.token} answered twice"
                api = REGISTRY[self.apis[effect.token]]
                # the coordinator answers in the newest version; the broker trims for older
                validate(api.name, "response", api.max_version, api.response, effect.body)
                self.answers[effect.token] = effect.body
            elif isinstance(effect, AppendRecords):
                appended.append(effect)
            elif isinstance(effect, SetTimer):
                self.timers[effect.key] = effect.deadline_ms
            elif isinstance(effect, CancelTimer):
                self.timers.pop(effect.key, None)
            else:  # pragma: no cover - a new effect type the harness does not know
                raise AssertionError(f"unknown effect {effect!r}")
        self.in_flight.extend(appended)
        if self.auto_ack:
            self.ack()

    def ack(self, error: ErrorCode = ErrorCode.NONE, count: int | None = None) -> None:
        """Acknowledge the oldest ``count`` appends in flight (all by default)."""
        while self.in_flight and (count is None or count > 0):
            self.finish(self.in_flight[0], error)
            if count is not None:
                count -= 1

    def finish(self, append: AppendRecords, error: ErrorCode = ErrorCode.NONE) -> None:
        """Complete one append in flight: written to the log unless ``error``."""
        self.in_flight.remove(append)
        if error is ErrorCode.NONE:
            self.log[append.partition].extend(append.records)
        self.apply(self.coordinator.on_append_done(append.append_id, error, self.now))

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = [(deadline, str(key), key) for key, deadline in self.timers.items()
                   if deadline <= target]
            if not due:
                break
            deadline, _, key = min(due)
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.apply(self.coordinator.on_timer(key, self.now))
        self.now = target

    # ----------------------------------------------------------------------------- requests

    def send(
        self,
        api_key: ApiKey,
        body: dict[str, Any],
        *,
        client_id: str = "client",
        client_host: str = "/127.0.0.1",
        connection: Hashable | None = None,
        version: int = 0,
    ) -> int:
        api = REGISTRY[api_key]
        validate(api.name, "request", version, api.request, body)
        token = next(self._tokens)
        self.apis[token] = api_key
        ctx = RequestContext(token, self.now, client_id, client_host, connection)
        self.apply(self.coordinator.handle(api_key, body, ctx))
        return token

    def call(self, api_key: ApiKey, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """Send and return the answer, which must come at once."""
        token = self.send(api_key, body, **kw)
        assert token in self.answers, f"{api_key.name} was not answered at once"
        return self.answers[token]

    def answer(self, token: int) -> dict[str, Any] | None:
        return self.answers.get(token)

    def heartbeat(self, group_id: str, member_id: str, generation: int) -> ErrorCode:
        """A Heartbeat the way the broker's idle lane answers it: no token, no Respond."""
        code, effects = self.coordinator.heartbeat(group_id, member_id, generation, self.now)
        assert not any(isinstance(effect, Respond) for effect in effects), effects
        self.apply(effects)
        return code

    # ---------------------------------------------------------------------------- shortcuts

    def group(self, group_id: str) -> Group:
        group = self.coordinator.group(group_id)
        assert group is not None, f"group {group_id} is not loaded"
        return group

    def describe(self, group_id: str) -> dict[str, Any]:
        body = self.call(ApiKey.DESCRIBE_GROUPS, {"group_ids": [group_id]})
        return body["groups"][0]  # type: ignore[no-any-return]

    def list_groups(self) -> dict[str, str]:
        body = self.call(ApiKey.LIST_GROUPS, {})
        return {g["group_id"]: g["state"] for g in body["groups"]}

    def partition_of(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def reload(self, partition: int, *, in_flight_written: bool = False) -> None:
        """Resign the partition and load it again from the log, as a new coordinator would.
        Appends still in flight are lost, or with ``in_flight_written`` reach the log although
        the coordinator never hears so."""
        if in_flight_written:
            for append in self.in_flight:
                if append.partition == partition:
                    self.log[partition].extend(append.records)
        self.in_flight = [a for a in self.in_flight if a.partition != partition]
        self.apply(self.coordinator.resign(partition, self.now))
        self.apply(self.coordinator.become_leader(partition, list(self.log[partition]), self.now))

    def commit(
        self, group_id: str, generation: int, member_id: str,
        offsets: dict[tuple[str, int], int], metadata: str | None = None, **kw: Any,
    ) -> int:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append({
                "partition": partition, "offset": offset, "metadata": metadata,
                "commit_timestamp": -1,
            })
        return self.send(ApiKey.OFFSET_COMMIT, {
            "group_id": group_id, "generation_id": generation, "member_id": member_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }, **kw)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        body = self.call(ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": topics})
        assert body["error_code"] == 0, body
        return {
            (t["name"], p["partition"]): (p["offset"], p["metadata"])
            for t in body["topics"] for p in t["partitions"]
        }


def committed_errors(body: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["name"], p["partition"]): p["error_code"]
        for t in body["topics"] for p in t["partitions"]
    }


def answered_write(append: AppendRecords) -> bool:
    """Whether a client waits for this append's answer: an offset commit, or the record of a
    new generation (a group record with members)."""
    key, value = append.records[0]
    if value is None:
        return False
    if isinstance(decode_key(key), OffsetKey):
        return True
    return bool(decode_group_value(value).members)


def owned(body_assignment: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(a["topic"], p) for a in body_assignment for p in a["partitions"]}


@dataclass
class Consumer:
    """A test's stand-in for one group member: it remembers its id, generation and partitions
    from the answers it gets, as the real consumer will."""

    driver: FakeDriver
    group_id: str
    topics: list[str]
    strategy: str = "range"
    session_timeout_ms: int = SESSION_MS
    rebalance_timeout_ms: int = REBALANCE_MS
    client_id: str = "client"
    connection: Hashable | None = None
    member_id: str = ""
    generation: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    pending: int | None = None
    #: JoinGroup v3's incremental protocol: it rejoins holding ``partitions``, which the
    #: answer may shrink (revoked) or grow (assigned)
    incremental: bool = False

    def join(self, **overrides: Any) -> int:
        body = {
            "group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "topics": list(self.topics),
            "member_id": self.member_id, "assignment_strategy": self.strategy,
        }
        version = 0
        if self.incremental:
            body.update({
                "protocol_type": "", "protocols": [], "group_instance_id": None,
                "rebalance_protocol": "incremental",
                "owned_partitions": assignment_body(self.partitions),
            })
            version = 3
        body.update(overrides)
        self.pending = self.driver.send(
            ApiKey.JOIN_GROUP, body, client_id=self.client_id, connection=self.connection,
            version=version,
        )
        return self.pending

    def joined(self) -> dict[str, Any] | None:
        """The answer to the pending join, if it came; on success adopt what it says."""
        assert self.pending is not None, "no join pending"
        answer = self.driver.answer(self.pending)
        if answer is not None:
            self.pending = None
            if answer["error_code"] == 0:
                self.member_id = answer["member_id"]
                self.generation = answer["generation_id"]
                self.partitions = owned(answer["partitions_to_own"])
        return answer

    def join_now(self, **overrides: Any) -> dict[str, Any]:
        self.join(**overrides)
        answer = self.joined()
        assert answer is not None, "the join was held"
        return answer

    def heartbeat(self, generation: int | None = None) -> ErrorCode:
        """The broker's own path (``GroupCoordinator.heartbeat``); the Kafka members of
        kafka_members.py send theirs through ``handle``, as the Kafka listener does."""
        return self.driver.heartbeat(self.group_id, self.member_id,
                                     self.generation if generation is None else generation)

    def leave(self) -> ErrorCode:
        body = self.driver.call(ApiKey.LEAVE_GROUP,
                                {"group_id": self.group_id, "member_id": self.member_id})
        return ErrorCode(body["error_code"])

    def commit(
        self, offsets: dict[tuple[str, int], int], generation: int | None = None, **kw: Any
    ) -> dict[tuple[str, int], int]:
        token = self.driver.commit(
            self.group_id, self.generation if generation is None else generation,
            self.member_id, offsets, **kw,
        )
        answer = self.driver.answer(token)
        assert answer is not None, "the commit was not answered"
        return committed_errors(answer)


def form_group(consumers: list[Consumer]) -> list[Consumer]:
    """The consumers join one after another, each join a round of its own, so generation ends
    at ``len(consumers)`` with every one a member (incremental members: more, as each round
    that withholds partitions is followed by another)."""
    consumers[0].join_now()
    driver = consumers[0].driver
    for i in range(1, len(consumers)):
        consumers[i].join()
        for c in consumers[:i]:
            c.join()
        while True:
            for c in consumers[: i + 1]:
                answer = c.joined()
                assert answer is not None and answer["error_code"] == 0
            if driver.group(consumers[0].group_id).state is not GroupState.PREPARE_REBALANCE:
                break
            for c in consumers[: i + 1]:
                c.join()
    assert driver.group(consumers[0].group_id).state is GroupState.STEADY
    return consumers


def steady_group(driver: FakeDriver, count: int, topics: list[str], group: str = "g",
                 **kw: Any) -> list[Consumer]:
    """``count`` members of ``group`` formed by ``form_group``."""
    return form_group([Consumer(driver, group, topics, **kw) for _ in range(count)])
