"""``odradek log dump`` on files built by hand from seed 000's on-disk format."""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from broker.log.dump import main
from tests.kafka_format import fixtures


def message(
    offset: int, key: bytes | None, value: bytes | None, *, timestamp: int = 0, attributes: int = 0
) -> bytes:
    """One entry, field by field as seed 000 §5.5 lists them: offset (8), message length (4),
    crc (4), magic (1), attributes (1), timestamp (8), key length (4), key, value length (4),
    value."""
    body = (
        struct.pack(">b", 1)
        + struct.pack(">b", attributes)
        + struct.pack(">q", timestamp)
        + struct.pack(">i", -1 if key is None else len(key))
        + (key or b"")
        + struct.pack(">i", -1 if value is None else len(value))
        + (value or b"")
    )
    crc = zlib.crc32(body)
    return (
        struct.pack(">q", offset) + struct.pack(">i", 4 + len(body)) + struct.pack(">I", crc) + body
    )


def build_segment(directory: Path) -> tuple[Path, list[int]]:
    """Offsets 0 and 1 plain, 2-4 in a gzip wrapper, 5 plain with a null value; returns the
    path and each entry's position."""
    inner = b"".join(
        message(i, b"in%d" % i, b"inner value %d" % i, timestamp=200 + i) for i in range(3)
    )
    entries = [
        message(0, b"key0", b"hello", timestamp=100),
        message(1, None, b"\xff\xfe binary", timestamp=101),
        message(4, None, gzip.compress(inner), timestamp=202, attributes=1),
        message(5, b"key5", None, timestamp=300),
    ]
    path = directory / f"{0:020d}.log"
    path.write_bytes(b"".join(entries))
    positions = [sum(len(e) for e in entries[:i]) for i in range(len(entries))]
    return path, positions


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    status = main(list(argv))
    return status, capsys.readouterr().out.splitlines()


def test_dump_lists_every_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, positions = build_segment(tmp_path)
    status, lines = run(capsys, str(path))
    assert status == 0
    entries = [line for line in lines if line.startswith("offset:")]
    assert len(entries) == 4
    assert entries[0].startswith(f"offset: 0 position: {positions[0]} size: {positions[1]} crc: 0x")
    assert (
        "valid: true magic: 1 codec: none timestamp_type: CreateTime timestamp: 100" in entries[0]
    )
    assert entries[0].endswith("key_size: 4 value_size: 5")
    assert f"offset: 4 position: {positions[2]}" in entries[2]
    assert "codec: gzip" in entries[2] and "timestamp: 202" in entries[2]
    assert entries[3].endswith("key_size: 4 value_size: -1")
    assert "key:" not in "\n".join(lines)
    assert lines[-2] == f"entries: 4 messages: 6 bytes: {path.stat().st_size}"
    assert lines[-1] == "no damage"


def test_print_data_and_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = build_segment(tmp_path)
    status, lines = run(capsys, str(path), "--print-data", "--deep")
    assert status == 0
    text = "\n".join(lines)
    assert "key: key0 value: hello" in text
    assert "key: null value: b'\\xff\\xfe binary'" in text
    inner = [line for line in lines if line.startswith("  | ")]
    assert [line.split()[2] for line in inner] == ["2", "3", "4"]  # absolute offsets
    assert "key: in0 value: inner value 0" in inner[0] and "timestamp: 200" in inner[0]
    assert all("valid: true" in line for line in inner)


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, positions = build_segment(tmp_path)
    status, lines = run(capsys, str(path), "--json", "--deep", "--print-data")
    assert status == 0
    records = [json.loads(line) for line in lines]
    entries = [r for r in records if r["kind"] == "entry"]
    assert [e["offset"] for e in entries] == [0, 1, 4, 5]
    assert [e["position"] for e in entries] == positions
    assert entries[1]["value_base64"] and entries[1]["key"] is None
    assert [m["offset"] for m in entries[2]["inner"]] == [2, 3, 4]
    assert entries[3]["value"] is None
    assert records[-1] == {
        "kind": "summary",
        "file": str(path),
        "entries": 4,
        "messages": 6,
        "bytes": path.stat().st_size,
        "damage_position": None,
        "damage": None,
    }


def test_a_bad_crc_is_shown_and_the_dump_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, positions = build_segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[positions[1] - 1] ^= 0x20  # last value byte of the first entry
    path.write_bytes(bytes(data))
    status, lines = run(capsys, str(path))
    assert status == 1
    entries = [line for line in lines if line.startswith("offset:")]
    assert "valid: false" in entries[0] and all("valid: true" in e for e in entries[1:])
    assert lines[-1].startswith(f"damage starts at position {positions[0]}: CRC mismatch")


@pytest.mark.parametrize("kind", ["truncated", "garbage"])
def test_a_damaged_tail_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path, positions = build_segment(tmp_path)
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: positions[3] + 20])
    else:
        path.write_bytes(data[: positions[3]] + b"\x00" * 8 + b"\x00\x00\x00\x02" + b"junk" * 4)
    status, lines = run(capsys, str(path), "--json")
    assert status == 1
    records = [json.loads(line) for line in lines]
    assert [r["offset"] for r in records if r["kind"] == "entry"] == [0, 1, 4]
    assert records[-1]["damage_position"] == positions[3]


def test_index_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _path, positions = build_segment(tmp_path)
    index = tmp_path / f"{0:020d}.index"
    index.write_bytes(struct.pack(">II", 1, positions[1]) + struct.pack(">II", 4, positions[2]))
    status, lines = run(capsys, str(index))
    assert status == 0
    assert lines[1:3] == [
        f"offset: 1 position: {positions[1]}",
        f"offset: 4 position: {positions[2]}",
    ]
    # An entry pointing at the wrong place, and a torn last entry.
    index.write_bytes(struct.pack(">II", 1, positions[2]) + b"\x00\x00\x00")
    status, lines = run(capsys, str(index))
    assert status == 1
    assert "error: the log has offset 4" in lines[1]
    assert lines[-1].startswith("damage starts at position 0")
    time_index = tmp_path / f"{0:020d}.timeindex"
    time_index.write_bytes(struct.pack(">qI", 101, 1) + struct.pack(">qI", 202, 4))
    status, lines = run(capsys, str(time_index))
    assert status == 0 and lines[1:3] == ["timestamp: 101 offset: 1", "timestamp: 202 offset: 4"]


def test_unknown_files_and_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    assert main([str(tmp_path / "notes.txt")]) == 2
    assert main([str(tmp_path / f"{0:020d}.log")]) == 2
    assert "No such file" in capsys.readouterr().err


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` with this checkout's code, its output captured."""
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def test_runs_as_a_module(tmp_path: Path) -> None:
    path, _ = build_segment(tmp_path)
    done = run_module("broker.log.dump", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["messages"] == 6


def test_deep_on_kafkas_compressed_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """xerial snappy v0 and v1, gzip v0 at 100..102, lz4 v0 with the KAFKA-3160 header checksum
    and lz4 v1 over 64 KiB, as a Kafka broker stores them one after the other."""
    sets = fixtures()
    path = tmp_path / f"{97:020d}.log"
    path.write_bytes(b"".join(f.data for f in sets))
    status, lines = run(capsys, str(path), "--deep", "--json")
    assert status == 0
    records = [json.loads(line) for line in lines if line.startswith("{")]
    entries = [r for r in records if r["kind"] == "entry"]
    assert [(e["offset"], e["magic"], e["codec"]) for e in entries] == [
        (99, 0, "snappy"), (102, 0, "gzip"), (105, 0, "lz4"), (108, 1, "snappy"), (111, 1, "lz4")
    ]
    assert [[m["offset"] for m in e["inner"]] for e in entries] == [
        [o for o, _, _ in f.messages] for f in sets
    ]
    assert all(m["valid"] for e in entries for m in e["inner"])
    assert records[-1]["messages"] == 15 and records[-1]["damage"] is None
    done = run_module("tooling.cli", "log", "dump", "--deep", str(path))  # `odradek log dump`
    assert done.returncode == 0, done.stderr
    inner = [line.split()[2] for line in done.stdout.splitlines() if line.startswith("  | ")]
    assert inner == [str(o) for o in range(97, 112)]
