"""docs/mirroring.md's walk-through works as a new user would follow it: its shell blocks, in
order, as one script -- two ``odradek cluster up`` clusters (on the session's ZooKeeper, each in
a chroot of its own), a topic, a mirror, its status, the copy read back, and both clusters
down."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.broker_process import REPO_ROOT

DOC = REPO_ROOT / "docs" / "mirroring.md"
BASH = re.compile(r"^```bash\n(.*?)^```$", re.MULTILINE | re.DOTALL)
#: what a user does between starting the mirror and asking its status: wait until it caught
#: up (here a bounded loop, so the script's status output is the caught-up one)
CAUGHT_UP = """for _ in $(seq 1 240); do
    odradek mirror status --source "$A" --target "$B" --json | grep -q '"lag": 0' && break
    sleep 0.25
done
"""


def _walk_through() -> list[str]:
    section = DOC.read_text().split("## Walk-through", 1)[1].split("\n## ", 1)[0]
    return BASH.findall(section)


def test_the_walk_through_has_its_steps() -> None:
    script = "".join(_walk_through())
    for step in ("cluster up --dir a", "cluster up --dir b", "topics create orders",
                 "odradek mirror --source", "mirror status", "consume orders",
                 "kill -TERM $MIRROR", "cluster down --dir a", "cluster down --dir b"):
        assert step in script, step


@pytest.mark.cluster
@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_walk_through_runs(zookeeper, tmp_path: Path) -> None:
    chroot = f"{zookeeper.connect}/walk-{uuid.uuid4().hex[:8]}"
    blocks = []
    for block in _walk_through():
        block = re.sub(r"cluster up --dir (\w)", rf"cluster up --dir \1 --zookeeper {chroot}-\1",
                       block)
        if block.startswith("odradek mirror status"):
            block = CAUGHT_UP + block
        blocks.append(block)
    script = "set -e\n" + "\n".join(blocks)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO_ROOT)}
    try:
        run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, text=True,
                             capture_output=True, timeout=240)
    finally:
        for name in ("a", "b"):  # whatever the script left running, stopped by its record
            if (tmp_path / name / "cluster.json").exists():
                subprocess.run([sys.executable, "-m", "tooling.cli", "cluster", "down", "--dir",
                                str(tmp_path / name)], cwd=REPO_ROOT, capture_output=True,
                               timeout=60)
    print(run.stdout, run.stderr)
    assert run.returncode == 0
    # the status table: each partition committed to its end on both sides, 1,000 in all
    rows = re.findall(r"│ orders\s+│ (\d)\s+│ (\d+)\s+│ (\d+)\s+│ (\d+)\s+│ orders\s+│ (\d+)",
                      run.stdout)
    assert sorted(int(r[0]) for r in rows) == [0, 1, 2]
    assert all(r[1] == r[2] == r[4] and r[3] == "0" for r in rows), rows
    assert sum(int(r[1]) for r in rows) == 1000
    assert re.search(r"^1000$", run.stdout, re.MULTILINE)  # every message, read on b
    assert re.search(r"│ orders\s+│ retention_ms\s+│ 86400000\s+│ topic", run.stdout)
    assert "mirror: 1 topic from " in run.stderr
    assert "1,000 acknowledged and committed" in run.stderr
