"""How names become ZooKeeper path elements, for every broker and for ``odradek users
--zookeeper`` alike: a user's SCRAM credentials and their quotas share one node,
``/config/users/<name>`` (Kafka's place), so both writers must spell the name the same way.

Names are escaped only where ZooKeeper would misread them: ``/`` as ``%2F``, ``%`` as ``%25``.
"""

from __future__ import annotations

import re

USERS_ZNODE = "/config/users"

_ESCAPED = re.compile("%(25|2F)")


def escape(name: str) -> str:
    return name.replace("%", "%25").replace("/", "%2F")


def unescape(element: str) -> str:
    return _ESCAPED.sub(lambda m: "%" if m.group(1) == "25" else "/", element)


def user_znode(name: str) -> str:
    return f"{USERS_ZNODE}/{escape(name)}"
