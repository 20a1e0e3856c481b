"""Which client each system used (the machine table) and Redis's native reference line."""

from __future__ import annotations

import tomllib

import pytest

from benchmarks import machine, native
from benchmarks.servers import REPO_ROOT, find_program

VERSIONS = {"redis": "8.1.0", "hiredis": "3.5.0", "nats-py": "2.16.0"}


@pytest.mark.parametrize(
    ("installed", "hiredis_usable", "row"),
    [
        (VERSIONS, True, "redis-py 8.1.0 with hiredis 3.5.0 (C parser)"),
        ({"redis": "8.1.0"}, False, "redis-py 8.1.0, Python parser (hiredis not installed)"),
        (VERSIONS, False, "redis-py 8.1.0, Python parser (hiredis 3.5.0 not usable by this "
                          "redis-py)"),
        ({}, False, "redis-py not installed"),
    ],
)
def test_the_redis_row_names_the_client_and_its_parser(
    monkeypatch: pytest.MonkeyPatch, installed: dict[str, str], hiredis_usable: bool, row: str
) -> None:
    monkeypatch.setattr(machine, "package_version", installed.get)
    monkeypatch.setattr(machine, "hiredis_in_use", lambda: hiredis_usable)
    assert machine.redis_client() == row


def test_the_machine_table_names_every_system_s_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "package_version", VERSIONS.get)
    monkeypatch.setattr(machine, "hiredis_in_use", lambda: True)
    rows = machine.describe()
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert rows["Redis Streams client"] == "redis-py 8.1.0 with hiredis 3.5.0 (C parser)"
    assert rows["NATS JetStream client"] == "nats-py 2.16.0"
    assert rows["odradek client"] == f"odradek {version} (client/, this checkout)"
    monkeypatch.setattr(machine, "package_version", {}.get)
    assert machine.describe()["NATS JetStream client"] == "nats-py not installed"


def test_redis_benchmark_csv_gives_the_requests_per_second() -> None:
    out = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
           '"p99_latency_ms","max_latency_ms"\n"XADD s * v x","126582.27","0.004","0.000",'
           '"0.007","0.007","0.015","0.367"\n')
    assert native.requests_per_s(out) == 126582.27
    with pytest.raises(RuntimeError, match="printed no rps"):
        native.requests_per_s("ERR unknown command\n")


@pytest.mark.parametrize("absent", ["redis-benchmark", "redis-server"])
def test_without_redis_benchmark_the_reference_is_missing_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, absent: str
) -> None:
    monkeypatch.setattr(native, "find_program", lambda name: None if name == absent else name)
    assert list(native.redis_reference(True)) == [{
        "status": "missing", "name": "redis-benchmark",
        "reason": f"{absent} is not installed (redis-benchmark ships with redis-server; "
                  "scripts/bench installs it): no native reference line for Redis",
    }]


@pytest.mark.skipif(find_program("redis-benchmark") is None or find_program("redis-server") is None,
                    reason="redis-benchmark and redis-server are not installed")
def test_redis_benchmark_measures_xadd_against_a_redis_server_of_its_own() -> None:
    program = find_program("redis-benchmark")
    assert program is not None
    lines = native.measure(program, requests=2000)  # at least the largest pipeline
    assert [line["pipeline"] for line in lines] == list(native.PIPELINES)
    for line in lines:
        assert line["bench"] == "peer_reference" and line["system"] == "redis"
        assert line["command"] == "XADD" and line["value_bytes"] == 100
        assert line["requests"] == 2000 and line["msgs_per_s"] > 0


def test_a_redis_benchmark_that_breaks_is_reported_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "find_program", lambda name: name)

    def broken(program: str, requests: int) -> list[dict[str, object]]:
        raise RuntimeError("redis-benchmark exited 1: Could not connect")

    monkeypatch.setattr(native, "measure", broken)
    assert list(native.redis_reference(True)) == [{
        "status": "failed", "name": "redis-benchmark",
        "reason": "RuntimeError: redis-benchmark exited 1: Could not connect",
    }]
