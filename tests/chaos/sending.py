"""What the campaign's producer processes share: their options, the file each appends its
sends' outcomes to, the pace, and SIGTERM (stop sending, settle what is in flight, exit).

Every value is an integer sent as text, unique in the run. One line per outcome, flushed at
once: the value, and the partition and offset the cluster acknowledged, or the error. A value
whose line is missing was in flight when the process was killed: its outcome is unknown, and
the checker never counts it as acknowledged.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

#: how a producer process runs: its options, where outcomes go, and whether to stop yet
Produce = Callable[[argparse.Namespace, "Outcomes", Callable[[], bool]], None]


@dataclass
class Outcomes:
    """The file of one producer's outcomes, and how many of its sends are unsettled."""

    out: IO[str]
    producer: str
    topic: str
    unsettled: int = 0

    def acked(self, value: int, partition: int, offset: int) -> None:
        self.unsettled -= 1
        self._line(value, partition=partition, acked=True, offset=offset, error=None)

    def failed(self, value: int, error: str, *, sent: bool = True) -> None:
        """A send that failed (``sent``: after it was handed to the client)."""
        self.unsettled -= sent
        self._line(value, partition=-1, acked=False, offset=None, error=error)

    def _line(self, value: int, **outcome: object) -> None:
        line = {"t": time.monotonic(), "producer": self.producer, "topic": self.topic,
                "value": str(value), **outcome}
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()


def main(description: str, produce: Produce) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--first", type=int, required=True, help="the first value sent")
    parser.add_argument("--rate", type=float, default=100.0, help="messages a second")
    parser.add_argument("--max-unsettled", type=int, default=500)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    with open(args.out, "a", encoding="utf-8") as out:
        produce(args, Outcomes(out, args.name, args.topic), lambda: stop)
    return 0


def paced(args: argparse.Namespace, outcomes: Outcomes, stopping: Callable[[], bool],
          send: Callable[[int], None], poll: Callable[[float], object],
          refused: tuple[type[BaseException], ...]) -> None:
    """``--first``, ``--first + 1``, ... at ``--rate`` a second until ``stopping()``, with no
    more than ``--max-unsettled`` in flight; ``poll`` runs the client meanwhile. A send
    raising one of ``refused`` was never sent: it fails at once."""
    value, interval = args.first, 1.0 / args.rate
    next_send = time.monotonic()
    while not stopping():
        now = time.monotonic()
        if now < next_send or outcomes.unsettled >= args.max_unsettled:
            poll(min(max(next_send - now, 0.001), 0.05))
            continue
        try:
            send(value)
            outcomes.unsettled += 1
        except refused as exc:
            outcomes.failed(value, f"{type(exc).__name__}: {exc}", sent=False)
        value += 1
        next_send = max(next_send + interval, now - 1.0)  # no burst to catch up
        poll(0)
