"""A broker whose TLS files cannot be read says which setting names them, and does not start:
no traceback to decode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import REPO_ROOT
from tests.security.support import make_tls_files


@pytest.mark.parametrize("setting", ["ssl_certfile", "ssl_keyfile", "ssl_cafile"])
def test_an_unreadable_tls_file_is_named_by_its_setting(tmp_path: Path, setting: str):
    tls = make_tls_files(tmp_path / "tls")
    files = {"ssl_certfile": tls.server, "ssl_keyfile": tls.server, "ssl_cafile": tls.ca,
             setting: tmp_path / "missing.pem"}
    config = tmp_path / "broker.toml"
    config.write_text('listeners = "SSL://127.0.0.1:0"\n' + "".join(
        f'{name} = "{path}"\n' for name, path in files.items()))
    started = subprocess.run(
        [sys.executable, "-m", "broker", "start", "--data-dir", str(tmp_path / "data"),
         "--config", str(config)], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert started.returncode == 1
    assert f"{setting}={tmp_path / 'missing.pem'}" in started.stderr
    assert "Traceback" not in started.stderr
