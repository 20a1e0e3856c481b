"""The high watermark of replicated logs: ``replication-offset-checkpoint`` in the data
directory, written by ``LogManager`` and read back when it opens the logs. A single broker's logs
keep following their log end offsets, and the file is neither written nor read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log import CorruptCheckpointError, LogManager, PartitionLog
from broker.log.layout import REPLICATION_OFFSET_CHECKPOINT, read_checkpoint, write_checkpoint
from tests.log.support import FakeClock, crash_copy, message_set, plain, small_config


def _fill(log: PartitionLog, count: int) -> None:
    log.append(message_set([(b"k", b"v", 0)] * count))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def managers() -> Iterator[list[LogManager]]:
    """Managers the test opens (``managers.append(...)``), closed at the end."""
    opened: list[LogManager] = []
    yield opened
    for manager in opened:
        manager.close()


def _open(managers: list[LogManager], data_dir: Path, **kwargs: object) -> LogManager:
    manager = LogManager(data_dir, small_config(), clock=FakeClock(), **kwargs)  # type: ignore[arg-type]
    managers.append(manager)
    return manager


def _checkpoint(data_dir: Path) -> str:
    return (data_dir / REPLICATION_OFFSET_CHECKPOINT).read_text("ascii")


# ------------------------------------------------------------------------------ single broker


def test_a_single_broker_follows_the_log_end_and_writes_no_checkpoint(
    managers: list[LogManager], data_dir: Path
) -> None:
    manager = _open(managers, data_dir)
    log = manager.get_or_create("t", 0)
    _fill(log, 5)
    assert not log.replicated and log.high_watermark == 5
    assert not manager.run_maintenance().high_watermarks_checkpointed
    assert not manager.checkpoint_high_watermarks()
    manager.close()
    assert not (data_dir / REPLICATION_OFFSET_CHECKPOINT).exists()


def test_a_single_broker_ignores_a_checkpoint_left_by_a_cluster(
    managers: list[LogManager], data_dir: Path
) -> None:
    _fill(_open(managers, data_dir).get_or_create("t", 0), 5)
    managers.pop().close()
    write_checkpoint(data_dir / REPLICATION_OFFSET_CHECKPOINT, [("t", 0, 2)])
    log = _open(managers, data_dir).get("t", 0)
    assert log is not None and log.high_watermark == 5
    _fill(log, 1)
    assert log.high_watermark == 6


# --------------------------------------------------------------------------------- replicated


def test_replicated_logs_start_at_their_checkpointed_high_watermark(
    managers: list[LogManager], data_dir: Path
) -> None:
    manager = _open(managers, data_dir, replicated=True)
    assert manager.replicated
    first, second = manager.get_or_create("t", 0), manager.get_or_create("t", 1)
    manager.get_or_create("other", 7)
    assert first.replicated and first.high_watermark == 0
    _fill(first, 5)
    _fill(second, 8)
    assert first.high_watermark == 0  # moves only when set
    first.high_watermark = 3
    second.high_watermark = 8
    manager.close()
    assert _checkpoint(data_dir) == "0\n3\nother 7 0\nt 0 3\nt 1 8\n"
    reopened = _open(managers, data_dir, replicated=True)
    first, second = reopened.get_or_create("t", 0), reopened.get_or_create("t", 1)
    assert (first.high_watermark, second.high_watermark) == (3, 8)
    _fill(first, 2)
    assert first.high_watermark == 3


def test_without_a_checkpoint_the_high_watermark_starts_at_the_log_start(
    managers: list[LogManager], data_dir: Path
) -> None:
    """Kafka's choice: a replica that cannot say what was committed says nothing was, until
    the leader tells it more; consumers wait, they never see what may be truncated."""
    manager = _open(managers, data_dir)
    _fill(manager.get_or_create("t", 0), 5)
    managers.pop().close()
    log = _open(managers, data_dir, replicated=True).get("t", 0)
    assert log is not None and log.high_watermark == 0


def test_a_checkpoint_past_the_log_end_is_clamped(
    managers: list[LogManager], data_dir: Path, tmp_path: Path
) -> None:
    manager = _open(managers, data_dir, replicated=True)
    log = manager.get_or_create("t", 0)
    log.append(plain(b"a", b"1"))
    size = log.size_bytes()
    log.append(plain(b"b", b"2"))
    log.high_watermark = 2
    manager.checkpoint_high_watermarks()
    crashed = tmp_path / "crashed"
    crash_copy(log.directory, crashed / "t-0")
    (crashed / REPLICATION_OFFSET_CHECKPOINT).write_bytes(
        (data_dir / REPLICATION_OFFSET_CHECKPOINT).read_bytes()
    )
    with open(crashed / "t-0" / f"{0:020d}.log", "r+b") as f:
        f.truncate(size + 10)  # the second message never reached the disk
    log = _open(managers, crashed, replicated=True).get("t", 0)
    assert log is not None and (log.log_end_offset, log.high_watermark) == (1, 1)


def test_the_checkpoint_is_written_by_maintenance_only_when_it_changed(
    managers: list[LogManager], data_dir: Path
) -> None:
    manager = _open(managers, data_dir, replicated=True)
    log = manager.get_or_create("t", 0)
    _fill(log, 4)
    assert manager.run_maintenance().high_watermarks_checkpointed
    assert _checkpoint(data_dir) == "0\n1\nt 0 0\n"
    stamp = (data_dir / REPLICATION_OFFSET_CHECKPOINT).stat().st_mtime_ns
    assert not manager.run_maintenance().high_watermarks_checkpointed
    log.high_watermark = 4
    assert manager.run_maintenance().high_watermarks_checkpointed
    assert _checkpoint(data_dir) == "0\n1\nt 0 4\n"
    assert (data_dir / REPLICATION_OFFSET_CHECKPOINT).stat().st_mtime_ns >= stamp


def test_a_deleted_partition_leaves_the_checkpoint(
    managers: list[LogManager], data_dir: Path
) -> None:
    manager = _open(managers, data_dir, replicated=True)
    log = manager.get_or_create("t", 0)
    _fill(log, 4)
    log.high_watermark = 4
    manager.get_or_create("t", 1)
    manager.checkpoint_high_watermarks()
    assert manager.delete("t", 0)
    assert _checkpoint(data_dir) == "0\n1\nt 1 0\n"
    made_anew = manager.get_or_create("t", 0)
    _fill(made_anew, 2)
    assert made_anew.high_watermark == 0


def test_a_damaged_checkpoint_is_ignored_and_rewritten(
    managers: list[LogManager], data_dir: Path
) -> None:
    manager = _open(managers, data_dir, replicated=True)
    _fill(manager.get_or_create("t", 0), 4)
    managers.pop().close()
    (data_dir / REPLICATION_OFFSET_CHECKPOINT).write_text("0\n2\nt 0 4\n")
    manager = _open(managers, data_dir, replicated=True)
    log = manager.get("t", 0)
    assert log is not None and log.high_watermark == 0
    assert manager.checkpoint_high_watermarks()
    assert _checkpoint(data_dir) == "0\n1\nt 0 0\n"


def test_a_topic_name_that_cannot_be_written_is_left_out(
    managers: list[LogManager], data_dir: Path
) -> None:
    manager = _open(managers, data_dir, replicated=True)
    manager.get_or_create("a b", 0)
    manager.get_or_create("t", 0)
    assert manager.checkpoint_high_watermarks()
    assert _checkpoint(data_dir) == "0\n1\nt 0 0\n"


def test_retention_keeps_what_is_above_the_high_watermark(
    managers: list[LogManager], data_dir: Path
) -> None:
    """Followers may still need it: Kafka deletes only below the high watermark."""
    manager = _open(managers, data_dir, replicated=True)
    log = manager.get_or_create("t", 0)
    log.reconfigure(small_config(segment_bytes=200, retention_bytes=1))
    for i in range(8):
        log.append(plain(b"k%d" % i, b"v" * 40))  # two entries a segment
    assert log.segment_base_offsets == (0, 2, 4, 6)
    assert log.enforce_retention() == 0
    log.high_watermark = 3
    assert log.enforce_retention() == 1 and log.log_start_offset == 2
    log.high_watermark = 8
    assert log.enforce_retention() == 2 and log.log_start_offset == 6


def test_truncation_clamps_a_replicated_high_watermark(
    managers: list[LogManager], data_dir: Path
) -> None:
    log = _open(managers, data_dir, replicated=True).get_or_create("t", 0)
    _fill(log, 10)
    log.high_watermark = 9
    assert log.truncate_to(6) == 6 and log.high_watermark == 6
    log.truncate_fully_and_start_at(40)
    assert log.high_watermark == 40
    _fill(log, 3)
    assert log.high_watermark == 40


# ------------------------------------------------------------------------------- the format


def test_checkpoint_files_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    write_checkpoint(path, [("t", 0, 12), ("__consumer_offsets", 15, 0)])
    assert path.read_text() == "0\n2\nt 0 12\n__consumer_offsets 15 0\n"
    assert read_checkpoint(path, 3) == [["t", "0", "12"], ["__consumer_offsets", "15", "0"]]
    assert read_checkpoint(tmp_path / "missing", 3) is None
    write_checkpoint(path, [])
    assert path.read_text() == "0\n0\n" and read_checkpoint(path, 3) == []


@pytest.mark.parametrize("field", ["a b", "", "a\nb", "tab\there"])
def test_fields_with_whitespace_cannot_be_written(tmp_path: Path, field: str) -> None:
    with pytest.raises(ValueError, match="non-empty words"):
        write_checkpoint(tmp_path / "checkpoint", [(field, 0, 1)])


@pytest.mark.parametrize("data", [b"1\n0\n", b"\xff\xfe\n", b"0\n1\nt 0\n", b"0\n-\n"])
def test_damaged_checkpoint_files_are_named(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError, match="checkpoint"):
        read_checkpoint(path, 3)
