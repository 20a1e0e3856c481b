"""A broker process with coordinator faults a test can trigger, loaded by the test harness only:
``python -m tests.coordinator_faults start ...`` runs ``python -m broker start ...`` after
wrapping the group driver, so no broker setting exists for tests.

Environment (``BrokerProcess(..., module=MODULE, env=...)``, or ``faulty_env``):

- ``COORDINATOR_FAULTS_SIGNALS=1``: SIGUSR1 makes the coordinator resign every
  ``__consumer_offsets`` partition, SIGUSR2 leads them again and reloads them from the log
  (seed 001 "Co-ordinator failure" by hand, on a single broker).
- ``COORDINATOR_FAULTS_PAUSE_AFTER=group_record`` or ``group_record_replicated``: a completed
  round's group record stops this process with SIGSTOP right after it is appended, or once the
  ISR has it and before the JoinGroups are answered -- while the file ``ARM_FILE`` exists in the
  data directory; the file is deleted, one stop per file. The test then kills it at that step
  (seed 001, coordinator failure during rebalance).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog
import trio

SIGNALS_ENV = "COORDINATOR_FAULTS_SIGNALS"
PAUSE_AFTER_ENV = "COORDINATOR_FAULTS_PAUSE_AFTER"
PAUSE_POINTS = ("group_record", "group_record_replicated")
#: in the broker's data directory: arms the next pause
ARM_FILE = "coordinator-test-pause"
MODULE = "tests.coordinator_faults"
RESIGN_SIGNAL = signal.SIGUSR1
LEAD_SIGNAL = signal.SIGUSR2

log = structlog.get_logger("odradek.tests.coordinator_faults")


def faulty_env(*, pause_after: str | None = None, signals: bool = False) -> dict[str, str]:
    """The environment that turns the faults on, for ``BrokerProcess(env=...)``."""
    if pause_after is not None and pause_after not in PAUSE_POINTS:
        raise ValueError(f"{pause_after!r} is not one of {PAUSE_POINTS}")
    env = {SIGNALS_ENV: "1"} if signals else {}
    if pause_after is not None:
        env[PAUSE_AFTER_ENV] = pause_after
    return env


def _data_dir(argv: list[str]) -> Path:
    for i, arg in enumerate(argv):
        if arg == "--data-dir":
            return Path(argv[i + 1])
        if arg.startswith("--data-dir="):
            return Path(arg.partition("=")[2])
    raise SystemExit("tests.coordinator_faults needs --data-dir")


def _pause(point: str, arm_file: Path, partition: int) -> None:
    try:
        arm_file.unlink()
    except FileNotFoundError:
        return  # not armed
    log.warning("coordinator.test_pause", point=point, partition=partition, pid=os.getpid())
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSTOP)
    log.warning("coordinator.test_resumed", point=point, partition=partition)


def _is_round(records: Any) -> bool:
    """A completed round's group record: a group record with members."""
    from coordinator.offsets_topic import (
        GroupKey,
        OffsetsRecordError,
        decode_group_value,
        decode_key,
    )
    try:
        return any(
            value is not None and isinstance(decode_key(key), GroupKey)
            and bool(decode_group_value(value).members)
            for key, value in records
        )
    except OffsetsRecordError:
        return False


def install_pause(point: str, arm_file: Path) -> None:
    from broker.group_driver import GroupDriver
    from coordinator import GroupCoordinator
    from protocol.errors import ErrorCode

    rounds: set[int] = set()  # append ids of round records, cluster mode (replicated first)
    append = GroupDriver._append
    append_done = GroupCoordinator.on_append_done

    def appended(self: GroupDriver, effect: Any) -> tuple[ErrorCode, int]:
        error, last_offset = append(self, effect)
        if error is ErrorCode.NONE and _is_round(effect.records):
            if self._replication is not None:
                rounds.add(effect.append_id)
            if point == "group_record":
                _pause(point, arm_file, effect.partition)
        return error, last_offset

    def done(self: GroupCoordinator, append_id: int, error: ErrorCode, now_ms: int) -> Any:
        if append_id in rounds:
            rounds.discard(append_id)
            if error is ErrorCode.NONE and point == "group_record_replicated":
                _pause(point, arm_file, -1)
        return append_done(self, append_id, error, now_ms)

    GroupDriver._append = appended  # type: ignore[method-assign]
    GroupCoordinator.on_append_done = done  # type: ignore[method-assign]


def install_signals() -> None:
    from broker.group_driver import GroupDriver

    run = GroupDriver.run

    async def obey(driver: GroupDriver, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(RESIGN_SIGNAL, LEAD_SIGNAL) as signals:
            task_status.started()
            async for signum in signals:
                resign = signum == RESIGN_SIGNAL
                log.info("coordinator.failover_signal", signal=signal.Signals(signum).name,
                         action="resign" if resign else "lead")
                for partition in range(driver.partitions):
                    (driver.resign if resign else driver.become_leader)(partition)

    async def run_and_obey(self: GroupDriver, *,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(obey, self)
            await nursery.start(run, self)
            task_status.started()

    GroupDriver.run = run_and_obey  # type: ignore[method-assign]


def main(argv: list[str], env: Mapping[str, str], broker_main: Callable[[list[str]], int]) -> int:
    point = env.get(PAUSE_AFTER_ENV)
    if point:
        if point not in PAUSE_POINTS:
            raise SystemExit(f"{PAUSE_AFTER_ENV}={point!r} is not one of {PAUSE_POINTS}")
        install_pause(point, _data_dir(argv) / ARM_FILE)
    if env.get(SIGNALS_ENV) == "1":
        install_signals()
    return broker_main(argv)


if __name__ == "__main__":
    from broker.__main__ import main as _broker_main

    sys.exit(main(sys.argv[1:], os.environ, _broker_main))
