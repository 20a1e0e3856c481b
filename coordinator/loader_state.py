"""The offsets-partition loader machine: Down -> Catch-up -> Ready, and back to Down on resignation.

One machine per ``__consumer_offsets`` partition: a broker leads some partitions and not others,
and each loads on its own. ``REQUEST_ANSWER`` says how group requests are answered in each state.
"""

from __future__ import annotations

from enum import Enum

from protocol.errors import ErrorCode
from protocol.statemachine import IdentityHashed, Transition, TransitionTable


class LoaderState(IdentityHashed):
    DOWN = "Down"
    CATCH_UP = "Catch-up"
    READY = "Ready"


# seed 001 "Co-ordinator" states
STATE_DESCRIPTIONS: dict[LoaderState, str] = {
    LoaderState.DOWN: "Seed: \"the co-ordinator is dead or demoted\" (for this partition).",
    LoaderState.CATCH_UP: "Seed: \"the co-ordinator is elected but not ready to serve requests\".",
    LoaderState.READY:
        "Seed: \"has finished loading the group metadata for all groups that it is responsible "
        "for\".",
}


class LoaderEvent(Enum):
    BECAME_LEADER = "became leader"
    LOAD_FINISHED = "load finished"
    RESIGNED = "resigned"


_L = LoaderState
_E = LoaderEvent

LOADER_MACHINE: TransitionTable[LoaderState, LoaderEvent] = TransitionTable(
    "offsets partition",
    LoaderState.DOWN,
    LoaderState,
    LoaderEvent,
    [
        Transition(
            _L.DOWN, _E.BECAME_LEADER, _L.CATCH_UP,
            "this broker now leads the partition",
            "read the partition from its start (group and offset records)",
        ),
        Transition(
            _L.CATCH_UP, _E.LOAD_FINISHED, _L.READY,
            "every record up to the log end has been read",
            "rebuild groups and offsets; restart every member's session timer at load time; "
            "start a rebalance where the stored assignment no longer matches the topics; "
            "start the offsets-expiry timer",
        ),
        Transition(
            _L.CATCH_UP, _E.RESIGNED, _L.DOWN,
            "leadership lost while loading",
            "discard what was read",
        ),
        Transition(
            _L.READY, _E.RESIGNED, _L.DOWN,
            "leadership lost",
            "unload every group (-> Dead); held JoinGroups and unwritten commits get "
            "NOT_COORDINATOR; cancel the partition's timers",
        ),
    ],
)

# How a group request (join, heartbeat, leave, commit, offset fetch, describe, delete) for a
# group of this partition is answered before the group itself is looked at. NONE: handled.
REQUEST_ANSWER: dict[LoaderState, ErrorCode] = {
    LoaderState.DOWN: ErrorCode.NOT_COORDINATOR,
    LoaderState.CATCH_UP: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    LoaderState.READY: ErrorCode.NONE,
}
