"""A controller alone on the session's ZooKeeper, for the tests of its fenced writes: it writes
as the current controller, or after a rival was elected -- when the write must fail with
``NotControllerAnyMore``, leave ZooKeeper as it was, and the controller step down."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import trio
from kazoo.client import KazooClient

from broker.cluster import zk_layout as zk
from broker.cluster.controller import Controller, NotControllerAnyMore, try_to_become_controller
from broker.cluster.zookeeper import ZooKeeper
from broker.settings import BrokerSettings

T = TypeVar("T")


def fenced_write(
    settings: BrokerSettings,
    lay_out: Callable[[KazooClient], T],
    write: Callable[[Controller], Awaitable[object]],
    check: Callable[[ZooKeeper, T], Awaitable[None]],
    *,
    replaced: bool,
) -> None:
    """``lay_out`` the znodes (with broker 0's session), elect broker 0 controller, wait for its
    start-up, then ``write`` -- after broker 1 took over if ``replaced`` -- and ``check`` what
    ZooKeeper holds then, with what ``lay_out`` returned."""
    assert settings.zookeeper_connect is not None
    connect = settings.zookeeper_connect

    async def main() -> None:
        zoo = ZooKeeper(connect, session_timeout_ms=10_000, connection_timeout_ms=10_000)
        rival = ZooKeeper(connect, session_timeout_ms=10_000, connection_timeout_ms=10_000)
        await zoo.start()
        await rival.start()
        try:
            laid_out = await zoo.call(lay_out, zoo.kazoo)
            elected = await try_to_become_controller(zoo, 0)
            assert elected is not None
            controller = Controller(zoo, settings, 0, elected)
            stepped_down = trio.Event()

            async def serve() -> None:
                await controller.run()
                stepped_down.set()

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(serve)
                    assert await controller.elect_preferred(None) == []  # start-up is over
                    if not replaced:
                        await write(controller)
                        nursery.cancel_scope.cancel()
                    else:
                        # broker 1 is elected as if broker 0's session had expired
                        await rival.call(rival.kazoo.delete, zk.CONTROLLER)
                        assert await try_to_become_controller(rival, 1) is not None
                        with pytest.raises(NotControllerAnyMore, match="another controller"):
                            await write(controller)
                        await stepped_down.wait()
            await check(zoo, laid_out)
        finally:
            await rival.stop()
            await zoo.stop()

    trio.run(main)
