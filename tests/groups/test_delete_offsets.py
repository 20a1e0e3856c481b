"""``odradek groups delete-offsets`` (OffsetDelete) against a real broker, human and --json."""

from __future__ import annotations

import json
import time

import pytest

from client import Consumer, TopicPartition
from tests.groups.support import GROUP_BROKER_SETTINGS, create_topic
from tests.groups.test_group_commands import describe, run

pytestmark = pytest.mark.integration


@pytest.fixture
def bootstrap(make_broker) -> str:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    return str(broker.bootstrap)


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return {(o["topic"], o["partition"]): o["committed_offset"]
            for o in describe(bootstrap, group)["offsets"] if o["committed_offset"] is not None}


def test_delete_offsets_of_unsubscribed_topics_while_members_run_then_of_all(bootstrap) -> None:
    create_topic(bootstrap, "ledger", 2)
    create_topic(bootstrap, "audit", 1)
    ledger0, ledger1, audit0 = (TopicPartition("ledger", 0), TopicPartition("ledger", 1),
                                TopicPartition("audit", 0))
    with Consumer(bootstrap, group_id="keepers", enable_auto_commit=False) as manual:
        manual.assign([ledger0, ledger1, audit0])
        manual.commit(offsets={ledger0: 3, ledger1: 4, audit0: 1})
    with Consumer(bootstrap, group_id="keepers", session_timeout_ms=5_000,
                  heartbeat_interval_ms=500, enable_auto_commit=False) as member:
        member.subscribe(["audit"])
        deadline = time.monotonic() + 30
        while member.assignment() != {audit0}:
            assert time.monotonic() < deadline
            member.poll(timeout_ms=100)
        # a topic the members do not subscribe to: its offsets may go while they run
        code, out, err = run("groups", "delete-offsets", "keepers", "--topic", "ledger",
                             "--partition", "0", "--bootstrap", bootstrap, "--json")
        assert code == 0, err
        assert json.loads(out) == {"group": "keepers", "offsets": [
            {"topic": "ledger", "partition": 0, "error": None}]}
        # the topic they subscribe to: refused, partition by partition
        code, out, err = run("groups", "delete-offsets", "keepers", "--topic", "audit",
                             "--bootstrap", bootstrap, "--json")
        assert code == 1 and "has members subscribed to topic 'audit'" in err
        (row,) = json.loads(out)["offsets"]
        assert row["topic"] == "audit" and row["partition"] == 0
        assert "subscribed to the topic" in row["error"]
        assert committed(bootstrap, "keepers") == {("ledger", 1): 4, ("audit", 0): 1}
    # the member left: the group is Empty, and every partition of the topic goes by default
    code, out, err = run("groups", "delete-offsets", "keepers", "--topic", "audit",
                         "--bootstrap", bootstrap)
    assert code == 0, err
    assert "audit" in out and "deleted" in out
    code, out, err = run("groups", "delete-offsets", "keepers", "--topic", "ledger",
                         "--partition", "0", "1", "--bootstrap", bootstrap, "--json")
    assert code == 0, err
    assert [r["partition"] for r in json.loads(out)["offsets"]] == [0, 1]
    assert committed(bootstrap, "keepers") == {}


def test_delete_offsets_of_a_group_or_topic_that_is_not_there(bootstrap) -> None:
    create_topic(bootstrap, "ledger", 1)
    code, _, err = run("groups", "delete-offsets", "nobody", "--topic", "ledger",
                       "--bootstrap", bootstrap)
    assert code == 1 and "group 'nobody' does not exist" in err
    with Consumer(bootstrap, group_id="keepers", enable_auto_commit=False) as manual:
        manual.assign([TopicPartition("ledger", 0)])
        manual.commit(offsets={TopicPartition("ledger", 0): 1})
    code, _, err = run("groups", "delete-offsets", "keepers", "--topic", "missing",
                       "--bootstrap", bootstrap)
    assert code == 1 and "topic 'missing' does not exist" in err
