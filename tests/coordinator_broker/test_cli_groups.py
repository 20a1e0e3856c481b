"""``odradek groups list`` / ``describe`` against a running broker, human and --json."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from client.cli import main
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member

pytestmark = pytest.mark.integration


def run(*argv: str) -> str:
    """What ``odradek ARGV`` prints on stdout (it must succeed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


@pytest.fixture
def member(broker: BrokerProcess) -> Iterator[Member]:
    """A Steady group "g" of one member owning t-0..2, t-0 holding 5 messages, 2 committed."""
    with RawClient(broker.address) as client:
        client.create_topic("t", 3)
        client.produce("t", [b"m"] * 5, partition=0)
    with Member(broker.address, "g", ["t"]) as joined:
        joined.join()
        joined.commit({("t", 0): 2}, metadata="note")
        yield joined


def test_groups_list(broker: BrokerProcess, member: Member) -> None:
    assert json.loads(run("groups", "list", "--bootstrap", broker.bootstrap, "--json")) == [
        {"group": "g", "state": "Steady", "coordinator": 0},
    ]
    table = run("groups", "list", "--bootstrap", broker.bootstrap)
    assert "g " in table and "Steady" in table


def test_groups_describe(broker: BrokerProcess, member: Member) -> None:
    described: dict[str, Any] = json.loads(
        run("groups", "describe", "g", "--bootstrap", broker.bootstrap, "--json")
    )
    assert described == {
        "group": "g", "state": "Steady", "generation": 1, "strategy": "range",
        "coordinator": {"node_id": 0, "host": "127.0.0.1", "port": broker.port},
        "members": [{
            "member_id": member.member_id, "client_id": "raw-test", "client_host": "127.0.0.1",
            "session_timeout_ms": member.session_timeout_ms, "subscription": ["t"],
            "assignment": [{"topic": "t", "partition": p} for p in range(3)],
        }],
        "offsets": [
            {"topic": "t", "partition": 0, "member": member.member_id, "committed_offset": 2,
             "metadata": "note", "log_end_offset": 5, "lag": 3},
            {"topic": "t", "partition": 1, "member": member.member_id, "committed_offset": None,
             "metadata": None, "log_end_offset": 0, "lag": None},
            {"topic": "t", "partition": 2, "member": member.member_id, "committed_offset": None,
             "metadata": None, "log_end_offset": 0, "lag": None},
        ],
    }
    tables = run("groups", "describe", "g", "--bootstrap", broker.bootstrap)
    for expected in ("Steady", "range", f"127.0.0.1:{broker.port}", "t: 0,1,2"):
        assert expected in tables
    offsets = tables[tables.index("offsets"):]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in offsets.splitlines() if line.startswith("│")]
    assert [row[:2] + row[3:] for row in rows] == [  # the member id column may be cut short
        ["t", "0", "2", "5", "3"], ["t", "1", "-", "0", "-"], ["t", "2", "-", "0", "-"],
    ]


def test_describing_an_unknown_group_names_it(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "describe", "nobody", "--bootstrap", broker.bootstrap]) == 1
    assert "group 'nobody'" in capsys.readouterr().err
