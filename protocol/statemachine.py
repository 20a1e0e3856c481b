"""A state machine as data: a table of ``(state, event) -> next state`` rows, checked on every move.

h11's rule: every legal move is a row; anything the table does not list raises
``IllegalTransition`` naming the machine, the state and the event -- a bug in whoever moved it,
never silently ignored. Each row also carries the guard under which the code raises that event and
the effect it has, so docs/state-machines is generated from the same rows the code is checked by.

Here, in the sans-IO protocol package, because every side keeps such machines: the coordinator
(groups, offsets partitions), the controller (partitions, replicas), the broker's SASL sessions
and the client's group consumer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)


class IdentityHashed(Enum):
    """A machine's states or events, hashed by identity in C. Enum's own ``__hash__`` hashes the
    member's name in Python: a group's state and its offsets partition's are looked up in a
    table for every Heartbeat, 33,000 a second at full size (benchmarks/scale.py). Members are
    singletons compared by identity, so hashing by identity agrees with equality."""

    __hash__ = object.__hash__


class IllegalTransition(RuntimeError):
    """A move the machine's table does not list."""


@dataclass(frozen=True)
class Transition(Generic[S, E]):
    source: S
    event: E
    target: S
    guard: str = ""
    effect: str = ""


class TransitionTable(Generic[S, E]):
    """The rows of one machine, indexed by ``(state, event)``; at most one row per pair."""

    def __init__(
        self,
        name: str,
        initial: S,
        states: type[S],
        events: type[E],
        rows: Sequence[Transition[S, E]],
    ) -> None:
        self.name = name
        self.initial = initial
        self.states: tuple[S, ...] = tuple(states)
        self.events: tuple[E, ...] = tuple(events)
        self.rows: tuple[Transition[S, E], ...] = tuple(rows)
        self._index: dict[tuple[S, E], Transition[S, E]] = {}
        for row in self.rows:
            key = (row.source, row.event)
            if key in self._index:
                raise ValueError(f"{name}: two rows for {row.source.name} on {row.event.name}")
            self._index[key] = row

    def row(self, state: S, event: E) -> Transition[S, E]:
        try:
            return self._index[(state, event)]
        except KeyError:
            raise IllegalTransition(
                f"{self.name}: no transition from {state.name} on {event.name}"
            ) from None

    def next_state(self, state: S, event: E) -> S:
        return self.row(state, event).target
