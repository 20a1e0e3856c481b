from __future__ import annotations

from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager
from broker.log.manager import DataDirectoryInUseError
from tests.log.support import FakeClock, plain, read_all, small_config


@pytest.fixture
def manager(tmp_path: Path, clock: FakeClock):
    m = LogManager(tmp_path / "data", small_config(), clock=clock)
    yield m
    m.close()


def test_creates_and_reopens_partition_directories(tmp_path: Path, clock: FakeClock) -> None:
    first = LogManager(tmp_path / "data", small_config(), clock=clock)
    first.get_or_create("my-topic", 0).append(plain(b"k", b"v"))
    first.get_or_create("my-topic", 1)
    first.get_or_create("other", 3)
    first.close()
    assert (tmp_path / "data" / "my-topic-0").is_dir()
    (tmp_path / "data" / "not-a-partition").mkdir()
    second = LogManager(tmp_path / "data", small_config(), clock=clock)
    assert second.partitions() == [("my-topic", 0), ("my-topic", 1), ("other", 3)]
    reopened = second.get("my-topic", 0)
    assert reopened is not None and reopened.log_end_offset == 1
    assert second.get("my-topic", 2) is None
    second.close()


def test_get_or_create_returns_the_same_log(manager: LogManager) -> None:
    assert manager.get_or_create("t", 0) is manager.get_or_create("t", 0)


def test_bad_topic_names_are_refused(manager: LogManager) -> None:
    for topic in ("", "a/b", ".."):
        with pytest.raises(ValueError, match="topic"):
            manager.get_or_create(topic, 0)


def test_delete_removes_the_directory(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    log.append(plain(b"k", b"v"))
    assert manager.delete("t", 0)
    assert not (manager.data_dir / "t-0").exists()
    assert manager.get("t", 0) is None
    assert not manager.delete("t", 0)


def test_an_interrupted_deletion_is_finished_at_start(tmp_path: Path, clock: FakeClock) -> None:
    leftover = tmp_path / "data" / "t-0.deleting"
    leftover.mkdir(parents=True)
    (leftover / f"{0:020d}.log").write_bytes(b"")
    manager = LogManager(tmp_path / "data", small_config(), clock=clock)
    assert manager.partitions() == [] and not leftover.exists()
    manager.close()


def test_a_data_directory_serves_one_manager(manager: LogManager, clock: FakeClock) -> None:
    with pytest.raises(DataDirectoryInUseError):
        LogManager(manager.data_dir, small_config(), clock=clock)


def test_topic_configs(manager: LogManager) -> None:
    compact = small_config(cleanup_policy="compact")
    log = manager.get_or_create("offsets", 0, compact)
    assert log.config.compacted
    assert manager.get_or_create("offsets", 1).config.compacted
    manager.set_topic_config("offsets", small_config())
    assert not log.config.compacted


def test_maintenance_flushes_deletes_and_compacts(manager: LogManager, clock: FakeClock) -> None:
    old = clock.ms - 10 * 3600 * 1000
    deleting = manager.get_or_create("d", 0, small_config(segment_bytes=512, retention_ms=3600_000))
    compacting = manager.get_or_create(
        "c",
        0,
        small_config(segment_bytes=512, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0),
    )
    flushing = manager.get_or_create("f", 0, small_config(flush_ms=1000))
    for i in range(30):
        deleting.append(plain(b"k", b"v" * 20, old))
        compacting.append(plain(b"k%d" % (i % 2), b"v" * 20, clock.ms))
    flushing.append(plain(b"k", b"v"))
    clock.advance(2)
    result = manager.run_maintenance()
    assert result.flushed == 1 and result.compacted == 1 and result.segments_deleted > 0
    assert deleting.log_start_offset > 0
    assert len(read_all(compacting)) < 30
    assert manager.run_maintenance().flushed == 0


def test_the_default_config_is_used_for_unknown_topics(tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "data", LogConfig(segment_bytes=12345))
    try:
        assert manager.get_or_create("t", 0).config.segment_bytes == 12345
    finally:
        manager.close()


def test_a_failing_partition_does_not_stop_the_others(
    manager: LogManager, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = manager.get_or_create("a", 0, small_config(cleanup_policy="compact"))
    kept = manager.get_or_create("b", 0, small_config(segment_bytes=512, retention_ms=1000))

    def fail(now: float | None = None) -> bool:
        raise OSError("disk trouble")

    monkeypatch.setattr(broken, "compact", fail)
    for _ in range(30):
        kept.append(plain(b"k", b"v" * 20, clock.ms - 10_000))
    assert manager.run_maintenance().segments_deleted > 0
