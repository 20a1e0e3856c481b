"""Client quotas, sans-IO: which byte-rate quota applies to a connection, how fast it has been
going, and how long to hold it back (Kafka's ClientQuotaManager).

Quotas are set on entities: a user, a client id, or a user and client id together; an entity
named None is the default of its type. A connection's quota of each kind (produce, fetch) is
the first of these that has one, in Kafka's order of precedence::

    user + client-id,  user + default client-id,  user,
    default user + client-id,  default user + default client-id,  default user,
    client-id,  default client-id

Every connection whose quota comes from the same entity shares one rate (a user quota bounds
all that user's clients together). The rate is measured over a sliding window of
``WINDOW_SAMPLES`` samples of ``SAMPLE_SECONDS``; a client over its quota is held back by
``(rate - quota) / quota * window`` (then the rate over the window is back at the quota), as
Kafka computes it -- never disconnected.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)

#: Kafka's quota.window.num and quota.window.size.seconds
WINDOW_SAMPLES = 11
SAMPLE_SECONDS = 1.0
#: the longest a response is held back (Kafka bounds it by the window too)
MAX_THROTTLE_MS = int(WINDOW_SAMPLES * SAMPLE_SECONDS * 1000)

#: ((entity type, name or None for the default), ...), user first; e.g.
#: (("user", "alice"), ("client-id", None)) is alice with the default client id
QuotaEntity = tuple[tuple[str, str | None], ...]


def canonical(parts: Mapping[str, str | None]) -> QuotaEntity:
    """An entity from {entity type: name}; ValueError for an unknown type or none at all."""
    unknown = set(parts) - set(ENTITY_TYPES)
    if unknown or not parts:
        raise ValueError(f"a quota entity is a user, a client-id, or both; got {sorted(parts)}")
    return tuple((t, parts[t]) for t in ENTITY_TYPES if t in parts)


def describe(ent: QuotaEntity) -> str:
    return ", ".join(f"{t} {name!r}" if name is not None else f"default {t}" for t, name in ent)


def precedence(user: str, client_id: str) -> list[QuotaEntity]:
    """The entities whose quota applies to ``user`` with ``client_id``, first match wins."""
    return [
        ((USER, user), (CLIENT_ID, client_id)),
        ((USER, user), (CLIENT_ID, None)),
        ((USER, user),),
        ((USER, None), (CLIENT_ID, client_id)),
        ((USER, None), (CLIENT_ID, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    ]


def user_of(principal: str) -> str:
    """Quotas name users without the principal type: ``User:alice`` -> ``alice``."""
    return principal.partition(":")[2] or principal


class RateMeter:
    """Bytes per second over the last ``WINDOW_SAMPLES`` samples (Kafka's Rate with
    SampledStat). A young meter's window is at least one sample long, so a first request is
    not mistaken for a huge rate. (Kafka counts a young window as WINDOW_SAMPLES - 1 samples
    long: a new client may then send ten seconds of its quota at once, and when that sample
    expires, again -- a sawtooth whose ten-second averages swing between a tenth of the
    quota and the quota.)"""

    def __init__(self) -> None:
        self._samples: deque[list[float]] = deque()  # [start, bytes]

    def record(self, size: int, now: float) -> None:
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_SECONDS:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += size
        while len(self._samples) > WINDOW_SAMPLES:
            self._samples.popleft()

    def _expire(self, now: float) -> None:
        while self._samples and now - self._samples[0][0] > WINDOW_SAMPLES * SAMPLE_SECONDS:
            self._samples.popleft()

    def window(self, now: float) -> float:
        """The window the rate is over, in seconds (at least one sample)."""
        elapsed = now - self._samples[0][0] if self._samples else 0.0
        return max(elapsed, SAMPLE_SECONDS)

    def rate(self, now: float) -> float:
        self._expire(now)
        return sum(s[1] for s in self._samples) / self.window(now)

    def throttle_ms(self, quota: float, now: float) -> int:
        """How long to hold the client back so that its rate falls to ``quota``."""
        rate = self.rate(now)
        if rate <= quota:
            return 0
        return min(MAX_THROTTLE_MS, int((rate - quota) / quota * self.window(now) * 1000))


@dataclass(frozen=True, slots=True)
class Throttle:
    entity: QuotaEntity | None  # whose quota applied; None: no quota
    throttle_ms: int


class ClientQuotas:
    """The quotas a broker enforces (``replace`` installs them, loaded from the data directory
    or ZooKeeper) and the byte rates it measures."""

    def __init__(self) -> None:
        self.quotas: dict[QuotaEntity, dict[str, int]] = {}
        self._meters: dict[tuple[QuotaEntity, str], RateMeter] = {}

    def replace(self, quotas: Mapping[QuotaEntity, Mapping[str, int]]) -> None:
        self.quotas = {e: dict(v) for e, v in quotas.items() if v}
        self._meters = {k: m for k, m in self._meters.items() if k[0] in self.quotas}

    def quota_for(self, key: str, principal: str, client_id: str) -> tuple[QuotaEntity, int] | None:
        for ent in precedence(user_of(principal), client_id):
            value = self.quotas.get(ent, {}).get(key)
            if value is not None:
                return ent, value
        return None

    def record(self, key: str, principal: str, client_id: str, size: int, now: float
               ) -> Throttle:
        """Count ``size`` bytes against the quota ``key`` of the connection; how long to hold
        its response back."""
        if not self.quotas:
            return Throttle(None, 0)
        found = self.quota_for(key, principal, client_id)
        if found is None:
            return Throttle(None, 0)
        ent, quota = found
        meter = self._meters.get((ent, key))
        if meter is None:
            meter = self._meters[(ent, key)] = RateMeter()
        meter.record(size, now)
        return Throttle(ent, meter.throttle_ms(quota, now))
