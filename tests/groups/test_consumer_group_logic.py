"""The group consumer's reactions to each coordinator answer, against a scripted coordinator
(tests/groups/fake_coordinator.py): what it sends next, its state, its listener, its records."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator

import pytest

from client import (
    CommitFailedError,
    ConfigError,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    ConsumerState,
    IllegalStateError,
    Producer,
    SubscriptionNotValidError,
    TopicPartition,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, InconsistentGroupProtocolError
from tests.client.fake_broker import SILENT, always
from tests.groups.fake_coordinator import FakeCoordinatorBroker, answer_code

T0 = TopicPartition("t", 0)
GROUP_SETTINGS = {
    "session_timeout_ms": 600,
    "heartbeat_interval_ms": 100,
    "retry_backoff_ms": 20,
    "fetch_max_wait_ms": 50,
    "auto_offset_reset": "earliest",
    "rebalance_protocol": "eager",  # the seed's rebalance; incremental has tests of its own
}


@pytest.fixture
def fake() -> Iterator[FakeCoordinatorBroker]:
    broker = FakeCoordinatorBroker({"t": 1, "u": 2})
    try:
        yield broker
    finally:
        broker.close()


def produce(fake: FakeCoordinatorBroker, count: int, start: int = 0) -> None:
    with Producer(fake.bootstrap, linger_ms=0) as producer:
        for i in range(start, start + count):
            producer.send("t", str(i).encode(), partition=0)
        producer.flush()


def group_consumer(fake: FakeCoordinatorBroker, **settings: object) -> Consumer:
    return Consumer(fake.bootstrap, group_id="g", **{**GROUP_SETTINGS, **settings})  # type: ignore[arg-type]


def poll_until(
    consumer: Consumer, done: Callable[[list[ConsumerRecord]], bool], timeout: float = 10.0
) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while not done(records):
        assert time.monotonic() < deadline, f"not done in {timeout} s; state {consumer.state}"
        records += consumer.poll(timeout_ms=50)
    return records


def poll_until_state(consumer: Consumer, state: ConsumerState, timeout: float = 10.0) -> None:
    poll_until(consumer, lambda _: consumer.state is state, timeout)


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.calls.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.calls.append(("assigned", assigned))


# ------------------------------------------------------------------------------ joining


def test_joins_then_reads_from_the_committed_offset_and_heartbeats(fake) -> None:
    produce(fake, 10)
    fake.committed[("t", 0)] = 4
    listener = Recorder()
    with group_consumer(fake) as consumer:
        assert consumer.state is ConsumerState.DOWN
        consumer.subscribe(["t"], listener=listener)
        records = poll_until(consumer, lambda rs: len(rs) >= 6)
        assert [r.offset for r in records] == list(range(4, 10))
        assert consumer.state is ConsumerState.PART_OF_GROUP
        assert consumer.assignment() == {T0}
        assert listener.calls == [("assigned", [T0])]
        assert consumer.generation == 1 and consumer.member_id == fake.member_id
        poll_until(consumer, lambda _: len(fake.group_requests(ApiKey.HEARTBEAT)) >= 3)
    heartbeat = fake.group_requests(ApiKey.HEARTBEAT)[0]
    assert heartbeat == {"group_id": "g", "generation_id": 1, "member_id": fake.left[0]}
    [join] = fake.group_requests(ApiKey.JOIN_GROUP)
    assert join["member_id"] == "" and join["topics"] == ["t"]
    assert join["session_timeout_ms"] == 600 and join["assignment_strategy"] == "range"


def test_a_partition_without_a_commit_starts_per_auto_offset_reset(fake) -> None:
    produce(fake, 5)
    with group_consumer(fake, auto_offset_reset="latest") as consumer:
        consumer.subscribe("t")
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        assert consumer.position(T0) == 5


def test_a_rejected_join_is_raised_from_poll(fake) -> None:
    fake.faults.append(answer_code(ApiKey.JOIN_GROUP, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"])
        with pytest.raises(InconsistentGroupProtocolError):
            poll_until(consumer, lambda _: False)
        assert consumer.state is ConsumerState.DOWN
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)  # the next poll tries again


def test_load_in_progress_backs_off_and_joins(fake) -> None:
    for _ in range(2):
        fake.faults.append(answer_code(ApiKey.JOIN_GROUP, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"])
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
    assert len(fake.group_requests(ApiKey.JOIN_GROUP)) == 3


def test_poll_returns_at_its_timeout_while_the_join_is_held(fake) -> None:
    """The held JoinGroup is given up only after the request timeout, a minute here; each
    poll(200 ms) returns long before that, with the join still outstanding."""
    fake.faults.append(always(ApiKey.JOIN_GROUP, lambda request: SILENT))
    with group_consumer(fake, request_timeout_ms=60_000) as consumer:
        consumer.subscribe(["t"])
        for _ in range(3):
            started = time.monotonic()
            assert consumer.poll(timeout_ms=200) == []
            # a deadline against waiting for the join (60 s), not a measure of poll's slack
            assert time.monotonic() - started < 15
            assert len(fake.group_requests(ApiKey.JOIN_GROUP)) == 1
        assert consumer.state is ConsumerState.DISCOVER_COORDINATOR
    assert len(fake.group_requests(ApiKey.JOIN_GROUP)) == 1  # one held join, not a retry per poll


# ---------------------------------------------------------------------------- rebalances


def test_rebalance_in_progress_commits_revokes_rejoins_and_assigns(fake) -> None:
    produce(fake, 10)
    listener = Recorder()
    with group_consumer(fake, auto_commit_interval_ms=60_000) as consumer:
        consumer.subscribe(["t"], listener=listener)
        poll_until(consumer, lambda rs: len(rs) >= 10)
        member = consumer.member_id
        fake.faults.append(answer_code(ApiKey.HEARTBEAT, ErrorCode.REBALANCE_IN_PROGRESS))
        poll_until(consumer, lambda _: len(listener.calls) == 3)
        assert consumer.state is ConsumerState.PART_OF_GROUP and consumer.generation == 2
        assert consumer.member_id == member
        assert consumer.position(T0) == 10  # from the offset committed before rejoining
    assert listener.calls[:3] == [("assigned", [T0]), ("revoked", [T0]), ("assigned", [T0])]
    kinds = [ApiKey(r.header.api_key) for r in fake.requests
             if r.header.api_key in (ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP)]
    assert kinds[:3] == [ApiKey.JOIN_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP]
    first_commit = fake.group_requests(ApiKey.OFFSET_COMMIT)[0]
    assert first_commit["generation_id"] == 1 and first_commit["member_id"] == member
    assert fake.group_requests(ApiKey.JOIN_GROUP)[1]["member_id"] == member  # resent


def test_unknown_member_joins_again_as_a_new_member_without_committing(fake) -> None:
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"])
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        old = consumer.member_id
        fake.member_id = "someone-else"  # the coordinator forgot this member
        poll_until(consumer, lambda _: consumer.generation == 2)
        assert consumer.member_id not in ("", old)
    joins = fake.group_requests(ApiKey.JOIN_GROUP)
    assert [j["member_id"] for j in joins[:2]] == ["", ""]
    assert not any(c["member_id"] == old for c in fake.group_requests(ApiKey.OFFSET_COMMIT))


def test_a_changed_subscription_rejoins(fake) -> None:
    listener = Recorder()
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"], listener=listener)
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        consumer.subscribe(["t", "u"], listener=listener)
        poll_until(consumer, lambda _: consumer.assignment() == {
            T0, TopicPartition("u", 0), TopicPartition("u", 1)})
    assert fake.group_requests(ApiKey.JOIN_GROUP)[1]["topics"] == ["t", "u"]
    assert [c for c, _ in listener.calls] == ["assigned", "revoked", "assigned", "revoked"]


# ------------------------------------------------------------------ incremental rebalancing

U0, U1 = TopicPartition("u", 0), TopicPartition("u", 1)


def incremental_consumer(fake: FakeCoordinatorBroker, **settings: object) -> Consumer:
    return group_consumer(fake, rebalance_protocol="incremental", **settings)


def test_an_incremental_member_rejoins_still_fetching_and_naming_what_it_owns(fake) -> None:
    produce(fake, 5)
    listener = Recorder()
    with incremental_consumer(fake, auto_commit_interval_ms=60_000) as consumer:
        consumer.subscribe(["t", "u"], listener=listener)
        poll_until(consumer, lambda rs: len(rs) >= 5)
        fake.faults.append(answer_code(ApiKey.HEARTBEAT, ErrorCode.REBALANCE_IN_PROGRESS))
        poll_until(consumer, lambda _: consumer.generation == 2)
        produce(fake, 3, start=5)
        records = poll_until(consumer, lambda rs: len(rs) >= 3)
        assert [r.value for r in records] == [b"5", b"6", b"7"]
    # the listener hears of no revocation: the rebalance moved nothing
    assert listener.calls[:2] == [("assigned", [T0, U0, U1]), ("assigned", [])]
    second = fake.group_requests(ApiKey.JOIN_GROUP)[1]
    assert second["rebalance_protocol"] == "incremental"
    assert second["owned_partitions"] == [{"topic": "t", "partitions": [0]},
                                          {"topic": "u", "partitions": [0, 1]}]
    kinds = [ApiKey(r.header.api_key) for r in fake.requests
             if r.header.api_key in (ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP)]
    assert kinds[:2] == [ApiKey.JOIN_GROUP, ApiKey.JOIN_GROUP]  # no commit of everything


def test_an_answer_that_leaves_a_partition_out_revokes_just_that_one(fake) -> None:
    produce(fake, 4)
    listener = Recorder()
    with incremental_consumer(fake, auto_commit_interval_ms=60_000) as consumer:
        consumer.subscribe(["t", "u"], listener=listener)
        poll_until(consumer, lambda rs: len(rs) >= 4)
        fake.withhold = {("u", 1)}
        fake.faults.append(answer_code(ApiKey.HEARTBEAT, ErrorCode.REBALANCE_IN_PROGRESS))
        # it lets go of u-1 and rejoins at once (generation 3) without it
        poll_until(consumer, lambda _: consumer.generation == 3)
        assert consumer.assignment() == {T0, U0}
        fake.withhold = set()
        fake.faults.append(answer_code(ApiKey.HEARTBEAT, ErrorCode.REBALANCE_IN_PROGRESS))
        poll_until(consumer, lambda _: consumer.assignment() == {T0, U0, U1})
    assert listener.calls[:4] == [("assigned", [T0, U0, U1]), ("assigned", []),
                                  ("revoked", [U1]), ("assigned", [])]
    assert ("assigned", [U1]) in listener.calls[4:]
    joins = fake.group_requests(ApiKey.JOIN_GROUP)
    assert joins[2]["owned_partitions"] == [{"topic": "t", "partitions": [0]},
                                            {"topic": "u", "partitions": [0]}]
    # what was consumed of u-1 is committed, and only that, before the join that lets it go
    kinds = [(ApiKey(r.header.api_key), r.body) for r in fake.requests
             if r.header.api_key in (ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP)]
    assert [k for k, _ in kinds[:4]] == [ApiKey.JOIN_GROUP, ApiKey.JOIN_GROUP,
                                         ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP]
    revoke_commit = kinds[2][1]
    assert [(t["name"], [p["partition"] for p in t["partitions"]])
            for t in revoke_commit["topics"]] == [("u", [1])]
    assert revoke_commit["generation_id"] == 2


def test_an_incremental_member_that_lost_its_place_lets_go_of_everything(fake) -> None:
    listener = Recorder()
    with incremental_consumer(fake) as consumer:
        consumer.subscribe(["t"], listener=listener)
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        fake.faults.append(answer_code(ApiKey.HEARTBEAT, ErrorCode.ILLEGAL_GENERATION))
        poll_until(consumer, lambda _: consumer.generation == 2)
    assert listener.calls[:3] == [("assigned", [T0]), ("revoked", [T0]), ("assigned", [T0])]
    assert fake.group_requests(ApiKey.JOIN_GROUP)[1]["owned_partitions"] == []


def test_a_rejoining_member_with_a_backlog_reads_its_join_answer_at_the_next_poll(fake) -> None:
    """A member that rejoins while it works through buffered records: poll() hands them out
    without waiting, but reads what has arrived first -- the JoinGroup's answer is taken at the
    next poll(), not once the buffer runs dry (the coordinator's next round would have dropped
    the member meanwhile, its rebalance timeout passed)."""
    produce(fake, 200)
    with incremental_consumer(fake, max_poll_records=1,
                              auto_commit_interval_ms=60_000) as consumer:
        consumer.subscribe(["t"])
        poll_until(consumer, lambda rs: len(rs) >= 1)  # one fetch buffered the rest
        assert consumer.generation == 1
        fake.faults.append(answer_code(ApiKey.OFFSET_COMMIT, ErrorCode.REBALANCE_IN_PROGRESS))
        with pytest.raises(CommitFailedError):
            consumer.commit()
        assert consumer.state is ConsumerState.REJOINING
        assert consumer.poll(timeout_ms=0)  # sends the JoinGroup; a buffered record
        deadline = time.monotonic() + 10
        while sum(r.header.api_key == ApiKey.JOIN_GROUP for r in fake.answered) < 2:
            assert time.monotonic() < deadline, "the JoinGroup answered"
            time.sleep(0.01)
        # the answer is on the consumer's socket: the next call takes it
        assert consumer.poll(timeout_ms=0)  # still from the buffer
        assert consumer.state is ConsumerState.PART_OF_GROUP
        assert consumer.generation == 2


def test_an_unknown_rebalance_protocol_is_refused_at_once() -> None:
    with pytest.raises(ConfigError, match="rebalance_protocol='lazy'"):
        Consumer("127.0.0.1:1", group_id="g", rebalance_protocol="lazy")


# ---------------------------------------------------------------------- coordinator moves


def test_not_coordinator_rediscovers_without_stopping_fetching(fake) -> None:
    produce(fake, 3)
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"])
        poll_until(consumer, lambda rs: len(rs) >= 3)
        unavailable = always(ApiKey.FIND_COORDINATOR, lambda request: {
            "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "error_message": None,
            "node_id": -1, "host": "", "port": -1})
        fake.faults.append(unavailable)
        fake.faults.append(answer_code(ApiKey.HEARTBEAT, ErrorCode.NOT_COORDINATOR))
        poll_until_state(consumer, ConsumerState.REDISCOVER_COORDINATOR)
        produce(fake, 3, start=3)
        records = poll_until(consumer, lambda rs: len(rs) >= 3)  # still fetching
        assert [r.value for r in records] == [b"3", b"4", b"5"]
        assert consumer.state is ConsumerState.REDISCOVER_COORDINATOR
        fake.faults.remove(unavailable)
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        assert consumer.generation == 1  # the same generation: no rejoin was needed
    assert len(fake.group_requests(ApiKey.JOIN_GROUP)) == 1


def test_a_coordinator_that_stops_answering_is_given_up_after_the_session_timeout(fake) -> None:
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"])
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        silent = always(ApiKey.HEARTBEAT, lambda request: SILENT)
        fake.faults.append(silent)
        poll_until_state(consumer, ConsumerState.REDISCOVER_COORDINATOR)
        fake.faults.remove(silent)
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)


# -------------------------------------------------------------------------------- commits


def test_commit_and_committed(fake) -> None:
    produce(fake, 10)
    results: list[tuple[dict[TopicPartition, int], BaseException | None]] = []
    with group_consumer(fake, enable_auto_commit=False) as consumer:
        consumer.subscribe(["t"])
        poll_until(consumer, lambda rs: len(rs) >= 10)
        consumer.commit()
        assert consumer.committed(T0) == 10
        consumer.commit(offsets={T0: 3})
        assert consumer.committed(T0) == 3
        future = consumer.commit_async(callback=lambda o, e: results.append((o, e)))
        future.result(5)
        assert results == [({T0: 10}, None)]
        assert consumer.committed(TopicPartition("u", 0)) is None
        with pytest.raises(ValueError, match="negative"):
            consumer.commit(offsets={T0: -1})


def test_a_member_the_group_dropped_gets_commit_failed(fake) -> None:
    produce(fake, 2)
    with group_consumer(fake, enable_auto_commit=False) as consumer:
        consumer.subscribe(["t"])
        poll_until(consumer, lambda rs: len(rs) >= 2)
        fake.member_id = "someone-else"  # removed while it was not polling
        with pytest.raises(CommitFailedError, match=r"poll\(\).*session_timeout_ms"):
            consumer.commit()
        assert consumer.state is ConsumerState.STOPPED_CONSUMPTION
        with pytest.raises(CommitFailedError, match="not a member"):
            consumer.commit()  # no generation until it has rejoined
        poll_until(consumer, lambda _: consumer.generation == 2)
        consumer.commit()


def test_auto_commit_runs_from_poll(fake) -> None:
    produce(fake, 4)
    with group_consumer(fake, auto_commit_interval_ms=100) as consumer:
        consumer.subscribe(["t"])
        poll_until(consumer, lambda rs: len(rs) >= 4)
        poll_until(consumer, lambda _: fake.committed.get(("t", 0)) == 4)


def test_close_commits_revokes_and_leaves(fake) -> None:
    produce(fake, 4)
    listener = Recorder()
    consumer = group_consumer(fake, auto_commit_interval_ms=60_000)
    consumer.subscribe(["t"], listener=listener)
    poll_until(consumer, lambda rs: len(rs) >= 4)
    member = consumer.member_id
    consumer.close()
    assert consumer.state is ConsumerState.DOWN
    assert fake.committed[("t", 0)] == 4
    assert fake.left == [member]
    assert listener.calls == [("assigned", [T0]), ("revoked", [T0])]


def test_manual_assignment_commits_with_generation_minus_one(fake) -> None:
    produce(fake, 3)
    with group_consumer(fake) as consumer:
        consumer.assign([T0])
        poll_until(consumer, lambda rs: len(rs) >= 3)
        consumer.commit()
        assert consumer.state is ConsumerState.DOWN
    [commit] = fake.group_requests(ApiKey.OFFSET_COMMIT)[:1]
    assert (commit["generation_id"], commit["member_id"]) == (-1, "")
    assert fake.committed[("t", 0)] == 3
    assert not fake.group_requests(ApiKey.JOIN_GROUP)


# --------------------------------------------------------------------- usage and logging


def test_subscriptions_and_assignments_do_not_mix(fake) -> None:
    with Consumer(fake.bootstrap) as lone:
        with pytest.raises(SubscriptionNotValidError, match="group_id"):
            lone.subscribe(["t"])
        with pytest.raises(IllegalStateError, match="subscribe"):
            lone.poll()
    with group_consumer(fake) as consumer:
        with pytest.raises(ValueError, match="not both"):
            consumer.subscribe(["t"], pattern="t.*")
        consumer.subscribe(["t"])
        with pytest.raises(SubscriptionNotValidError, match="assign"):
            consumer.assign([T0])
        with pytest.raises(SubscriptionNotValidError, match="pattern"):
            consumer.subscribe(pattern="t.*")
        consumer.unsubscribe()
        consumer.assign([T0])
        with pytest.raises(SubscriptionNotValidError, match="manual"):
            consumer.subscribe(["t"])


def test_pattern_subscription_joins_with_the_matching_topics(fake) -> None:
    with group_consumer(fake) as consumer:
        consumer.subscribe(pattern=re.compile("u"))
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
        assert consumer.subscription() == {"u"}
        assert consumer.assignment() == {TopicPartition("u", 0), TopicPartition("u", 1)}
    assert fake.group_requests(ApiKey.JOIN_GROUP)[0]["topics"] == ["u"]


def test_every_state_change_is_logged(fake, caplog) -> None:
    caplog.set_level(logging.INFO, logger="odradek.consumer")
    with group_consumer(fake) as consumer:
        consumer.subscribe(["t"])
        poll_until_state(consumer, ConsumerState.PART_OF_GROUP)
    moves = [re.search(r"from='([^']*)' to='([^']*)'", r.getMessage())
             for r in caplog.records if r.getMessage().startswith("consumer_state")]
    assert [m.groups() for m in moves if m] == [
        ("Down", "Start up & discover coordinator"),
        ("Start up & discover coordinator", "Part of a group"),
        ("Part of a group", "Down"),
    ]
