"""Which version of an API to speak with a broker: the highest both sides know.

A broker says what it speaks in its ApiVersions answer (every odradek broker answers it, at v0),
asked once per connection -- a broker restarted on the same address may be an older or newer
build (a rolling upgrade or a downgrade). The client speaks a range of each API it negotiates
(the fetcher Fetch v2..v4, the producer Produce v1..v2): it takes the highest version in both
ranges, as Kafka's clients do, so a client keeps working against brokers that predate what it
knows.
"""

from __future__ import annotations

from typing import Any

from protocol.apis import ApiKey
from protocol.errors import UnsupportedVersionError

#: api key -> (min_version, max_version) the broker speaks
VersionTable = dict[int, tuple[int, int]]


def read_api_versions(body: dict[str, Any]) -> VersionTable:
    """The table of an ApiVersions answer."""
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["apis"]}


def negotiate(
    table: VersionTable, api: ApiKey, lowest: int, highest: int, broker: str
) -> int:
    """The highest version of ``api`` in both this client's ``lowest..highest`` and the
    broker's range; UnsupportedVersionError naming the broker and both ranges if they share
    none."""
    theirs = table.get(api)
    if theirs is None or theirs[1] < lowest or theirs[0] > highest:
        spoken = "does not speak it" if theirs is None else f"speaks v{theirs[0]}..v{theirs[1]}"
        raise UnsupportedVersionError(
            f"broker {broker} {spoken} of {api.name}; this client speaks v{lowest}..v{highest}"
        )
    return min(highest, theirs[1])
