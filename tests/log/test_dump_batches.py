"""``odradek log dump`` on logs holding record batches beside v0/v1 entries, and on
producer-state snapshots. Batches are built by ``encode_batch`` (tests/protocol holds it to
hand-built bytes) and stored through a PartitionLog, as the broker stores them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import PartitionLog
from broker.log.dump import main
from protocol.compression import BatchCodec
from protocol.messageset import encode_message_set
from protocol.record_batch import encode_batch
from tests.log.support import FakeClock

OpenLog = Callable[..., PartitionLog]


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, list[str]]:
    capsys.readouterr()  # what building the log logged
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().out.splitlines()


def build_log(open_log: OpenLog, now_ms: int) -> PartitionLog:
    """Offset 0 a v1 message; 1-3 an idempotent zstd batch with headers (producer 42, leader
    epoch 5); 4 a v0 message; 5-6 a plain batch; the log closed, so a snapshot is written."""
    log = open_log()
    log.append(encode_message_set([(b"k0", b"v1 message", now_ms)]))
    log.append(
        encode_batch(
            [(b"k%d" % i, b"value %d" % i, now_ms + i, (("trace", b"t%d" % i), ("none", None)))
             for i in range(3)],
            codec=BatchCodec.ZSTD, producer_id=42, producer_epoch=3, base_sequence=0,
        ),
        leader_epoch=5,
    )
    log.append(encode_message_set([(b"k4", b"v0 message", -1)], magic=0))
    log.append(encode_batch([(b"k5", b"\xff binary", now_ms), (None, None, now_ms + 7)]))
    log.close()
    return log


def segment(log: PartitionLog, suffix: str = ".log") -> Path:
    return log.directory / f"{0:020d}{suffix}"


def test_batches_are_listed_beside_older_entries(
    open_log: OpenLog, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_log(open_log, clock.ms)
    status, lines = run(capsys, segment(log))
    assert status == 0
    entries = [line for line in lines if line.startswith(("offset:", "base_offset:"))]
    assert [line.split()[1] for line in entries] == ["0", "1", "4", "5"]
    assert "magic: 1" in entries[0] and "magic: 0" in entries[2]
    batch = entries[1]
    assert batch.startswith("base_offset: 1 last_offset: 3 position: ")
    for shown in ("valid: true magic: 2 codec: zstd timestamp_type: CreateTime",
                  f"base_timestamp: {clock.ms} max_timestamp: {clock.ms + 2} count: 3",
                  "producer_id: 42 producer_epoch: 3 base_sequence: 0",
                  "partition_leader_epoch: 5 transactional: false control: false"):
        assert shown in batch
    assert "producer_id: -1 producer_epoch: -1 base_sequence: -1" in entries[3]
    assert not any(line.startswith("  | ") for line in lines)  # records only with --deep
    assert lines[-2] == f"entries: 4 messages: 7 bytes: {segment(log).stat().st_size}"
    assert lines[-1] == "no damage"


def test_deep_lists_each_records_offset_timestamp_sizes_and_headers(
    open_log: OpenLog, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_log(open_log, clock.ms)
    status, lines = run(capsys, segment(log), "--deep")
    assert status == 0
    records = [line for line in lines if line.startswith("  | ")]
    assert records[0] == (f"  | offset: 1 timestamp: {clock.ms} key_size: 2 value_size: 7 "
                          "headers: trace=t0,none=null")
    assert [r.split()[2] for r in records] == ["1", "2", "3", "5", "6"]
    assert records[-1].endswith("key_size: -1 value_size: -1 headers: none")
    status, lines = run(capsys, segment(log), "--deep", "--print-data")
    records = [line for line in lines if line.startswith("  | ")]
    assert records[0].endswith("key: k0 value: value 0")
    assert records[3].endswith("key: k5 value: b'\\xff binary'")


def test_json_shows_every_batch_field_and_record(
    open_log: OpenLog, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_log(open_log, clock.ms)
    status, lines = run(capsys, segment(log), "--json", "--deep", "--print-data")
    assert status == 0
    rows = [json.loads(line) for line in lines]
    batches = [r for r in rows if r["kind"] == "batch"]
    assert [(b["base_offset"], b["last_offset"], b["count"]) for b in batches] == [
        (1, 3, 3), (5, 6, 2)]
    first = batches[0]
    assert (first["codec"], first["producer_id"], first["producer_epoch"],
            first["base_sequence"], first["partition_leader_epoch"], first["valid"]) == (
        "zstd", 42, 3, 0, 5, True)
    assert first["inner"][2] == {
        "kind": "record", "offset": 3, "timestamp": clock.ms + 2, "key_size": 2,
        "value_size": 7, "headers": [{"key": "trace", "value": "t2"},
                                     {"key": "none", "value": None}],
        "key": "k2", "value": "value 2"}
    assert batches[1]["inner"][0]["value_base64"]
    assert rows[-1]["messages"] == 7 and rows[-1]["damage"] is None


def test_a_batch_with_a_bad_crc_is_shown_and_the_dump_goes_on(
    open_log: OpenLog, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_log(open_log, clock.ms)
    path = segment(log)
    status, lines = run(capsys, path, "--json")
    rows = [json.loads(line) for line in lines]
    first = next(r for r in rows if r["kind"] == "batch")
    data = bytearray(path.read_bytes())
    data[first["position"] + first["size"] - 1] ^= 0x01  # a byte of the compressed records
    path.write_bytes(bytes(data))
    status, lines = run(capsys, path, "--json")
    assert status == 1
    rows = [json.loads(line) for line in lines]
    assert [r.get("base_offset", r.get("offset")) for r in rows[:-1]] == [0, 1, 4, 5]
    assert rows[1]["valid"] is False and rows[3]["valid"] is True
    assert rows[-1]["damage_position"] == first["position"]
    assert rows[-1]["damage"].startswith("CRC-32C mismatch in the batch at base offset 1")


def test_compacted_batches_show_their_gaps_and_empty_batches(
    open_log: OpenLog, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    log = open_log(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log.append(encode_batch([(b"a", b"1", clock.ms), (b"b", b"1", clock.ms)], producer_id=9,
                            producer_epoch=0, base_sequence=0))
    log.append(encode_batch([(b"a", b"2", clock.ms), (b"c", b"2", clock.ms)]))
    log.append(encode_batch([(b"b", b"3", clock.ms), (b"c", b"3", clock.ms)]))
    log.roll()
    assert log.compact()
    log.close()
    status, lines = run(capsys, segment(log), "--deep")
    assert status == 0
    batches = [line for line in lines if line.startswith("base_offset:")]
    # producer 9's last batch lost both records: its header stays, for the producer state
    assert batches[0].startswith("base_offset: 0 last_offset: 1 ")
    assert "count: 0 producer_id: 9" in batches[0]
    assert batches[1].startswith("base_offset: 2 last_offset: 3 ") and "count: 1" in batches[1]
    records = [line.split()[2] for line in lines if line.startswith("  | ")]
    assert records == ["2", "4", "5"]


def test_producer_state_snapshots(
    open_log: OpenLog, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_log(open_log, clock.ms)
    (snapshot,) = log.directory.glob("*.snapshot")
    status, lines = run(capsys, snapshot)
    assert status == 0
    assert lines[1].startswith("producer_id: 42 epoch: 3 last_sequence: 2 last_offset: 3 ")
    assert lines[2] == (f"  | first_sequence: 0 last_sequence: 2 first_offset: 1 "
                        f"last_offset: 3 timestamp: {clock.ms + 2}")
    assert lines[-2:] == [f"producers: 1 bytes: {snapshot.stat().st_size}", "no damage"]
    status, lines = run(capsys, snapshot, "--json")
    rows = [json.loads(line) for line in lines]
    assert rows[0]["kind"] == "producer" and rows[0]["batches"][0]["last_offset"] == 3
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    status, lines = run(capsys, snapshot)
    assert status == 1
    assert lines[-1].startswith("damage: ") and "CRC-32C" in lines[-1]
