"""The installed distribution holds every package of the source tree, subpackages included:
an editable install hides a missing one, a wheel would not."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_under_the_top_level_ones_is_distributed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    distributed = set(find_packages(str(ROOT), include=include))
    tops = {name.rstrip("*") for name in include}
    in_tree = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in tops
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert in_tree <= distributed
    assert {"broker.cluster", "broker.log", "broker.handlers"} <= distributed
    assert not any(name.startswith(("tests", "benchmarks")) for name in distributed)
