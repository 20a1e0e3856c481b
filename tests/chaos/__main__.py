"""``python -m tests.chaos --seed 1 [--seed 2 ...] [--faults 8] [--brokers 3] [--zookeepers 3]
[--hosts] [--out DIR]``:
chaos runs, one per seed, each checked when it ends; exits 1 if any run shows a violation.

One seed reproduces one run's schedule of faults. Each run's directory (``DIR/seed-N``) keeps
its history, its clients' files and the brokers' logs, for ``python -m tests.chaos.checker``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tests.chaos.campaign import Campaign, Config
from tests.chaos.checker import check


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, action="append", required=True,
                        help="one run per seed (repeat the option for several)")
    parser.add_argument("--faults", type=int, default=8, help="faults per run (8)")
    parser.add_argument("--brokers", type=int, default=3, help="brokers (3; at most 5)")
    parser.add_argument("--zookeepers", type=int, default=3,
                        help="servers in the ZooKeeper ensemble (3)")
    parser.add_argument("--hosts", action="store_true",
                        help="each broker and ZooKeeper server on a host of its own: network "
                        "namespaces on a private bridge (needs root)")
    parser.add_argument("--mean-gap-s", type=float, default=3.0,
                        help="mean seconds between fault starts (3)")
    parser.add_argument("--out", type=Path, help="where run directories go (a new temporary "
                        "directory by default)")
    args = parser.parse_args()
    if not 3 <= args.brokers <= 5:
        parser.error("--brokers must be 3 to 5 (topics have 3 replicas)")
    out = args.out or Path(tempfile.mkdtemp(prefix="odradek-chaos-"))
    failed = 0
    for seed in args.seed:
        run_dir = out / f"seed-{seed}"
        began = time.monotonic()
        print(f"seed {seed}: {args.faults} faults on {args.brokers} brokers, in {run_dir}",
              flush=True)
        config = Config(seed=seed, faults=args.faults, brokers=args.brokers,
                        zookeepers=args.zookeepers, hosts=args.hosts,
                        mean_gap_s=args.mean_gap_s,
                        log=lambda line: print(line, flush=True))
        try:
            Campaign(config, run_dir).run()
        except Exception:  # the run could not finish: a finding too; the next seed runs
            traceback.print_exc()
            print(f"seed {seed}: the run did not finish", flush=True)
            failed += 1
            continue
        report = check(run_dir)
        print(report.render(), flush=True)
        print(f"seed {seed}: {time.monotonic() - began:.0f} s", flush=True)
        print(f"seed {seed}: {report.to_json()}", flush=True)
        failed += not report.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
