"""The single-threaded future: waiting drives I/O; callbacks run once, in order."""

from __future__ import annotations

import pytest

from client.errors import ClientTimeoutError, IllegalStateError
from client.future import Future


def test_result_drives_until_done() -> None:
    calls = []

    def drive(timeout: float) -> None:
        calls.append(timeout)
        if len(calls) == 3:
            future.succeed(42)

    future: Future[int] = Future(drive)
    assert future.result(timeout=10) == 42
    assert len(calls) == 3


def test_result_times_out_when_nothing_settles_it() -> None:
    future: Future[int] = Future(lambda timeout: None)
    with pytest.raises(ClientTimeoutError):
        future.result(timeout=0.01)


def test_a_pending_future_with_no_driver_cannot_be_waited_on() -> None:
    with pytest.raises(IllegalStateError):
        Future().result()


def test_callbacks_run_in_order_once_and_late_ones_at_once() -> None:
    seen = []
    future: Future[str] = Future()
    future.add_done_callback(lambda f: seen.append(("a", f.value)))
    future.add_done_callback(lambda f: seen.append(("b", f.value)))
    future.succeed("x")
    future.add_done_callback(lambda f: seen.append(("c", f.value)))
    assert seen == [("a", "x"), ("b", "x"), ("c", "x")]


def test_failure_is_raised_and_settling_twice_is_a_bug() -> None:
    future: Future[int] = Future()
    future.fail(ValueError("boom"))
    assert future.failed() and not future.succeeded()
    with pytest.raises(ValueError, match="boom"):
        future.result()
    with pytest.raises(IllegalStateError):
        future.succeed(1)
    with pytest.raises(IllegalStateError):
        _ = future.value


def test_a_timeout_left_over_from_a_deadline_is_named_readably() -> None:
    future: Future[int] = Future(lambda timeout: None)
    with pytest.raises(ClientTimeoutError) as raised:
        future.result(timeout=0.09349452899994048)
    assert str(raised.value) == "no result within 93 ms"
