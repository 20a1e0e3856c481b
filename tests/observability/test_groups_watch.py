"""``odradek groups watch``: driven under a pseudo-terminal while a member joins and leaves, the
frames show each state in order, the timeline says who joined and left, and Ctrl-C leaves
cleanly."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from client.group_view import member_name
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member
from tests.observability.support import QUICK_GROUPS
from tests.observability.terminal import TerminalCommand

pytestmark = pytest.mark.integration

HEADER = re.compile(r"group g  state (\w+)  generation (\d+)\s.*?members (\d+).*?lag (\d+)")


def headers(text: str) -> list[tuple[str, int, int]]:
    """The (state, generation, members) of each frame's header, repeats dropped."""
    seen: list[tuple[str, int, int]] = []
    for match in HEADER.finditer(text):
        frame = (match[1], int(match[2]), int(match[3]))
        if not seen or seen[-1] != frame:
            seen.append(frame)
    return seen


def test_watch_shows_a_member_joining_and_leaving(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker(settings=QUICK_GROUPS)
    with RawClient(broker.address) as client:
        client.create_topic("t", 2)
        client.produce("t", [b"a", b"b", b"c"], partition=0)
    with Member(broker.address, "g", ["t"]) as first, \
            Member(broker.address, "g", ["t"]) as second:
        first.join()
        first.commit({("t", 0): 1})
        watch = TerminalCommand(["groups", "watch", "g", "--bootstrap", broker.bootstrap,
                                 "--interval-ms", "100"])
        try:
            watch.wait_for(lambda t: ("Steady", 1, 1) in headers(t), "Steady, generation 1")
            # topic, partition, committed, log end, lag
            watch.wait_for(lambda t: re.search(r"│ t +│ +0 │ +1 │ +3 │ +2 │", t) is not None,
                           "t-0's offsets and lag")

            second.send_join()  # held until the first member rejoins
            watch.wait_for(lambda t: ("PrepareRebalance", 1, 1) in headers(t),
                           "PrepareRebalance after the second member's join")
            first.join()
            assert second.finish_join()["error_code"] == 0
            watch.wait_for(lambda t: ("Steady", 2, 2) in headers(t), "Steady, generation 2")

            assert second.leave() == 0
            watch.wait_for(lambda t: ("PrepareRebalance", 2, 1) in headers(t),
                           "PrepareRebalance after the second member left")
            first.join()
            text = watch.wait_for(lambda t: ("Steady", 3, 1) in headers(t),
                                  "Steady, generation 3")
            assert watch.interrupt() == 0
        finally:
            watch.close()
    # a round's Rebalancing lasts one write: a poll may or may not catch it
    frames = [f for f in headers(text) if f[0] != "Rebalancing"]
    assert frames == [("Steady", 1, 1), ("PrepareRebalance", 1, 1), ("Steady", 2, 2),
                      ("PrepareRebalance", 2, 1), ("Steady", 3, 1)]
    left = member_name("g", second.member_id)
    assert re.search(rf"\d\d:\d\d:\d\d\.\d\d\d Steady gen 2 \(member {left} joined\)", text)
    assert re.search(rf"\d\d:\d\d:\d\d\.\d\d\d PrepareRebalance \(member {left} left\)", text)
    assert "Traceback" not in watch.text
