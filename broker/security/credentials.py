"""Where users' SCRAM credentials live: salted and hashed only (protocol/scram.py), never a
password. Cluster mode: ZooKeeper's ``/config/users/<name>`` (Kafka's place and form), read at
each login so every broker sees a change at once. Embedded mode: ``scram-credentials.json`` in
the data directory, reread when it changes (``odradek users add --data-dir`` writes it while
the broker is stopped)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio
from kazoo.exceptions import NoNodeError

from broker.cluster.zookeeper import ZooKeeper, update_znode
from broker.log.layout import write_atomically
from protocol.scram import (
    CREDENTIALS_FILE,
    CredentialFormatError,
    ScramCredential,
    decode_user,
    decode_users,
    encode_user,
    encode_users,
)
from protocol.zk_names import USERS_ZNODE, unescape, user_znode

Credentials = dict[str, ScramCredential]  # by mechanism


class CredentialStore(Protocol):
    async def user(self, name: str) -> Credentials: ...

    async def users(self) -> dict[str, Credentials]: ...

    async def alter(self, name: str, change: Callable[[Credentials], Credentials]) -> None:
        """Replace ``name``'s credentials with ``change(current)``, read and written as one
        step so that a change made meanwhile (another broker's) is not lost: ``change`` may be
        called again on what is there then. None left removes the user."""


class FileCredentialStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CREDENTIALS_FILE
        self._seen: tuple[int, int] | None = None
        self._users: dict[str, Credentials] = {}
        self._lock = trio.Lock()

    def _load(self) -> dict[str, Credentials]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._users = None, {}
            return self._users
        key = (stat.st_mtime_ns, stat.st_size)
        if key != self._seen:
            try:
                self._users = decode_users(self.path.read_bytes())
            except CredentialFormatError as exc:
                raise CredentialFormatError(f"{self.path}: {exc}") from None
            self._seen = key
        return self._users

    async def user(self, name: str) -> Credentials:
        return dict(self._load().get(name, {}))

    async def users(self) -> dict[str, Credentials]:
        return {name: dict(creds) for name, creds in self._load().items()}

    async def alter(self, name: str, change: Callable[[Credentials], Credentials]) -> None:
        async with self._lock:  # this broker is the file's only writer while it runs
            users = dict(self._load())
            users[name] = change(dict(users.get(name, {})))
            # readable by its owner only: salted hashes are still worth guessing at
            write_atomically(self.path, encode_users(users), durable=True, mode=0o600)


class ZooKeeperCredentialStore:
    def __init__(self, zoo: ZooKeeper) -> None:
        self._zoo = zoo

    async def user(self, name: str) -> Credentials:
        try:
            data, _ = await self._zoo.call(self._zoo.kazoo.get, user_znode(name))
        except NoNodeError:
            return {}
        try:
            return decode_user(data)
        except CredentialFormatError as exc:
            raise CredentialFormatError(f"ZooKeeper's {user_znode(name)}: {exc}") from None

    async def users(self) -> dict[str, Credentials]:
        try:
            names = await self._zoo.call(self._zoo.kazoo.get_children, USERS_ZNODE)
        except NoNodeError:
            return {}
        found = {unescape(n): await self.user(unescape(n)) for n in sorted(names)}
        return {name: creds for name, creds in found.items() if creds}

    async def alter(self, name: str, change: Callable[[Credentials], Credentials]) -> None:
        """The user's SCRAM credentials changed on what ZooKeeper holds, conditional on its
        version; the rest of the node (the user's quotas) kept."""
        def change_node(data: bytes | None) -> bytes | None:
            credentials = change(decode_user(data or b""))
            if data is None and not credentials:
                return None
            return encode_user(credentials, data)

        await self._zoo.call(update_znode, self._zoo.kazoo, user_znode(name), change_node)
