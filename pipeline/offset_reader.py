"""The driver's view of what a read subscribes to: which partitions, and their offsets.

Runs where Spark plans (the driver), through one ``Admin`` client opened on first use. Problems
a user can fix in the options -- an unknown topic, a partition that does not exist, offsets
that do not fit the subscription -- raise ``OptionError`` naming the option.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client.admin import Admin
from client.offsets import EARLIEST, LATEST
from client.records import TopicPartition
from pipeline.options import (
    Assign,
    OffsetSpec,
    OptionError,
    ReadOptions,
    Subscribe,
    SubscribePattern,
)


class OffsetReader:
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._admin: Admin | None = None

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.options.bootstrap, client_id="odradek-spark",
                                **self.options.security.options())
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def partitions(self) -> list[TopicPartition]:
        """The topic partitions the subscription names today, sorted."""
        subscription = self.options.subscription
        topics = {info.name: info for info in self.admin.describe_topics()}
        if isinstance(subscription, SubscribePattern):
            # Like a Kafka consumer's pattern subscription, internal topics are left out.
            return sorted(
                TopicPartition(name, p)
                for name, info in topics.items()
                if not info.internal and subscription.matches(name)
                for p in info.partitions
            )
        wanted = (
            subscription.topics
            if isinstance(subscription, Subscribe)
            else tuple(dict.fromkeys(tp.topic for tp in subscription.partitions))
        )
        missing = [t for t in wanted if t not in topics]
        if missing:
            names = ", ".join(map(repr, missing))
            problem = (
                f"topic {names} does not exist" if len(missing) == 1
                else f"topics {names} do not exist"
            )
            raise OptionError(subscription.option, problem)
        if isinstance(subscription, Assign):
            for tp in subscription.partitions:
                count = len(topics[tp.topic].partitions)
                if tp.partition not in topics[tp.topic].partitions:
                    raise OptionError(
                        "assign", f"topic {tp.topic!r} has partitions 0..{count - 1}, not {tp}"
                    )
            return sorted(subscription.partitions)
        return sorted(TopicPartition(t, p) for t in wanted for p in topics[t].partitions)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: LATEST for tp in tps})

    def resolve(
        self, spec: OffsetSpec, tps: list[TopicPartition], option: str
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for ``tps`` from ``earliest``, ``latest`` or per-partition JSON,
        which must name exactly the subscribed partitions (-2 / -1 are looked up)."""
        if spec == "earliest":
            return self.earliest(tps)
        if spec == "latest":
            return self.latest(tps)
        assert isinstance(spec, Mapping)
        extra = sorted(spec.keys() - set(tps))
        if extra:
            raise OptionError(
                option, f"names {', '.join(map(str, extra))}, outside the subscription"
            )
        missing = sorted(set(tps) - spec.keys())
        if missing:
            raise OptionError(
                option,
                f"does not name {', '.join(map(str, missing))}; give every subscribed "
                "partition (-2 for earliest, -1 for latest)",
            )
        markers = {tp: when for tp, when in spec.items() if when in (EARLIEST, LATEST)}
        looked_up = self._list(markers)
        return {tp: looked_up.get(tp, offset) for tp, offset in spec.items()}

    def _list(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        return {tp: found.offset for tp, found in self.admin.list_offsets(specs).items()}
