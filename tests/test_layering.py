"""The direction of imports (DESIGN.md "Layout"), for every module of every package, and no import
cycle anywhere -- imports inside functions and under ``TYPE_CHECKING`` count too: a cycle hidden
in a function is still two modules that cannot be understood, or moved, one without the other."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("protocol", "coordinator", "broker", "client", "pipeline", "odradek", "tooling")
#: what each package may import among the project's packages (itself always)
ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "coordinator": frozenset({"protocol"}),
    "broker": frozenset({"protocol", "coordinator"}),
    "client": frozenset({"protocol", "odradek"}),
    "odradek": frozenset({"protocol", "client"}),
    "pipeline": frozenset({"protocol", "client", "odradek"}),
    # the odradek command, the console, the local cluster and the docs generator sit on top
    # (the CLI writes credentials through the broker's stores); nothing imports them
    "tooling": frozenset({"protocol", "coordinator", "broker", "client", "odradek"}),
}
NOT_OURS_TO_IMPORT = frozenset({"tests", "benchmarks"})
#: subpackages held to less than their package: the mirror is a client of two clusters (seed
#: 002: "the mirror cluster simply acts as a consumer"), never a part of a broker
NARROWER: dict[str, frozenset[str]] = {
    "tooling.mirror": frozenset({"protocol", "client", "odradek", "tooling.mirror"}),
}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _imported_names(module: str, path: Path) -> Iterator[str]:
    """Every module name an import statement of ``module`` reaches, relative ones resolved.
    ``from package import submodule`` reaches the submodule only: the package's ``__init__``
    runs first, but what the importer depends on is the submodule."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            for alias in node.names:  # a submodule, or a name defined in ``base``
                full = f"{base}.{alias.name}"
                yield full if full in MODULES else base


def _ours(name: str) -> str | None:
    """The project module ``name`` is, or is in; None if it is not ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _edges(module: str) -> set[str]:
    found = {_ours(name) for name in _imported_names(module, MODULES[module])}
    return {m for m in found if m is not None and m != module}


GRAPH = {module: _edges(module) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_one_way(module: str) -> None:
    package = module.split(".")[0]
    path = MODULES[module]
    foreign = {name.split(".")[0] for name in _imported_names(module, path)}
    assert not foreign & NOT_OURS_TO_IMPORT, f"{module} imports {foreign & NOT_OURS_TO_IMPORT}"
    wrong = {m.split(".")[0] for m in GRAPH[module]} - ALLOWED[package] - {package}
    assert not wrong, f"{module} ({package}/) imports {sorted(wrong)}, which it must not"


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if any(m.startswith(p) for p in NARROWER)))
def test_narrower_subpackages_import_only_what_they_may(module: str) -> None:
    allowed = next(a for p, a in NARROWER.items() if module.startswith(p))
    wrong = {m for m in GRAPH[module]
             if not any(m == a or m.startswith(a + ".") for a in allowed)}
    assert not wrong, f"{module} imports {sorted(wrong)}, which it must not"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
