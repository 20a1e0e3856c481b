"""Many ZooKeeper reads in one round trip: every request is sent before any answer is awaited.

Kafka regrets its per-partition ZooKeeper round trips (a controller failover with many
partitions took minutes, until KAFKA-5642 pipelined them); kazoo's ``*_async`` calls pipeline
the same way over the one session. No transaction: each read is independent, and a node that
is not there reads as None. Runs in a worker thread (``ZooKeeper.call``), like every blocking
kazoo call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

__all__ = ["delete_many", "get_many"]


def get_many(client: KazooClient, paths: Iterable[str],
             watch: Callable[[Any], None] | None = None
             ) -> dict[str, tuple[bytes, ZnodeStat] | None]:
    """Each path's data and stat, None where there is no node; ``watch`` is set on each."""
    pending = [(path, client.get_async(path, watch=watch)) for path in dict.fromkeys(paths)]
    found: dict[str, tuple[bytes, ZnodeStat] | None] = {}
    for path, result in pending:
        try:
            found[path] = result.get()
        except NoNodeError:
            found[path] = None
    return found


def delete_many(client: KazooClient, paths: Iterable[str]) -> None:
    """Delete each path (unversioned), those already gone included."""
    pending = [client.delete_async(path) for path in dict.fromkeys(paths)]
    for result in pending:
        with contextlib.suppress(NoNodeError):
            result.get()
