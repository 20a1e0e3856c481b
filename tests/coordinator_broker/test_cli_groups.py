"""``odradek groups list`` / ``describe`` (its default, --members and --state views) against a
running broker, human and --json."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from client.future import Future
from client.group_admin import GroupAdmin
from protocol.apis import ApiKey
from protocol.errors import UnsupportedVersionError
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member, wait_for
from tooling.cli.main import main

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
        joined.joined_at_ms = int(time.time() * 1000)  # type: ignore[attr-defined]
        joined.join()
        joined.commit({("t", 0): 2}, metadata="note")
        yield joined


def test_groups_list(broker: BrokerProcess, member: Member) -> None:
    assert json.loads(run("groups", "list", "--bootstrap", broker.bootstrap, "--json")) == [
        {"group": "g", "state": "Steady", "coordinator": 0},
    ]
    table = run("groups", "list", "--bootstrap", broker.bootstrap)
    assert "g " in table and "Steady" in table


def table_rows(text: str, title: str) -> list[list[str]]:
    """The cells of the rich table printed under ``title`` (up to the next table)."""
    rows = []
    for line in text[text.index(title):].splitlines()[1:]:
        if line.startswith(("┃", "│")):  # the header's border, the rows' border
            rows.append([cell.strip() for cell in line.replace("┃", "│").split("│")[1:-1]])
        elif rows and not line.startswith(("├", "┡", "└")):
            break  # the next table's title
    return rows


def pop_state_age(described: dict[str, Any], since_ms: int) -> None:
    """Take out the group's state age: Steady since it joined (``since_ms`` or later, by the
    broker's clock -- the same machine's), in that state for less than a minute."""
    since, age = described.pop("state_since_ms"), described.pop("in_state_ms")
    assert since_ms <= since <= time.time() * 1000
    assert 0 <= age < 60_000


def age_cell(row: list[str]) -> list[str]:
    """The row with its IN-STATE-FOR cell (a duration such as 850ms or 1.2s) checked and
    replaced by "age"."""
    assert re.fullmatch(r"\d+ms|\d+\.\ds", row[4]), row
    return [*row[:4], "age", *row[5:]]


def test_groups_describe(broker: BrokerProcess, member: Member) -> None:
    described: dict[str, Any] = json.loads(
        run("groups", "describe", "g", "--bootstrap", broker.bootstrap, "--json")
    )
    pop_state_age(described, member.joined_at_ms)
    owner = {"member_id": member.member_id, "host": "127.0.0.1", "client_id": "raw-test"}
    assert described == {
        "group": "g", "state": "Steady", "generation": 1, "strategy": "range",
        "coordinator": {"node_id": 0, "host": "127.0.0.1", "port": broker.port},
        "member_count": 1,
        "members": [{
            "group": "g", **owner, "instance_id": None,
            "session_timeout_ms": member.session_timeout_ms,
            "subscription": ["t"], "partitions": 3,
            "assignment": [{"topic": "t", "partition": p} for p in range(3)],
        }],
        "offsets": [
            {"group": "g", "topic": "t", "partition": 0, "committed_offset": 2,
             "metadata": "note", "log_end_offset": 5, "lag": 3, **owner},
            {"group": "g", "topic": "t", "partition": 1, "committed_offset": None,
             "metadata": None, "log_end_offset": 0, "lag": None, **owner},
            {"group": "g", "topic": "t", "partition": 2, "committed_offset": None,
             "metadata": None, "log_end_offset": 0, "lag": None, **owner},
        ],
    }
    tables = run("groups", "describe", "g", "--bootstrap", broker.bootstrap)
    header, row = table_rows(tables, "group g")
    assert header == ["GROUP", "COORDINATOR", "STRATEGY", "STATE", "IN-STATE-FOR",
                      "GENERATION", "#MEMBERS"]
    assert age_cell(row) == ["g", f"127.0.0.1:{broker.port} (0)", "range", "Steady", "age",
                             "1", "1"]
    header, *rows = table_rows(tables, "offsets and lag of group g")
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "MEMBER-ID", "HOST", "CLIENT-ID"]
    assert rows == [
        ["g", "t", "0", "2", "5", "3", member.member_id, "127.0.0.1", "raw-test"],
        ["g", "t", "1", "-", "0", "-", member.member_id, "127.0.0.1", "raw-test"],
        ["g", "t", "2", "-", "0", "-", member.member_id, "127.0.0.1", "raw-test"],
    ]


def test_groups_describe_members(broker: BrokerProcess, member: Member) -> None:
    members = json.loads(
        run("groups", "describe", "g", "--members", "--bootstrap", broker.bootstrap, "--json")
    )
    assert members == [{
        "group": "g", "member_id": member.member_id, "instance_id": None, "host": "127.0.0.1",
        "client_id": "raw-test", "session_timeout_ms": member.session_timeout_ms,
        "subscription": ["t"], "partitions": 3,
        "assignment": [{"topic": "t", "partition": p} for p in range(3)],
    }]
    tables = run("groups", "describe", "g", "--members", "--bootstrap", broker.bootstrap)
    header, *rows = table_rows(tables, "members of group g")
    assert header == ["GROUP", "MEMBER-ID", "INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                      "ASSIGNMENT"]
    assert rows == [["g", member.member_id, "-", "127.0.0.1", "raw-test", "3", "t: 0,1,2"]]
    assert "offsets" not in tables


def test_groups_describe_state(broker: BrokerProcess, member: Member) -> None:
    state = json.loads(
        run("groups", "describe", "g", "--state", "--bootstrap", broker.bootstrap, "--json")
    )
    pop_state_age(state, member.joined_at_ms)
    assert state == {
        "group": "g", "state": "Steady", "generation": 1, "strategy": "range",
        "coordinator": {"node_id": 0, "host": "127.0.0.1", "port": broker.port},
        "member_count": 1,
    }
    tables = run("groups", "describe", "g", "--state", "--bootstrap", broker.bootstrap)
    header, row = table_rows(tables, "group g")
    assert header[4] == "IN-STATE-FOR"
    assert age_cell(row) == ["g", f"127.0.0.1:{broker.port} (0)", "range", "Steady", "age",
                             "1", "1"]
    assert "MEMBER-ID" not in tables


def test_describing_a_group_without_members_says_so(
    broker: BrokerProcess, member: Member, capsys: pytest.CaptureFixture[str]
) -> None:
    member.leave()
    wait_for(lambda: json.loads(run("groups", "describe", "g", "--state", "--bootstrap",
                                    broker.bootstrap, "--json"))["state"] == "Empty",
             what="group g Empty")
    capsys.readouterr()
    assert main(["groups", "describe", "g", "--bootstrap", broker.bootstrap, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "group 'g' has no active members" in err
    offsets = json.loads(out)["offsets"]
    assert [(o["partition"], o["committed_offset"], o["member_id"], o["host"]) for o in offsets] \
        == [(0, 2, None, None)]
    assert main(["groups", "describe", "g", "--members", "--bootstrap", broker.bootstrap]) == 0
    out, err = capsys.readouterr()
    assert "group 'g' has no active members" in err
    assert table_rows(out, "members of group g")[1:] == []


def test_describing_an_unknown_group_names_it(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "describe", "nobody", "--bootstrap", broker.bootstrap]) == 1
    assert "group 'nobody'" in capsys.readouterr().err


def test_describe_groups_v1_says_since_when_and_v0_is_answered_without_it(
    broker: BrokerProcess, member: Member
) -> None:
    with RawClient(broker.address) as client:
        v0 = client.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["g", "nobody"]}, version=0)
        v1 = client.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["g", "nobody"]}, version=1)
    # decode_response_body checked each against its version's schema: v0 has no new field
    assert all("state_since_ms" not in g for g in v0["groups"])
    g, nobody = v1["groups"]
    assert member.joined_at_ms <= g["state_since_ms"] <= time.time() * 1000
    assert nobody["state_since_ms"] == -1 and nobody["state"] == "Dead"
    assert [{k: v for k, v in d.items() if k != "state_since_ms"} for d in v1["groups"]] \
        == v0["groups"]


def test_describe_group_falls_back_to_v0_for_a_broker_without_v3(
    broker: BrokerProcess, member: Member, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker from before v3 answers UNSUPPORTED_VERSION: the admin asks v0 and has no
    age to show (the table's IN-STATE-FOR is "-")."""
    with GroupAdmin(broker.bootstrap, timeout_ms=10_000) as admin:
        sent: list[int] = []
        send = admin._network.send

        def refusing_v3(*args: Any, api_version: int = 0, **kwargs: Any) -> Any:
            sent.append(api_version)
            if args[1] is ApiKey.DESCRIBE_GROUPS and api_version == 3:
                future: Future[dict[str, Any]] = Future(admin._network.poll)
                future.fail(UnsupportedVersionError("DescribeGroups v3 is not supported"))
                return future
            return send(*args, api_version=api_version, **kwargs)

        monkeypatch.setattr(admin._network, "send", refusing_v3)
        described = admin.describe_group("g")
        assert described.state == "Steady" and described.state_since_ms is None
        admin.describe_group("g")
    assert sent.count(3) == 1  # remembered: v0 from then on


def test_groups_describe_all_groups(
    broker: BrokerProcess, member: Member, capsys: pytest.CaptureFixture[str]
) -> None:
    """--all-groups: every group the broker coordinates (ListGroups), each described as when
    named; several named groups are described the same way."""
    with Member(broker.address, "h", ["t"]) as other:
        other.join()
        other.commit({("t", 1): 0})
        other.leave()
        wait_for(lambda: json.loads(run("groups", "describe", "h", "--state", "--bootstrap",
                                        broker.bootstrap, "--json"))["state"] == "Empty",
                 what="group h Empty")
    states = json.loads(run("groups", "describe", "--all-groups", "--state", "--json",
                            "--bootstrap", broker.bootstrap))
    assert [(s["group"], s["state"], s["member_count"]) for s in states] \
        == [("g", "Steady", 1), ("h", "Empty", 0)]
    described = json.loads(run("groups", "describe", "--all-groups", "--json",
                               "--bootstrap", broker.bootstrap))
    assert [(d["group"], [(o["topic"], o["partition"], o["committed_offset"])
                          for o in d["offsets"] if o["committed_offset"] is not None])
            for d in described] == [("g", [("t", 0, 2)]), ("h", [("t", 1, 0)])]
    assert json.loads(run("groups", "describe", "h", "g", "--members", "--json",
                          "--bootstrap", broker.bootstrap)) \
        == [[], json.loads(run("groups", "describe", "g", "--members", "--json",
                               "--bootstrap", broker.bootstrap))]
    capsys.readouterr()
    tables = run("groups", "describe", "--all-groups", "--bootstrap", broker.bootstrap)
    assert "group 'h' has no active members" in capsys.readouterr().err
    assert [r[0] for r in table_rows(tables, "offsets and lag of group g")[1:]] == ["g"] * 3
    assert table_rows(tables, "offsets and lag of group h")[1:] \
        == [["h", "t", "1", "0", "0", "0", "-", "-", "-"]]


def test_groups_describe_all_groups_of_a_broker_without_groups(broker: BrokerProcess) -> None:
    assert json.loads(run("groups", "describe", "--all-groups", "--json",
                          "--bootstrap", broker.bootstrap)) == []


@pytest.mark.parametrize("argv", [[], ["g", "--all-groups"]])
def test_groups_describe_needs_groups_or_all_groups(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["groups", "describe", *argv, "--bootstrap", "127.0.0.1:1"])
    assert exit_.value.code == 2
    assert "or give --all-groups" in capsys.readouterr().err
