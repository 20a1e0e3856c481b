"""The public ``odradek`` package, ``create_topic(exist_ok=)`` / ``topics create --if-not-exists``,
and the README's examples that use them, against a real broker on 127.0.0.1."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import client
import client.errors
import odradek
import odradek.errors
import protocol.errors
from odradek import Admin, TopicAlreadyExistsError

ROOT = Path(__file__).resolve().parents[2]


def _exceptions(module: object) -> dict[str, type[BaseException]]:
    return {
        name: value for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
        and value.__module__ == getattr(module, "__name__", None) and not name.startswith("_")
    }


def test_odradek_re_exports_the_client_api() -> None:
    for name in client.__all__:
        assert getattr(odradek, name) is getattr(client, name), name
        assert name in odradek.__all__, name
    for name in odradek.__all__:
        assert hasattr(odradek, name), name


def test_odradek_errors_holds_every_exception_class() -> None:
    wanted = _exceptions(protocol.errors) | _exceptions(client.errors)
    assert set(odradek.errors.__all__) == set(wanted)
    for name, cls in wanted.items():
        assert getattr(odradek.errors, name) is cls


def test_readme_and_docs_import_from_odradek_not_client() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        assert not re.search(r"^from client(\.\w+)* import", text, re.M), path.name
        assert not re.search(r"^import client\b", text, re.M), path.name


# ------------------------------------------------------------------------ real broker


@pytest.mark.integration
def test_create_topic_exist_ok(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        assert admin.create_topic("twice", partitions=2) is True
        with pytest.raises(TopicAlreadyExistsError, match="twice"):
            admin.create_topic("twice", partitions=2)
        assert admin.create_topic("twice", partitions=5, exist_ok=True) is False
        [info] = admin.describe_topics(["twice"])
        assert sorted(info.partitions) == [0, 1]  # left as it was
        assert admin.create_topic("fresh", exist_ok=True) is True
        assert {"twice", "fresh"} <= set(admin.list_topics())


def odradek_cli(broker, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooling.cli", *args, "--bootstrap", broker.bootstrap],
        input=stdin, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )


@pytest.mark.integration
def test_cli_topics_create_if_not_exists(broker) -> None:
    first = odradek_cli(broker, "topics", "create", "ine", "--partitions", "2", "--if-not-exists")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "created topic 'ine' with 2 partition(s)\n"
    again = odradek_cli(broker, "topics", "create", "ine", "--partitions", "2", "--if-not-exists")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "topic 'ine' already exists; left as it is\n"
    as_json = odradek_cli(broker, "topics", "create", "ine", "--if-not-exists", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["created"] is False
    plain = odradek_cli(broker, "topics", "create", "ine")
    assert plain.returncode == 1
    assert plain.stderr == "odradek: error: topic 'ine' already exists\n"


def _readme_python_block(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index(f"\n{heading}\n"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    return code[:code.index("\n```")]


@pytest.mark.integration
def test_readme_from_python_snippet_runs_twice(broker, tmp_path) -> None:
    snippet = _readme_python_block("## From Python")
    assert "from odradek import" in snippet
    script = tmp_path / "snippet.py"
    script.write_text(snippet.replace("127.0.0.1:9092", broker.bootstrap))
    for run in range(2):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, f"run {run + 1}: {done.stderr}"


@pytest.mark.integration
def test_readme_tour_keyed_lines_spread_over_every_partition(broker) -> None:
    """The Quick tour's `seq 1 3000 | sed 's/.*/&,&/' | odradek produce orders --key-separator ,`
    reaches all 6 partitions, and `consume` prints the values only: 3000 distinct numbers."""
    tour = (ROOT / "README.md").read_text()
    assert "seq 1 3000 | sed 's/.*/&,&/' | odradek produce orders --key-separator ," in tour
    assert odradek_cli(broker, "topics", "create", "orders", "--partitions", "6").returncode == 0
    lines = "".join(f"{n},{n}\n" for n in range(1, 3001))
    produced = odradek_cli(broker, "produce", "orders", "--key-separator", ",", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    described = odradek_cli(broker, "topics", "describe", "orders", "--json")
    [topic] = json.loads(described.stdout)
    counts = [p["latest_offset"] for p in topic["partitions"]]
    assert len(counts) == 6 and min(counts) > 0 and sum(counts) == 3000
    consumed = odradek_cli(broker, "consume", "orders", "--from-beginning",
                           "--max-messages", "3000")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(int(v) for v in consumed.stdout.split()) == list(range(1, 3001))
