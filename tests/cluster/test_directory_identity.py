"""meta.properties in cluster mode (``broker.identity``): the cluster id from ZooKeeper is taken
by a new data directory and checked against a kept one, and every directory has its own
``directory.id`` (Kafka's KIP-858), added to old files and kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.identity import (
    META_FILE,
    BrokerIdentity,
    IdentityError,
    load_or_create,
    new_cluster_id,
)

ZK_CLUSTER = "Wc8Gd-kuRsOXt5bCnlWuGA"  # seed 000's example cluster id


def test_a_new_data_directory_takes_the_clusters_id(tmp_path: Path):
    identity = load_or_create(tmp_path, 3, cluster_id=ZK_CLUSTER)
    assert (identity.broker_id, identity.cluster_id) == (3, ZK_CLUSTER)
    assert f"cluster.id={ZK_CLUSTER}" in (tmp_path / META_FILE).read_text().splitlines()
    assert load_or_create(tmp_path, 3, cluster_id=ZK_CLUSTER) == identity
    assert load_or_create(tmp_path, None) == identity  # embedded mode reads it as it is


def test_a_directory_of_another_cluster_is_refused_naming_both_ids(tmp_path: Path):
    kept = load_or_create(tmp_path, 1, cluster_id=ZK_CLUSTER).cluster_id
    other = new_cluster_id()
    with pytest.raises(IdentityError) as raised:
        load_or_create(tmp_path, 1, cluster_id=other)
    message = str(raised.value)
    assert kept in message and other in message
    assert str(tmp_path / META_FILE) in message
    # nothing was rewritten
    assert load_or_create(tmp_path, 1).cluster_id == kept


def test_a_directory_made_in_embedded_mode_is_refused_by_a_cluster(tmp_path: Path):
    embedded = load_or_create(tmp_path, 0)
    assert embedded.cluster_id != ZK_CLUSTER
    with pytest.raises(IdentityError, match=f"{embedded.cluster_id}.*{ZK_CLUSTER}"):
        load_or_create(tmp_path, 0, cluster_id=ZK_CLUSTER)


def test_an_old_file_without_a_directory_id_gets_one_that_is_kept(tmp_path: Path):
    path = tmp_path / META_FILE
    path.write_text(f"#Tue Mar 13 10:00:00 UTC 2018\nversion=0\nbroker.id=2\n"
                    f"cluster.id={ZK_CLUSTER}\n")
    first = load_or_create(tmp_path, 2, cluster_id=ZK_CLUSTER)
    assert first.broker_id == 2 and first.cluster_id == ZK_CLUSTER
    assert len(first.directory_id) == 22
    assert f"directory.id={first.directory_id}" in path.read_text().splitlines()
    again = load_or_create(tmp_path, 2, cluster_id=ZK_CLUSTER)
    assert again == first  # kept, not made anew on every start
    assert load_or_create(tmp_path, None).directory_id == first.directory_id


def test_each_directory_has_its_own_id(tmp_path: Path):
    a = load_or_create(tmp_path / "a", 1, cluster_id=ZK_CLUSTER)
    b = load_or_create(tmp_path / "b", 1, cluster_id=ZK_CLUSTER)
    assert a.directory_id != b.directory_id
    assert a == BrokerIdentity(1, ZK_CLUSTER, a.directory_id)


def test_a_kept_directory_id_is_read_back_as_written(tmp_path: Path):
    (tmp_path / META_FILE).write_text(
        f"version=0\nbroker.id=4\ncluster.id={ZK_CLUSTER}\ndirectory.id=my-dir\n")
    assert load_or_create(tmp_path, 4, cluster_id=ZK_CLUSTER) == BrokerIdentity(
        4, ZK_CLUSTER, "my-dir")
