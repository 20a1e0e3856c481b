"""docs/kafka-compatibility.md's working configurations work: each client's block, run as a
user would paste it, against a broker's Kafka listener."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.kafka_clients.clients import KAFKAJS, available

DOC = REPO_ROOT / "docs" / "kafka-compatibility.md"
DOCUMENTED_ADDRESS = "127.0.0.1:9093"
BLOCK = re.compile(r"^### (.+?)\n\n```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
CLIENT_OF = {"kcat": "kcat", "confluent-kafka (librdkafka)": "confluent-kafka",
             "kafka-python": "kafka-python", "kafkajs": "kafkajs", "aiokafka": "aiokafka"}


def _blocks() -> dict[str, tuple[str, str]]:
    section = DOC.read_text().split("## Working configurations", 1)[1]
    return {title: (language, code) for title, language, code in BLOCK.findall(section)}


def test_every_client_has_a_block() -> None:
    assert set(_blocks()) == set(CLIENT_OF)


@pytest.mark.parametrize("title", list(CLIENT_OF))
def test_the_block_runs(kafka_broker: BrokerProcess, title: str, tmp_path: Path) -> None:
    missing = available(CLIENT_OF[title])
    if missing:
        pytest.fail(missing)
    language, code = _blocks()[title]
    code = code.replace(DOCUMENTED_ADDRESS, kafka_broker.kafka_bootstrap)
    code = re.sub(r"\bclicks\b", f"clicks-{CLIENT_OF[title]}", code)  # each block its topic
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1",
           "NODE_PATH": str(KAFKAJS / "node_modules")}
    script = tmp_path / {"bash": "block.sh", "python": "block.py", "js": "block.js"}[language]
    script.write_text(code)
    program = {"bash": ["bash", "-euo", "pipefail"], "python": [sys.executable],
               "js": ["node"]}[language]
    run = subprocess.run([*program, str(script)], capture_output=True, text=True, timeout=90,
                         env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = "three" if language == "bash" else "page=/home"
    assert expected in run.stdout, run.stdout[-3000:]
