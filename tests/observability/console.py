"""``odradek console`` as a child process on a free 127.0.0.1 port, stopped by its PID."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

from tests.observability.terminal import REPO_ROOT

START_TIMEOUT = 20.0


class ConsoleProcess:
    def __init__(self, bootstrap: str, *args: str) -> None:
        """``args``: more options (``--command-config FILE``)."""
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tooling.cli", "console", "--bootstrap", bootstrap,
             "--listen", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env)
        self.stderr: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._collect, args=(self.process.stderr,), daemon=True).start()
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", first[0] if first else "")
        if found is None:
            self.stop()
            raise AssertionError(f"the console did not start: {first} {''.join(self.stderr)}")
        self.url = found[1]

    def _collect(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.stderr.append(line)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(10)
