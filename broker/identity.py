"""Who this broker is: its id and the cluster's id, created on first start and kept.

They live in ``meta.properties`` in the data directory, as Kafka keeps them::

    version=0
    broker.id=0
    cluster.id=Wc8Gd-kuRsOXt5bCnlWuGA

``directory.id`` (Kafka's KIP-858 name) is this data directory's own uuid, added when missing.
In cluster mode it tells a broker restarted after kill -9 (its old ZooKeeper registration, same
directory id, is stale: wait for it to expire) from a second broker started with the same id
(another directory: refuse).

The cluster id is a uuid4 in URL-safe base64 without padding: 22 characters of
``[a-zA-Z0-9_-]`` (seed 000, "Cluster Id"). A data directory belongs to one broker: starting it
with a different ``--broker-id`` is refused, as Kafka refuses it (InconsistentBrokerIdException).
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from broker.log.layout import write_atomically

META_FILE = "meta.properties"
DEFAULT_BROKER_ID = 0
_CLUSTER_ID = re.compile(r"^[a-zA-Z0-9_-]{22}$")


class IdentityError(RuntimeError):
    """meta.properties is unreadable or disagrees with the configured broker id."""


@dataclass(frozen=True)
class BrokerIdentity:
    broker_id: int
    cluster_id: str
    directory_id: str = ""


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def load_or_create(
    data_dir: Path, configured_broker_id: int | None, *, cluster_id: str | None = None
) -> BrokerIdentity:
    """The identity kept in ``data_dir``, or a new one written there (durably) on first start.
    ``cluster_id``: the cluster's id from ZooKeeper (cluster mode), which a new directory takes
    and a kept one must match (Kafka's InconsistentClusterIdException)."""
    path = data_dir / META_FILE
    if not path.exists():
        broker_id = DEFAULT_BROKER_ID if configured_broker_id is None else configured_broker_id
        identity = BrokerIdentity(broker_id, cluster_id or new_cluster_id(), _new_uuid())
        _write(path, identity)
        return identity
    identity = _read(path)
    if configured_broker_id is not None and configured_broker_id != identity.broker_id:
        raise IdentityError(
            f"broker id {configured_broker_id} does not match broker.id={identity.broker_id} "
            f"kept in {path}; a data directory belongs to one broker"
        )
    if cluster_id is not None and cluster_id != identity.cluster_id:
        raise IdentityError(
            f"{path} belongs to cluster {identity.cluster_id}, but ZooKeeper holds cluster "
            f"{cluster_id}; a data directory belongs to one cluster"
        )
    if not identity.directory_id:
        identity = BrokerIdentity(identity.broker_id, identity.cluster_id, _new_uuid())
        _write(path, identity)
    return identity


def _new_uuid() -> str:
    return new_cluster_id()


def _read(path: Path) -> BrokerIdentity:
    props: dict[str, str] = {}
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise IdentityError(f"cannot read {path}: {exc}") from None
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    try:
        broker_id = int(props["broker.id"])
        cluster_id = props["cluster.id"]
    except (KeyError, ValueError):
        raise IdentityError(f"{path} must hold broker.id (an integer) and cluster.id") from None
    if broker_id < 0 or not _CLUSTER_ID.match(cluster_id):
        raise IdentityError(f"{path} holds an invalid broker.id or cluster.id")
    return BrokerIdentity(broker_id, cluster_id, props.get("directory.id", ""))


def _write(path: Path, identity: BrokerIdentity) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (
        f"version=0\nbroker.id={identity.broker_id}\ncluster.id={identity.cluster_id}\n"
        f"directory.id={identity.directory_id}\n"
    )
    write_atomically(path, text.encode("utf-8"), durable=True)
