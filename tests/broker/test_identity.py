"""The broker and cluster ids: created once, kept in meta.properties, checked on every start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.identity import META_FILE, IdentityError, load_or_create, new_cluster_id


def test_cluster_id_is_22_url_safe_base64_characters() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{22}", i) for i in ids)


def test_created_on_first_start_and_kept(tmp_path: Path) -> None:
    first = load_or_create(tmp_path, None)
    assert first.broker_id == 0
    assert (tmp_path / META_FILE).read_text().splitlines() == [
        "version=0", "broker.id=0", f"cluster.id={first.cluster_id}",
        f"directory.id={first.directory_id}",
    ]
    assert len(first.directory_id) == 22
    assert load_or_create(tmp_path, None) == first
    assert load_or_create(tmp_path, 0) == first


def test_configured_broker_id_is_kept(tmp_path: Path) -> None:
    assert load_or_create(tmp_path, 5).broker_id == 5
    assert load_or_create(tmp_path, None).broker_id == 5


def test_a_different_broker_id_is_refused(tmp_path: Path) -> None:
    load_or_create(tmp_path, 1)
    with pytest.raises(IdentityError, match=r"broker id 2 does not match broker\.id=1"):
        load_or_create(tmp_path, 2)


@pytest.mark.parametrize(
    "text", ["", "broker.id=x\ncluster.id=abc\n", "broker.id=1\ncluster.id=short\n"]
)
def test_a_damaged_file_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / META_FILE).write_text(text)
    with pytest.raises(IdentityError):
        load_or_create(tmp_path, None)
