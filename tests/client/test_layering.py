"""client/ imports protocol/ only among the project's packages, and starts no threads; the tools
built on it (the ``odradek`` command, the console, the demo) live in tooling/, which it never
imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "client"
FORBIDDEN = {"broker", "coordinator", "pipeline", "tooling", "tests", "benchmarks", "threading",
             "trio"}


@pytest.mark.parametrize("path", sorted(CLIENT.glob("*.py")), ids=lambda p: p.name)
def test_client_modules_import_no_server_side_package(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN


ODRADEK = CLIENT.parent / "odradek"


@pytest.mark.parametrize("path", sorted(ODRADEK.glob("*.py")), ids=lambda p: p.name)
def test_the_public_package_imports_only_client_and_protocol(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    assert imported <= {"client", "protocol", "odradek", "__future__"}
