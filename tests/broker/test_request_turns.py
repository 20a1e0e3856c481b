"""A connection's reader handles the requests it has already read back to back only for a
turn (``REQUEST_TURN_S``), then lets other tasks run: a burst of pipelined requests on some
connections (LeaveGroups, the heartbeats of rebalancing groups) no longer holds every other
connection's requests until the whole burst is through."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

import broker.connection
from broker.context import BrokerContext
from broker.handlers import HANDLERS
from broker.server import run_broker
from broker.settings import load_settings
from protocol.apis import ApiKey
from protocol.framing import FrameDecoder
from protocol.wire import encode_request

PIPELINED = 50


async def _handled_ticks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Pipeline PIPELINED ApiVersions requests on one connection, in one write; for each, the
    count of scheduler turns another task had taken when the broker handled it."""
    ticks = [0]
    handled: list[int] = []
    api_versions = HANDLERS[ApiKey.API_VERSIONS]

    async def counting(ctx: Any, request: Any) -> Any:
        handled.append(ticks[0])
        return await api_versions(ctx, request)

    monkeypatch.setitem(HANDLERS, ApiKey.API_VERSIONS, counting)
    settings = load_settings(env={}, overrides={
        "host": "127.0.0.1", "port": "0", "data_dir": str(tmp_path / "data")})
    listening: list[BrokerContext] = []
    started = trio.Event()

    def on_listening(ctx: BrokerContext) -> None:
        listening.append(ctx)
        started.set()

    async def ticker() -> None:
        while True:
            await trio.lowlevel.checkpoint()
            ticks[0] += 1

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_broker(settings, on_listening=on_listening))
            await started.wait()
            stream = await trio.open_tcp_stream("127.0.0.1", listening[0].port)
            frames = b"".join(encode_request(ApiKey.API_VERSIONS, 0, i, "turns", {})
                              for i in range(PIPELINED))
            nursery.start_soon(ticker)
            await stream.send_all(frames)
            decoder = FrameDecoder(1 << 20)
            answers = 0
            while answers < PIPELINED:
                decoder.receive_data(await stream.receive_some(1 << 16))
                while decoder.next_frame() is not None:
                    answers += 1
            await stream.aclose()
            nursery.cancel_scope.cancel()
    return handled


async def test_pipelined_requests_let_other_tasks_run_between_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker.connection, "REQUEST_TURN_S", 0.0)  # a turn of one request
    handled = await _handled_ticks(tmp_path, monkeypatch)
    assert len(handled) == PIPELINED
    # every request in a turn of its own: the other task ran between them (trio reverses a
    # batch's order at random, so two requests in a row may see the same count, never more)
    assert max(Counter(handled).values()) <= 2
    assert handled[-1] - handled[0] >= PIPELINED // 2


async def test_a_turn_takes_many_pipelined_requests_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker.connection, "REQUEST_TURN_S", 60.0)
    handled = await _handled_ticks(tmp_path, monkeypatch)
    assert len(handled) == PIPELINED
    # read together, handled in one or two turns (the read may split the burst once)
    assert len(set(handled)) <= 2
