"""Batched ZooKeeper reads (``broker.cluster.zk_reads``): every request is sent before any
answer is awaited -- one round trip for many partitions, not one each."""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import NoNodeError

from broker.cluster.zk_reads import delete_many, get_many


class Result:
    def __init__(self, client: FakeClient, path: str, value: Any) -> None:
        self.client, self.path, self.value = client, path, value

    def get(self) -> Any:
        self.client.log.append(("await", self.path))
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class FakeClient:
    """kazoo's async calls, recording when each is sent and when its answer is awaited."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes
        self.log: list[tuple[str, str]] = []
        self.watches: list[Any] = []

    def get_async(self, path: str, watch: Any = None) -> Result:
        self.log.append(("send", path))
        self.watches.append(watch)
        if path not in self.nodes:
            return Result(self, path, NoNodeError())
        return Result(self, path, (self.nodes[path], f"stat of {path}"))

    def delete_async(self, path: str) -> Result:
        self.log.append(("delete", path))
        if self.nodes.pop(path, None) is None:
            return Result(self, path, NoNodeError())
        return Result(self, path, True)


def test_every_get_is_sent_before_any_answer_is_awaited() -> None:
    client = FakeClient({"/a": b"1", "/c": b"3"})
    watch = object()
    found = get_many(client, ["/a", "/b", "/c", "/a"], watch=watch)  # type: ignore[arg-type]
    assert found == {"/a": (b"1", "stat of /a"), "/b": None, "/c": (b"3", "stat of /c")}
    assert [kind for kind, _ in client.log] == ["send"] * 3 + ["await"] * 3
    assert client.watches == [watch] * 3


def test_delete_many_sends_every_delete_first_and_ignores_missing_nodes() -> None:
    client = FakeClient({"/a": b"1", "/c": b"3"})
    delete_many(client, ["/a", "/b", "/c"])  # type: ignore[arg-type]
    assert client.nodes == {}
    assert [kind for kind, _ in client.log] == ["delete"] * 3 + ["await"] * 3
