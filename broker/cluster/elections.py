"""How the controller picks a partition's leader: Kafka's PartitionLeaderElectionAlgorithms, as
pure functions of the partition's replicas, its ISR and which brokers may lead.

Kept apart from the model so each rule can be read, and tested, on its own -- Kafka regrets
the years its election logic was spread over callbacks (DESIGN "Cluster").

``eligible`` is always the brokers that are live and not shutting down. Seed 003: "followers
which are out of sync will NOT be eligible to become leader if the leader broker goes down",
so every algorithm but the unclean fallback of the offline one picks from the ISR. Each returns
None when nobody can lead.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = [
    "controlled_shutdown_leader",
    "offline_leader",
    "preferred_leader",
    "reassignment_leader",
    "shrink_isr",
]


def offline_leader(replicas: Sequence[int], isr: Collection[int], eligible: Collection[int],
                   *, unclean_allowed: bool = False) -> int | None:
    """The leader died (or there never was one): the first replica, in assignment order, that
    is eligible and in the ISR. With none, and unclean election allowed for the topic, the first
    eligible replica even though out of sync -- what the ISR had and it lacks is lost; the
    caller tells an unclean pick by its not being in ``isr``."""
    clean = next((r for r in replicas if r in isr and r in eligible), None)
    if clean is not None or not unclean_allowed:
        return clean
    return next((r for r in replicas if r in eligible), None)


def reassignment_leader(target: Sequence[int], isr: Collection[int], eligible: Collection[int],
                        current: int) -> int | None:
    """A reassignment finishes: the current leader stays if it is among the new replicas and
    eligible; else the first new replica that is eligible and in the ISR."""
    if current in target and current in eligible:
        return current
    return next((r for r in target if r in isr and r in eligible), None)


def preferred_leader(replicas: Sequence[int], isr: Collection[int],
                     eligible: Collection[int]) -> int | None:
    """Preferred election: the first replica, if it is eligible and in the ISR."""
    if replicas and replicas[0] in isr and replicas[0] in eligible:
        return replicas[0]
    return None


def controlled_shutdown_leader(replicas: Sequence[int], isr: Collection[int],
                               eligible: Collection[int], stopping: int) -> int | None:
    """``stopping`` asked to shut down: the first other replica in the ISR that is eligible
    (so not shutting down itself)."""
    return next((r for r in replicas if r != stopping and r in isr and r in eligible), None)


def shrink_isr(leader: int, isr: Sequence[int], live: Collection[int]) -> list[int]:
    """The ISR without its dead members -- never empty: with no live member it keeps the one
    most likely to hold the most, the last leader if it was in sync, else the last member, so
    that it can lead again when it comes back (no unclean election)."""
    last = [leader] if leader in isr else list(isr[-1:])
    return [r for r in isr if r in live] or last
