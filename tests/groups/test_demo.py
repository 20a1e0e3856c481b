"""``odradek demo`` from start to end: its own broker, the narration, the cleanup."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.broker_process import REPO_ROOT

pytestmark = pytest.mark.integration


def test_the_demo_narrates_a_rebalance_and_cleans_up(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", "demo", "--phase-seconds", "0.5"],
        capture_output=True, text=True, timeout=100, env=env, cwd=REPO_ROOT,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    started = re.search(r"broker started in (\S+) \(pid (\d+)\)", out)
    assert started, out
    for member in ("c1", "c2", "c3"):
        assert re.search(rf"{member}\s+Start up & discover coordinator -> Part of a group", out)
    assert "stopping c3" in out and re.search(r"c3\s+Part of a group -> Down", out)
    assert re.search(r"c1\s+Part of a group -> Stopped consumption", out)
    again = out.split("starting c3 again", 1)[1]
    assert re.search(r"group\s+Steady, generation \d+, 3 member\(s\)", again)
    assert "lag" in out and "demo-group" in out  # the describe table at the end
    assert "broker stopped" in out
    # Everything it started is gone: the broker process and its temporary directory.
    assert not os.path.exists(started[1])
    with pytest.raises(ProcessLookupError):
        os.kill(int(started[2]), 0)
