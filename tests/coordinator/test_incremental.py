"""Incremental rounds in the coordinator (sans-IO): members that keep fetching while they rejoin
report what they hold, and the coordinator revokes before it assigns -- a partition another
member still holds is withheld until that member has rejoined without it."""

from __future__ import annotations

from coordinator import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver, form_group

E = ErrorCode


def incremental(driver: FakeDriver, n: int, *, eager: int = 0) -> list[Consumer]:
    """``n`` incremental members (and ``eager`` eager ones) of sticky group g on topic t."""
    members = [Consumer(driver, "g", ["t"], strategy="sticky", connection=f"c{i}",
                        incremental=i >= eager) for i in range(n + eager)]
    return form_group(members)


def owners(members: list[Consumer]) -> dict[tuple[str, int], list[str]]:
    held: dict[tuple[str, int], list[str]] = {}
    for m in members:
        for tp in m.partitions:
            held.setdefault(tp, []).append(m.member_id)
    return held


def rejoin_all(members: list[Consumer]) -> None:
    for m in members:
        if m.pending is None:
            if not m.incremental:
                m.partitions = set()  # an eager consumer revokes everything first
            m.join()
    for m in members:
        assert m.joined() is not None


def test_a_new_member_gets_partitions_only_once_their_owners_let_go() -> None:
    driver = FakeDriver(topics={"t": 6})
    old = incremental(driver, 2)
    before = {m.member_id: set(m.partitions) for m in old}
    newcomer = Consumer(driver, "g", ["t"], strategy="sticky", connection="new",
                        incremental=True)
    newcomer.join()
    assert all(m.heartbeat() is E.REBALANCE_IN_PROGRESS for m in old)
    rejoin_all(old)  # they rejoin still holding (and fetching) their partitions
    assert newcomer.joined() is not None
    group = driver.group("g")
    # generation written, but what the newcomer is meant to own is still held: nobody gets
    # it yet, and the next round has started at once
    assert group.state is GroupState.PREPARE_REBALANCE
    assert newcomer.partitions == set()
    assert all(len(o) == 1 for o in owners([*old, newcomer]).values())
    kept = {m.member_id: before[m.member_id] & m.partitions for m in old}
    assert sum(map(len, kept.values())) == 4  # two move, four stay put throughout
    # the members that lost one revoke it (commit, stop) and rejoin without it
    rejoin_all([*old, newcomer])
    assert group.state is GroupState.STEADY
    assert len(newcomer.partitions) == 2
    held = owners([*old, newcomer])
    assert sorted(held) == [("t", p) for p in range(6)]
    assert all(len(o) == 1 for o in held.values())
    for m in old:
        assert kept[m.member_id] <= m.partitions  # the unmoved ones never left their owner


def test_a_member_that_leaves_frees_its_partitions_in_one_round() -> None:
    driver = FakeDriver(topics={"t": 6})
    a, b, c = incremental(driver, 3)
    generation = a.generation
    assert c.leave() is E.NONE
    rejoin_all([a, b])
    group = driver.group("g")
    assert group.state is GroupState.STEADY and a.generation == generation + 1
    assert len(a.partitions) == len(b.partitions) == 3


def test_a_member_still_holding_a_revoked_partition_keeps_it_withheld() -> None:
    """A member whose answer was lost rejoins still holding what it had: its partitions stay
    out of the new owner's hands, however many rounds pass."""
    driver = FakeDriver(topics={"t": 4})
    a, b = incremental(driver, 2)
    stuck = set(a.partitions)
    newcomer = Consumer(driver, "g", ["t"], strategy="sticky", connection="n",
                        incremental=True)
    newcomer.join()
    rejoin_all([a, b])
    assert newcomer.joined() is not None
    for _ in range(3):
        a.partitions = set(stuck)  # its answers never reached it
        rejoin_all([a, b, newcomer])
        assert not newcomer.partitions & stuck
        assert all(len(o) == 1 for o in owners([a, b, newcomer]).values())


def test_eager_and_incremental_members_in_one_group() -> None:
    """An eager member lets go of everything before it rejoins, so only the incremental
    members' holdings are withheld."""
    driver = FakeDriver(topics={"t": 6})
    members = incremental(driver, 2, eager=1)
    eager = members[0]
    assert not eager.incremental
    newcomer = Consumer(driver, "g", ["t"], strategy="sticky", connection="n",
                        incremental=True)
    newcomer.join()
    rejoin_all(members)
    assert newcomer.joined() is not None
    assert eager.generation == newcomer.generation
    while driver.group("g").state is not GroupState.STEADY:
        rejoin_all([*members, newcomer])
    assert driver.group("g").state is GroupState.STEADY
    held = owners([*members, newcomer])
    assert sorted(held) == [("t", p) for p in range(6)]
    assert all(len(o) == 1 for o in held.values())


def test_a_failover_while_partitions_are_withheld_starts_the_next_round() -> None:
    driver = FakeDriver(topics={"t": 6})
    old = incremental(driver, 2)
    newcomer = Consumer(driver, "g", ["t"], strategy="sticky", connection="n",
                        incremental=True)
    newcomer.join()
    rejoin_all(old)
    newcomer.joined()
    driver.reload(driver.partition_of("g"))
    group = driver.group("g")
    assert group.state is GroupState.PREPARE_REBALANCE  # the record leaves two unowned
    rejoin_all([*old, newcomer])
    assert driver.group("g").state is GroupState.STEADY
    held = owners([*old, newcomer])
    assert sorted(held) == [("t", p) for p in range(6)]
    assert all(len(o) == 1 for o in held.values())


def test_a_revoking_member_may_commit_what_it_lost_before_it_rejoins() -> None:
    driver = FakeDriver(topics={"t": 4})
    members = incremental(driver, 2)
    before = {m.member_id: set(m.partitions) for m in members}
    newcomer = Consumer(driver, "g", ["t"], strategy="sticky", connection="n",
                        incremental=True)
    newcomer.join()
    rejoin_all(members)
    losers = [m for m in members if before[m.member_id] - m.partitions]
    assert losers
    for m in losers:
        lost = sorted(before[m.member_id] - m.partitions)
        assert m.commit(dict.fromkeys(lost, 42)) == dict.fromkeys(lost, E.NONE)


def test_an_unknown_rebalance_protocol_is_refused() -> None:
    driver = FakeDriver(topics={"t": 2})
    member = Consumer(driver, "g", ["t"], incremental=True)
    answer = member.join_now(rebalance_protocol="lazy")
    assert E(answer["error_code"]) is E.INVALID_REQUEST
    assert "lazy" in answer["error_message"]
