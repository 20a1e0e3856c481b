"""Groups and offsets kept in __consumer_offsets across broker restarts and coordinator
failover, against a real broker process."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from coordinator.offsets_topic import OffsetKey, OffsetValue, offset_record
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messageset import Record, encode_message_set
from protocol.partitions import OFFSETS_TOPIC, offsets_partition_for
from tests import coordinator_faults
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member, commit, describe, fetch_offsets, wait_for

pytestmark = pytest.mark.integration

OFFSETS = {("t", 0): 42, ("t", 1): 7, ("t", 2): 0}


def settled_offsets(
    client: RawClient, group: str
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """The group's committed offsets once its offsets partition is loaded."""

    def fetched() -> dict[tuple[str, int], tuple[int, str | None]] | None:
        code, offsets = fetch_offsets(client, group)
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return None
        assert code is ErrorCode.NONE
        return offsets

    return wait_for(fetched, what=f"the offsets of {group} to load")


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_commits_and_the_group_survive_a_restart(
    make_broker: Callable[..., BrokerProcess], stop: str
) -> None:
    """A commit is answered only once written to __consumer_offsets, so it survives a clean
    stop and a kill alike; loading the partition at start rebuilds the group as it was (same
    generation, member and assignment), and the member's heartbeats carry on."""
    broker = make_broker()
    with RawClient(broker.address) as client:
        client.create_topic("t", 3)
    with Member(broker.address, "g", ["t"]) as member:
        member.join()
        assert member.commit(OFFSETS, metadata="m") == dict.fromkeys(OFFSETS, ErrorCode.NONE)
        before = describe(member.client, "g")
    if stop == "SIGTERM":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start(port=broker.port)
    with RawClient(broker.address) as client:
        assert settled_offsets(client, "g") == {tp: (o, "m") for tp, o in OFFSETS.items()}
        assert describe(client, "g") == before
        answer = client.request(ApiKey.HEARTBEAT, {
            "group_id": "g", "member_id": member.member_id, "generation_id": member.generation,
        })
        assert answer["error_code"] == ErrorCode.NONE


def test_requests_right_after_start_are_clean_or_load_in_progress(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    """DESIGN: while an offsets partition is in Catch-up its group requests get
    COORDINATOR_LOAD_IN_PROGRESS (seed: OffsetsLoadInProgress). Right after a start every
    answer is that or the whole truth -- never a partial load or NOT_COORDINATOR."""
    broker = make_broker()
    many = {("t", p): p * 10 for p in range(3000)}  # commits need not name real partitions
    with RawClient(broker.address) as client:
        for group in ("a", "b", "c"):
            assert set(commit(client, group, -1, "", many).values()) == {ErrorCode.NONE}
    broker.restart()
    with RawClient(broker.address) as client:
        sent = [
            client.send(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None})
            for _ in range(20) for group in ("a", "b", "c")
        ]
        codes = set()
        for correlation_id in sent:
            received, body = client.receive()
            assert received == correlation_id
            codes.add(body["error_code"])
            if body["error_code"] == ErrorCode.NONE:
                assert sum(len(t["partitions"]) for t in body["topics"]) == len(many)
        assert codes <= {ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        for group in ("a", "b", "c"):
            assert settled_offsets(client, group) == {tp: (o, None) for tp, o in many.items()}


def test_resign_and_lead_again(make_broker: Callable[..., BrokerProcess]) -> None:
    """The "resign" / "become leader" moves (tests.coordinator_faults' signals: SIGUSR1 resigns
    every offsets partition, SIGUSR2 leads and reloads them). Resigned: NOT_COORDINATOR, and
    FindCoordinator finds none; led again: the group is back from the log as it was (seed 001
    "Co-ordinator failure": the new coordinator loads the group's metadata and offsets)."""
    broker = make_broker(module=coordinator_faults.MODULE,
                         env=coordinator_faults.faulty_env(signals=True))
    with RawClient(broker.address) as client:
        client.create_topic("t", 3)
    with Member(broker.address, "g", ["t"]) as member:
        member.join()
        member.commit(OFFSETS)
        before = describe(member.client, "g")
        os.kill(broker.pid, signal.SIGUSR1)
        wait_for(lambda: member.heartbeat() is ErrorCode.NOT_COORDINATOR, what="resignation")
        found = member.client.request(ApiKey.FIND_COORDINATOR, {"group_id": "g"})
        assert found["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert fetch_offsets(member.client, "g")[0] is ErrorCode.NOT_COORDINATOR
        os.kill(broker.pid, signal.SIGUSR2)
        wait_for(lambda: member.heartbeat() is ErrorCode.NONE, what="leading and loading again")
        assert fetch_offsets(member.client, "g")[1] == {tp: (o, None) for tp, o in OFFSETS.items()}
        assert describe(member.client, "g") == before
        found = member.client.request(ApiKey.FIND_COORDINATOR, {"group_id": "g"})
        assert (found["error_code"], found["port"]) == (ErrorCode.NONE, broker.port)


def test_clients_cannot_delete_or_write_the_offsets_topic(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    """Deleting __consumer_offsets lost every group and its offsets at the next restart, and a
    produced record could rewrite any group's offsets. Both are refused with INVALID_TOPIC
    naming the topic (Kafka: "Cannot append to internal topic ..."); the coordinator's own
    writes carry on, and the offsets survive a restart."""
    broker = make_broker()
    with RawClient(broker.address) as client:
        assert set(commit(client, "g", -1, "", OFFSETS).values()) == {ErrorCode.NONE}
        (described,) = client.metadata([OFFSETS_TOPIC], auto_create=False)["topics"]
        partitions = len(described["partitions"])
        forged = offset_record(OffsetKey("g", "t", 0), OffsetValue(0, None, 0))
        produced = client.produce_set(
            OFFSETS_TOPIC,
            offsets_partition_for("g", partitions),
            encode_message_set([Record(*forged, 0)]),
        )
        assert (produced["error_code"], produced["base_offset"]) == (ErrorCode.INVALID_TOPIC, -1)
        assert f"internal topic {OFFSETS_TOPIC!r}" in produced["error_message"]
        body = {"topic_names": [OFFSETS_TOPIC], "timeout_ms": 5000}
        (deleted,) = client.request(ApiKey.DELETE_TOPICS, body)["topics"]
        assert deleted["error_code"] == ErrorCode.INVALID_TOPIC
        assert f"internal topic {OFFSETS_TOPIC!r}" in deleted["error_message"]
        assert settled_offsets(client, "g") == {tp: (o, None) for tp, o in OFFSETS.items()}
    broker.restart()
    with RawClient(broker.address) as client:
        (described,) = client.metadata([OFFSETS_TOPIC], auto_create=False)["topics"]
        assert (described["error_code"], described["is_internal"]) == (ErrorCode.NONE, True)
        assert len(described["partitions"]) == partitions
        assert settled_offsets(client, "g") == {tp: (o, None) for tp, o in OFFSETS.items()}
        assert commit(client, "g", -1, "", {("t", 0): 43}) == {("t", 0): ErrorCode.NONE}
        assert settled_offsets(client, "g")[("t", 0)] == (43, None)
