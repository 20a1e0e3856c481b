from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.log import LogConfig, PartitionLog
from tests.log.support import FakeClock, small_config


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PartitionLog]]:
    """Opens ``tmp_path/t-0`` (or ``directory``) with ``small_config(**changes)``."""
    opened: list[PartitionLog] = []

    def factory(
        directory: Path | None = None, config: LogConfig | None = None, **changes: object
    ) -> PartitionLog:
        log = PartitionLog.open(
            directory or tmp_path / "t-0", config or small_config(**changes), clock=clock
        )
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()
