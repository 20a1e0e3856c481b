"""A stand-in benchmark script for the orchestration tests: ``python -m tests.benchmarks.fake_area
MODE``. ``ok`` prints two JSON lines (and a line that is not JSON); ``fail`` prints one line,
then exits 3 with a message on stderr; ``hang`` prints one line with its PID, then sleeps;
``broker`` starts a real broker, prints one line with its PID, then sleeps until interrupted
(and stops the broker); ``needs-package`` stops on a package that is not installed."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.servers import start_odradek


def main(mode: str) -> int:
    if mode == "broker":
        with tempfile.TemporaryDirectory() as tmp, start_odradek(Path(tmp)) as broker:
            print(json.dumps({"bench": "produce", "msgs_per_s": 1.0, "broker": broker.pid}))
            sys.stdout.flush()
            time.sleep(60)  # a benchmark at work, until the suite stops it
        return 0
    first = {"bench": "producer", "messages": 10, "msgs_per_s": 100.0, "pid": os.getpid()}
    print(json.dumps(first))
    print("warming up", flush=True)
    if mode == "fail":
        print("the broker went away", file=sys.stderr)
        return 3
    if mode == "hang":
        time.sleep(60)
    if mode == "needs-package":
        import odradek_bench_no_such_package  # noqa: F401
    print(json.dumps({"bench": "consumer", "messages": 10, "msgs_per_s": 200.0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
