"""What ``odradek console`` shows, as JSON-ready dicts read through the Admin client.

One ``GroupAdmin`` serves every page: call one method at a time (it drives its own sockets;
tooling/console/app.py holds a lock around each call). When the brokers cannot be reached a
call raises ``ConsoleUnavailable``; the admin is then made anew on the next call, so the console
recovers when a broker comes back, wherever the cluster's metadata had moved meanwhile. Each
group page asked for keeps a ``GroupView`` (client/group_view.py), whose timeline is the state
changes seen by the polls of its page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from client.group_admin import GroupAdmin
from client.group_view import GroupView, member_name, total_lag
from client.offsets import EARLIEST, LATEST
from client.records import TopicPartition
from client.security import SecurityOptions
from protocol.errors import (
    BrokerError,
    GroupIdNotFoundError,
    OdradekError,
    UnknownTopicOrPartitionError,
)
from tooling.cluster_health import cluster_health

T = TypeVar("T")
#: the most groups whose pages keep a timeline
MAX_GROUP_VIEWS = 100


class ConsoleUnavailable(Exception):
    """The brokers did not answer; the message says why."""


class NotFound(Exception):
    """No such topic or group."""


class ConsoleData:
    def __init__(self, bootstrap: str, *, timeout_ms: int,
                 security: SecurityOptions | None = None) -> None:
        """``security``: how to reach a secured listener (the clients' keyword arguments)."""
        self._bootstrap = bootstrap
        self._timeout_ms = timeout_ms
        self._security = security or SecurityOptions()
        self._admin: GroupAdmin | None = None
        self._views: dict[str, GroupView] = {}

    def close(self) -> None:
        self._drop_admin()

    def _call(self, ask: Callable[[GroupAdmin], T]) -> T:
        if self._admin is None:
            self._admin = GroupAdmin(self._bootstrap, timeout_ms=self._timeout_ms,
                                     **self._security)
        try:
            return ask(self._admin)
        except UnknownTopicOrPartitionError as exc:
            raise NotFound(str(exc)) from exc
        except BrokerError:
            raise
        except ConsoleUnavailable:
            self._drop_admin()
            raise
        except (OdradekError, OSError) as exc:
            self._drop_admin()
            raise ConsoleUnavailable(f"{type(exc).__name__}: {exc}") from exc

    def _drop_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    # --------------------------------------------------------------------------- pages

    def cluster(self) -> dict[str, Any]:
        health = self._call(lambda admin: cluster_health(admin.cluster_metadata()))
        return {
            "cluster_id": health.cluster_id,
            "controller": health.controller_id,
            "brokers": [{"id": b.node_id, "host": b.host, "port": b.port,
                         "controller": b.node_id == health.controller_id}
                        for b in health.brokers],
            "topics": len({p.topic for p in health.partitions}),
            "partitions": len(health.partitions),
            "offline_partitions": health.offline_partitions,
            "under_replicated_partitions": health.under_replicated_partitions,
        }

    def topics(self) -> list[dict[str, Any]]:
        def ask(admin: GroupAdmin) -> list[dict[str, Any]]:
            return [
                {"name": t.name, "internal": t.internal, "partitions": len(t.partitions),
                 "replication_factor": max((len(p.replicas) for p in t.partitions.values()),
                                           default=0),
                 "under_replicated": sum(len(p.isr) < len(p.replicas)
                                         for p in t.partitions.values())}
                for t in admin.describe_topics()
            ]

        return self._call(ask)

    def topic(self, name: str) -> dict[str, Any]:
        def ask(admin: GroupAdmin) -> dict[str, Any]:
            (info,) = admin.describe_topics([name])
            tps = [TopicPartition(name, p) for p in sorted(info.partitions)]
            earliest = admin.list_offsets(dict.fromkeys(tps, EARLIEST))
            latest = admin.list_offsets(dict.fromkeys(tps, LATEST))
            return {
                "name": name, "internal": info.internal,
                "partitions": [
                    {"partition": tp.partition, "leader": info.partitions[tp.partition].leader,
                     "replicas": list(info.partitions[tp.partition].replicas),
                     "isr": list(info.partitions[tp.partition].isr),
                     "earliest": earliest[tp].offset if tp in earliest else None,
                     "latest": latest[tp].offset if tp in latest else None}
                    for tp in tps
                ],
            }

        return self._call(ask)

    def groups(self) -> list[dict[str, Any]]:
        def ask(admin: GroupAdmin) -> list[dict[str, Any]]:
            out = []
            for listing in admin.list_groups():
                try:
                    group = admin.describe_group(listing.group_id)
                except GroupIdNotFoundError:
                    continue  # gone since ListGroups
                lag = admin.group_lag(group)
                out.append({
                    "group": group.group_id, "state": group.state,
                    "generation": group.generation, "members": len(group.members),
                    "coordinator": group.coordinator.node_id,
                    "lag": total_lag(lag),
                })
            return out

        return self._call(ask)

    def group(self, group_id: str) -> dict[str, Any]:
        def ask(admin: GroupAdmin) -> GroupView:
            view = self._views.get(group_id)
            if view is None:
                if len(self._views) >= MAX_GROUP_VIEWS:
                    self._views.pop(next(iter(self._views)))
                view = self._views[group_id] = GroupView(admin, group_id)
            view.admin = admin
            view.poll()
            snapshot = view.snapshot
            assert snapshot is not None
            if snapshot.error is not None:
                raise ConsoleUnavailable(snapshot.error)
            return view

        return group_json(self._call(ask))


def group_json(view: GroupView) -> dict[str, Any]:
    """The group page's JSON: the view's newest snapshot and its timeline."""
    snapshot = view.snapshot
    assert snapshot is not None, "poll() first"
    group = snapshot.group
    out: dict[str, Any] = {
        "group": snapshot.group_id, "exists": group is not None, "state": snapshot.state,
        "timeline": [{"at": e.at, "text": e.text(), "state": e.state} for e in view.timeline],
    }
    if group is None:
        return out
    out.update({
        "generation": group.generation, "strategy": group.strategy,
        "coordinator": {"id": group.coordinator.node_id, "host": group.coordinator.host,
                        "port": group.coordinator.port},
        "members": [
            {"member": member_name(group.group_id, m.member_id), "member_id": m.member_id,
             "client_id": m.client_id, "host": m.client_host,
             "partitions": [f"{tp.topic}-{tp.partition}" for tp in sorted(m.assignment)]}
            for m in group.members
        ],
        "partitions": [
            {"topic": p.partition.topic, "partition": p.partition.partition,
             "committed": None if p.committed is None else p.committed.offset,
             "log_end": p.log_end, "lag": p.lag,
             "owner": None if p.owner is None else member_name(group.group_id, p.owner)}
            for p in snapshot.lag
        ],
        "lag": snapshot.total_lag,
    })
    return out
