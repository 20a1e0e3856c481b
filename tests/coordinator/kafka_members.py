"""A test's stand-in for a member speaking Kafka's classic group protocol (JoinGroup v1 with a
protocol type, then SyncGroup), over the coordinator harness's fake driver."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from tests.coordinator.harness import REBALANCE_MS, SESSION_MS, FakeDriver, make_config

#: the initial delay of these tests' first rounds, so members joining together share one
DELAY = 100


def kafka_driver(topics: dict[str, int] | None = None, **kw: Any) -> FakeDriver:
    return FakeDriver(make_config(group_initial_rebalance_delay_ms=DELAY), topics, **kw)


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


def assignment(**partitions: list[int]) -> bytes:
    return encode_assignment(Assignment(tuple((t, tuple(ps)) for t, ps in partitions.items())))


@dataclass
class KafkaMember:
    """Remembers its id, generation and leadership from its JoinGroup answers, as Kafka's
    consumers do; ``protocols`` are (name, metadata) in its order of preference."""

    driver: FakeDriver
    group_id: str
    protocols: list[tuple[str, bytes]]
    protocol_type: str = "consumer"
    session_timeout_ms: int = SESSION_MS
    connection: Hashable | None = None
    member_id: str = ""
    generation: int = -1
    leader_id: str = ""
    protocol: str = ""
    members: dict[str, bytes] = field(default_factory=dict)
    pending: int | None = None
    sync_token: int | None = None

    def join(self) -> int:
        body = {
            "group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": REBALANCE_MS, "topics": [], "member_id": self.member_id,
            "assignment_strategy": "", "protocol_type": self.protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in self.protocols],
        }
        self.pending = self.driver.send(ApiKey.JOIN_GROUP, body, connection=self.connection,
                                        version=1)
        return self.pending

    def joined(self) -> dict[str, Any] | None:
        assert self.pending is not None, "no join pending"
        answer = self.driver.answer(self.pending)
        if answer is not None:
            self.pending = None
            if answer["error_code"] == 0:
                self.member_id = answer["member_id"]
                self.generation = answer["generation_id"]
                self.leader_id = answer["leader_id"]
                self.protocol = answer["protocol_name"]
                self.members = {m["member_id"]: m["metadata"] for m in answer["members"]}
        return answer

    def join_now(self) -> dict[str, Any]:
        self.join()
        answer = self.joined()
        assert answer is not None, "the join was held"
        return answer

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id

    def sync(self, assignments: dict[str, bytes] | None = None,
             generation: int | None = None) -> int:
        self.sync_token = self.driver.send(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "member_id": self.member_id,
            "generation_id": self.generation if generation is None else generation,
            "assignments": [{"member_id": m, "assignment": a}
                            for m, a in (assignments or {}).items()],
        })
        return self.sync_token

    def synced(self) -> dict[str, Any] | None:
        assert self.sync_token is not None, "no sync sent"
        return self.driver.answer(self.sync_token)

    def heartbeat(self) -> ErrorCode:
        body = self.driver.call(ApiKey.HEARTBEAT, {
            "group_id": self.group_id, "member_id": self.member_id,
            "generation_id": self.generation,
        })
        return ErrorCode(body["error_code"])

    def leave(self) -> ErrorCode:
        body = self.driver.call(ApiKey.LEAVE_GROUP,
                                {"group_id": self.group_id, "member_id": self.member_id})
        return ErrorCode(body["error_code"])


def consumers(driver: FakeDriver, count: int, *topics: str, group: str = "g",
              protocol: str = "range") -> list[KafkaMember]:
    return [KafkaMember(driver, group, [(protocol, subscription(*topics))]) for _ in range(count)]


def join_all(members: list[KafkaMember]) -> None:
    """Every member joins (those with ids rejoin); every answer must have come."""
    for m in members:
        m.join()
    driver = members[0].driver
    if any(m.pending is not None and driver.answer(m.pending) is None for m in members):
        driver.advance(DELAY)  # a first round: its initial delay
    for m in members:
        answer = m.joined()
        assert answer is not None and answer["error_code"] == 0, answer


def leader_of(members: list[KafkaMember]) -> KafkaMember:
    (leader,) = [m for m in members if m.is_leader]
    return leader
