"""ACLs and quotas in the data directory: kept across a new store (a restart), replaced
atomically, and a damaged file refused with its name rather than guessed at."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.security.quotas import PRODUCER_BYTE_RATE, USER, canonical
from broker.security.store import FileSecurityStore, SecurityStoreError
from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

ACL = AclBinding(resource_type=ResourceType.GROUP, resource_name="g",
                 pattern_type=PatternType.PREFIXED, principal="User:alice", host="*",
                 operation=AclOperation.READ, permission=AclPermissionType.DENY)


def test_acls_and_quotas_are_kept(tmp_path: Path) -> None:
    async def main() -> None:
        store = FileSecurityStore(tmp_path)
        assert await store.load_acls() == [] and await store.load_quotas() == {}
        await store.change_acls([ACL], [])
        alice = canonical({USER: "alice"})
        await store.alter_quota(alice, {PRODUCER_BYTE_RATE: 10}, [])
        again = FileSecurityStore(tmp_path)
        assert await again.load_acls() == [ACL]
        assert await again.load_quotas() == {alice: {PRODUCER_BYTE_RATE: 10}}
        await again.change_acls([], [ACL])
        await again.alter_quota(alice, {}, [PRODUCER_BYTE_RATE])
        third = FileSecurityStore(tmp_path)
        assert await third.load_acls() == [] and await third.load_quotas() == {}

    trio.run(main)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acls.json", "quotas.json"]


def test_a_damaged_file_is_refused_with_its_name(tmp_path: Path) -> None:
    (tmp_path / "acls.json").write_text('{"version": 1, "acls": [{"principal": 3}]}')
    with pytest.raises(SecurityStoreError, match=r"acls\.json"):
        trio.run(FileSecurityStore(tmp_path).load_acls)
