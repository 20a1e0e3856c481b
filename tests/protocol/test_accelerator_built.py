"""The install built the C accelerator (protocol._speedups) and it is in use, unless
ODRADEK_PURE_PYTHON=1 asks for the pure-Python code: a build that failed silently (setup.py
marks the extension optional) is noticed here. tests/protocol/test_speedups.py holds the two
implementations to the same results."""

from __future__ import annotations

import importlib
import os

import pytest

from protocol import speedups

PURE = os.environ.get("ODRADEK_PURE_PYTHON") == "1"


@pytest.mark.skipif(PURE, reason="ODRADEK_PURE_PYTHON=1 asks for the Python code")
def test_the_install_built_the_accelerator_and_it_is_in_use() -> None:
    # Fails when the build of protocol/_speedups.c failed silently (setup.py's optional=True).
    assert speedups.ACCELERATED
    assert speedups.IMPLEMENTATION == "C accelerator"


def test_odradek_pure_python_forces_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODRADEK_PURE_PYTHON", "1")
    try:
        assert not importlib.reload(speedups).ACCELERATED
    finally:
        monkeypatch.undo()
        importlib.reload(speedups)
