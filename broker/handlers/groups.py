"""Group APIs, until the coordinator is wired in: every one is refused with
COORDINATOR_NOT_AVAILABLE (retriable), so clients back off instead of failing."""

from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from protocol.errors import CoordinatorNotAvailableError
from protocol.wire import Request


async def coordinator_not_available(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    raise CoordinatorNotAvailableError(f"no group coordinator runs on broker {ctx.broker_id} yet")
