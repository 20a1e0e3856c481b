"""KIP-345's static membership in the coordinator (sans-IO): a member with a group_instance_id
that restarts within its session takes its place back with no rebalance; its old id is fenced;
its own LeaveGroup keeps it; an admin removes it at once; a coordinator failover keeps the
instance ids."""

from __future__ import annotations

from typing import Any

from coordinator import GroupState
from coordinator.offsets_topic import decode_group_value
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.harness import SESSION_MS, Consumer, FakeDriver, form_group

E = ErrorCode
JOIN_V2 = 2


class Static(Consumer):
    """A member that sends JoinGroup v2 and LeaveGroup v1 with its instance id."""

    instance_id: str | None = None

    def join(self, **overrides: Any) -> int:
        body = {
            "group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "topics": list(self.topics),
            "member_id": self.member_id, "assignment_strategy": self.strategy,
            "protocol_type": "", "protocols": [], "group_instance_id": self.instance_id,
        }
        body.update(overrides)
        self.pending = self.driver.send(ApiKey.JOIN_GROUP, body, client_id=self.client_id,
                                        connection=self.connection, version=JOIN_V2)
        return self.pending

    def leave(self) -> ErrorCode:
        body = self.driver.call(ApiKey.LEAVE_GROUP, {
            "group_id": self.group_id, "member_id": self.member_id,
            "group_instance_id": self.instance_id}, version=1)
        return ErrorCode(body["error_code"])


def static(driver: FakeDriver, instance: str | None, connection: str) -> Static:
    member = Static(driver, "g", ["t"], connection=connection)
    member.instance_id = instance
    return member


def group_of_three(driver: FakeDriver) -> list[Static]:
    return form_group([static(driver, "a", "ca"), static(driver, "b", "cb"),
                       static(driver, None, "cdyn")])


def restarted(old: Static, connection: str) -> Static:
    """The same instance in a new process: no member id yet."""
    return static(old.driver, old.instance_id, connection)


def test_a_restart_takes_the_place_back_without_a_rebalance() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, b, dynamic = group_of_three(driver)
    generation, owned = a.generation, a.partitions
    again = restarted(a, "ca2")
    answer = again.join_now()
    assert answer["error_code"] == 0
    assert answer["generation_id"] == generation  # nobody else rebalances
    assert again.partitions == owned and again.member_id != a.member_id
    assert driver.group("g").state is GroupState.STEADY
    assert b.heartbeat() is E.NONE and dynamic.heartbeat() is E.NONE
    # the old process, if it still runs, is fenced: never two owners of a's partitions
    assert a.heartbeat() is E.FENCED_INSTANCE_ID
    assert a.commit({("t", 0): 5}) == {("t", 0): E.FENCED_INSTANCE_ID}
    assert E(a.join_now()["error_code"]) is E.FENCED_INSTANCE_ID
    assert again.heartbeat() is E.NONE


def test_the_group_record_names_the_new_member_and_every_instance() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, b, dynamic = group_of_three(driver)
    again = restarted(a, "ca2")
    again.join_now()
    partition = driver.partition_of("g")
    value = decode_group_value(driver.log[partition][-1][1])
    members = {m.member_id: m.instance_id for m in value.members}
    assert members == {again.member_id: "a", b.member_id: "b", dynamic.member_id: None}
    assert value.generation == again.generation


def test_a_restart_whose_subscription_changed_rebalances() -> None:
    driver = FakeDriver(topics={"t": 6, "u": 2})
    a, b, _dynamic = group_of_three(driver)
    again = restarted(a, "ca2")
    again.topics = ["t", "u"]
    again.join()
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert b.heartbeat() is E.REBALANCE_IN_PROGRESS


def test_a_static_members_own_leave_keeps_it_until_its_session_ends() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, b, dynamic = group_of_three(driver)
    assert a.leave() is E.NONE
    group = driver.group("g")
    assert group.state is GroupState.STEADY and len(group.members) == 3
    driver.advance(SESSION_MS // 2)
    assert b.heartbeat() is E.NONE and dynamic.heartbeat() is E.NONE
    again = restarted(a, "ca2")
    assert again.join_now()["generation_id"] == a.generation  # back in time: no rebalance
    # one that does not come back: its session timeout starts the rebalance
    assert b.leave() is E.NONE
    for _ in range(4):
        driver.advance(SESSION_MS // 3)
        if driver.group("g").state is not GroupState.STEADY:
            break
        assert again.heartbeat() is E.NONE and dynamic.heartbeat() is E.NONE
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert b.member_id not in driver.group("g").members


def test_an_admin_removes_a_static_member_at_once() -> None:
    driver = FakeDriver(topics={"t": 6})
    _a, b, _dynamic = group_of_three(driver)
    answer = driver.call(ApiKey.LEAVE_GROUP, {"group_id": "g", "member_id": "",
                                              "group_instance_id": "b"}, version=1)
    assert answer["error_code"] == 0
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert b.member_id not in driver.group("g").members
    missing = driver.call(ApiKey.LEAVE_GROUP, {"group_id": "g", "member_id": "",
                                               "group_instance_id": "nobody"}, version=1)
    assert E(missing["error_code"]) is E.UNKNOWN_MEMBER_ID


def test_describe_shows_instance_ids() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, b, dynamic = group_of_three(driver)
    described = driver.describe("g")
    assert {m["member_id"]: m["group_instance_id"] for m in described["members"]} == {
        a.member_id: "a", b.member_id: "b", dynamic.member_id: None}


def test_a_coordinator_failover_keeps_the_instances() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, _b, _dynamic = group_of_three(driver)
    generation = a.generation
    driver.reload(driver.partition_of("g"))
    assert {m.instance_id for m in driver.group("g").members.values()} == {"a", "b", None}
    again = restarted(a, "ca2")
    answer = again.join_now()
    assert answer["error_code"] == 0 and answer["generation_id"] == generation
    assert again.partitions == a.partitions


def test_an_empty_instance_id_is_refused() -> None:
    driver = FakeDriver(topics={"t": 6})
    member = static(driver, "", "c")
    assert E(member.join_now()["error_code"]) is E.INVALID_REQUEST


def test_a_restart_during_a_join_phase_rejoins_in_its_place() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, b, dynamic = group_of_three(driver)
    newcomer = static(driver, None, "cnew")
    newcomer.join()  # starts a round: PrepareRebalance
    again = restarted(a, "ca2")
    again.join()
    for member in (b, dynamic):
        member.join()
    answers = [m.joined() for m in (again, b, dynamic, newcomer)]
    assert all(x is not None and x["error_code"] == 0 for x in answers)
    assert len(driver.group("g").members) == 4
    assert a.heartbeat() is E.FENCED_INSTANCE_ID


def test_a_failover_after_a_restart_knows_the_new_member_id() -> None:
    """The restart's group record names the new id: a coordinator that loads it after the
    restart takes the new member's heartbeats, and the old id is no member."""
    driver = FakeDriver(topics={"t": 6})
    a, _b, _dynamic = group_of_three(driver)
    again = restarted(a, "ca2")
    again.join_now()
    driver.reload(driver.partition_of("g"))
    assert again.heartbeat() is E.NONE
    assert again.commit({("t", 0): 3}) == {("t", 0): E.NONE}
    assert a.heartbeat() is E.UNKNOWN_MEMBER_ID
