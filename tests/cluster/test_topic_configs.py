"""Topic configs in a cluster: IncrementalAlterConfigs on one broker writes
/config/topics/<t> and a /config/changes notification; the controller reads the configs again
and sends UpdateMetadata, so every broker describes them and applies them to its local logs --
a broker that was down when they changed too, once it is back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from client.admin import Admin
from protocol.errors import InvalidConfigError, InvalidTopicError
from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def overrides(bootstrap: str, topic: str) -> dict[str, str | None]:
    with Admin(bootstrap) as admin:
        return {c.name: c.value for c in admin.describe_configs([topic])[topic]
                if c.source == "topic"}


def saved_configs(data_dir: Path, topic: str) -> dict[str, str]:
    doc = json.loads((data_dir / "topics.json").read_text())
    return dict(doc["topics"].get(topic, {}).get("configs", {}))


@pytest.mark.timeout(120)
def test_configs_altered_on_one_broker_reach_every_broker_and_a_restarted_one(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("shared", partitions=2, replication_factor=3)
    with Admin(cluster.brokers[0].bootstrap) as admin:
        admin.alter_configs("shared", {"retention_ms": "60000", "cleanup_policy": "compact"})
        with pytest.raises(InvalidConfigError, match=r"topic 'shared'.*'no\.such\.config'"):
            admin.alter_configs("shared", {"no.such.config": "1"})
        with pytest.raises(InvalidConfigError, match=r"topic 'shared'.*retention_ms"):
            admin.alter_configs("shared", {"retention_ms": "later"})
        with pytest.raises(InvalidTopicError, match="internal topic"):
            admin.alter_configs("__consumer_offsets", {"retention_ms": "1"})
    wanted = {"retention_ms": "60000", "cleanup_policy": "compact"}
    assert cluster.json("/config/topics/shared")["config"] == wanted
    until(lambda: overrides(cluster.brokers[2].bootstrap, "shared") == wanted, 20,
          "broker 2 describes the new configs")
    until(lambda: all(saved_configs(p.data_dir, "shared") == wanted
                      for p in cluster.brokers.values()), 20,
          "every broker's local logs have the new configs")
    until(lambda: cluster.zk.get_children("/config/changes") == [], 20,
          "the controller removed the processed notifications")

    cluster.brokers[2].stop()
    with Admin(cluster.brokers[1].bootstrap) as admin:
        admin.alter_configs("shared", {"retention.ms": "120000"}, ["cleanup_policy"])
    changed = {"retention.ms": "120000"}
    described = {"retention_ms": "120000"}  # described by our name, whichever name set it
    until(lambda: overrides(cluster.brokers[0].bootstrap, "shared") == described, 20,
          "broker 0 describes the changed configs")
    assert saved_configs(cluster.brokers[2].data_dir, "shared") == wanted  # it was down
    cluster.brokers[2].start()
    cluster.wait_ready()
    until(lambda: overrides(cluster.brokers[2].bootstrap, "shared") == described, 20,
          "the restarted broker describes the changed configs")
    until(lambda: saved_configs(cluster.brokers[2].data_dir, "shared") == changed, 20,
          "the restarted broker applied them to its local logs")
