"""Replica verification on a real 3-broker cluster (tooling/replica_verification.py, ``odradek
cluster verify-replicas``): a follower answers a debugging fetch (replica_id -2) from its own
copy; after acks=all produces every copy agrees; a byte flipped in a follower's segment file
is reported with its offset and brokers; a stopped or paused follower is reported as not
answering, not as a difference -- with the command's text, JSON and exit status for each.

The byte is flipped while the follower runs: it serves reads from its segment files as they
are on disk, so what it answers is what a silently damaged disk would give. (A damaged
segment found at start-up is recovery's business, and not what this tool is for.)
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from broker.log import layout
from client.network import NetworkClient
from client.producer import Producer
from protocol.apis import CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID, ApiKey
from protocol.entry_scan import scan_entries
from protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, paused, until
from tooling.cli import main as cli
from tooling.replica_comparison import DifferenceKind
from tooling.replica_verification import PartitionVerdict, VerdictStatus, verify_replicas

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "verified"
PARTITIONS = 3
MESSAGES = 40  # per partition


def _produce(bootstrap: str) -> None:
    with Producer(bootstrap, acks="all", retry_backoff_ms=100, request_timeout_ms=5_000,
                  delivery_timeout_ms=30_000) as producer:
        for p in range(PARTITIONS):  # one record batch per message: an entry each
            for i in range(MESSAGES):
                producer.send(TOPIC, f"p{p}-{i:03d}".encode(), partition=p).result(30)


def _caught_up(bootstrap: str) -> list[PartitionVerdict]:
    """Verify until every replica's high watermark has reached the end of what was produced
    (a follower learns it from its next fetch): the verdicts then."""
    def everything_compared() -> list[PartitionVerdict] | None:
        verdicts = verify_replicas(bootstrap, [TOPIC], timeout_ms=10_000)
        done = all(v.end_offset == MESSAGES and len(v.compared) == 3 for v in verdicts)
        return verdicts if done else None

    verdicts: list[PartitionVerdict] = until(everything_compared, 30,
                                             "every replica's high watermark at the end")
    return verdicts


def _run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["cluster", "verify-replicas", *args])
    return code, out.getvalue(), err.getvalue()


def _fetch(process: BrokerProcess, replica_id: int, partition: int) -> dict[str, Any]:
    """A Fetch of offset 0 answered by exactly this broker: the partition's answer."""
    network = NetworkClient(process.bootstrap, client_id="verify-test", request_timeout_ms=10_000)
    try:
        body = network.send(-1, ApiKey.FETCH, {
            "replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition": partition, "fetch_offset": 0, "max_bytes": 1 << 20}]}]},
            api_version=2).result(10)
    finally:
        network.close()
    result: dict[str, Any] = body["topics"][0]["partitions"][0]
    return result


def _follower(cluster: Cluster, partition: int) -> int:
    state = cluster.state(TOPIC, partition)
    return next(b for b in cluster.assignment(TOPIC)[partition] if b != state["leader"])


def _flip_value_byte(process: BrokerProcess, partition: int, offset: int) -> None:
    """Flip the last byte (of the value) of the entry at ``offset`` in the broker's own segment
    file, in place: the same file the running broker reads."""
    directory = process.data_dir / layout.partition_dir_name(TOPIC, partition)
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        scan = scan_entries(data)
        if offset in scan.offsets:
            i = list(scan.offsets).index(offset)
            at = scan.positions[i] + scan.sizes[i] - 1
            with path.open("r+b") as segment:
                segment.seek(at)
                segment.write(bytes([data[at] ^ 0x01]))
            return
    raise AssertionError(f"no entry at offset {offset} in {directory}")


@pytest.mark.timeout(120)
def test_every_copy_agrees_after_acks_all_produces_and_the_command_says_so(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    bootstrap = cluster.brokers[0].bootstrap
    _produce(bootstrap)

    # a follower answers a debugging fetch from its own copy, and a consumer's with NOT_LEADER
    follower = cluster.brokers[_follower(cluster, 0)]
    refused = _fetch(follower, CONSUMER_REPLICA_ID, 0)
    assert refused["error_code"] == ErrorCode.NOT_LEADER_FOR_PARTITION
    def caught_up() -> dict[str, Any] | None:
        answer = _fetch(follower, DEBUGGING_REPLICA_ID, 0)
        return answer if answer["high_watermark"] == MESSAGES else None

    answered = until(caught_up, 30, "the follower's high watermark at the end")
    assert answered["error_code"] == ErrorCode.NONE
    assert b"p0-000" in answered["records"] and b"p0-039" in answered["records"]

    verdicts = _caught_up(bootstrap)
    assert [(v.partition, v.status, v.entries, v.start_offset) for v in verdicts] == [
        (p, VerdictStatus.OK, MESSAGES, 0) for p in range(PARTITIONS)]
    assert all(sorted(v.compared) == [0, 1, 2] and v.difference is None for v in verdicts)

    code, out, err = _run_cli("--bootstrap", bootstrap, "--topic", TOPIC)
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert len(lines) == PARTITIONS
    for p, line in enumerate(lines):
        assert line.startswith(f"{TOPIC}-{p}: ok (offsets 0..{MESSAGES}, {MESSAGES} entries, "
                               "brokers "), line
    assert f"{PARTITIONS} partitions: {PARTITIONS} ok, 0 differs, 0 incomplete" in err
    assert "lowest high watermark" in err

    code, out, _ = _run_cli("--bootstrap", bootstrap, "--topic", TOPIC, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["agree"] is True
    assert report["summary"] == {"partitions": PARTITIONS, "ok": PARTITIONS, "differs": 0,
                                 "incomplete": 0}
    first = report["partitions"][0]
    assert (first["topic"], first["partition"], first["status"], first["entries"],
            first["difference"]) == (TOPIC, 0, "ok", MESSAGES, None)
    assert sorted(r["broker"] for r in first["replicas"]) == [0, 1, 2]
    assert all(r["high_watermark"] == MESSAGES and r["not_answering"] is None
               for r in first["replicas"])

    # a paused follower does not answer in time: reported so, and waited for once in the run
    ask = next(p for b, p in sorted(cluster.brokers.items()) if p is not follower).bootstrap
    with paused(follower):
        verdicts = verify_replicas(ask, [TOPIC], timeout_ms=2_000)
    assert [v.status for v in verdicts] == [VerdictStatus.INCOMPLETE] * PARTITIONS
    assert all(list(v.not_answering) == [follower.broker_id] and v.difference is None
               for v in verdicts)
    assert "did not answer" in verdicts[0].not_answering[follower.broker_id]
    assert "earlier in this run" in verdicts[-1].not_answering[follower.broker_id]


@pytest.mark.timeout(150)
def test_a_flipped_byte_in_a_follower_is_found_and_a_stopped_one_is_not_answering(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    bootstrap = cluster.brokers[0].bootstrap
    _produce(bootstrap)
    _caught_up(bootstrap)
    leader = cluster.state(TOPIC, 0)["leader"]
    damaged = _follower(cluster, 0)

    _flip_value_byte(cluster.brokers[damaged], 0, 17)
    verdicts = verify_replicas(bootstrap, [TOPIC], timeout_ms=10_000)
    assert [v.status for v in verdicts] == [
        VerdictStatus.DIFFERS, VerdictStatus.OK, VerdictStatus.OK]
    difference = verdicts[0].difference
    assert difference is not None
    assert (difference.offset, difference.kind, difference.brokers) == (
        17, DifferenceKind.BYTES, (leader, damaged))
    assert f"broker {damaged} " in difference.detail and "FAILS" in difference.detail
    assert verdicts[0].entries == 17  # the entries below it agreed

    code, out, err = _run_cli("--bootstrap", bootstrap, "--topic", TOPIC)
    assert code == 1, (out, err)
    assert out.splitlines()[0].startswith(
        f"{TOPIC}-0: DIFFERS at offset 17 (bytes, brokers {leader},{damaged}): ")
    assert f"{PARTITIONS} partitions: 2 ok, 1 differs, 0 incomplete" in err
    code, out, _ = _run_cli("--bootstrap", bootstrap, "--topic", TOPIC, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["agree"] is False
    assert report["partitions"][0]["difference"]["offset"] == 17
    assert report["partitions"][0]["difference"]["kind"] == "bytes"
    assert report["partitions"][0]["difference"]["brokers"] == [leader, damaged]

    # the damaged follower stops: it is not answering, and the copies left agree
    cluster.brokers[damaged].stop()
    ask = cluster.any_running().bootstrap
    verdicts = verify_replicas(ask, [TOPIC], timeout_ms=10_000)
    assert [v.status for v in verdicts] == [VerdictStatus.INCOMPLETE] * PARTITIONS
    for verdict in verdicts:
        assert verdict.difference is None
        assert list(verdict.not_answering) == [damaged]
        assert sorted(verdict.compared) == sorted(set(range(3)) - {damaged})
    code, out, err = _run_cli("--bootstrap", ask, "--topic", TOPIC)
    assert code == 2, (out, err)
    assert out.splitlines()[0].startswith(
        f"{TOPIC}-0: incomplete: broker {damaged} not answering: ")
    assert "the others agree" in out.splitlines()[0]
    assert f"{PARTITIONS} partitions: 0 ok, 0 differs, {PARTITIONS} incomplete" in err
    code, out, _ = _run_cli("--bootstrap", ask, "--topic", TOPIC, "--json")
    assert code == 2
    replicas = json.loads(out)["partitions"][0]["replicas"]
    assert [r["broker"] for r in replicas if r["not_answering"]] == [damaged]
