"""Listeners: where the broker listens and with which security protocol (Kafka's ``listeners``).

``listeners = ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://0.0.0.0:9093"]``: each listener is
named by its security protocol (one listener per protocol). Unset, ``host`` and ``port`` are
the one PLAINTEXT listener, as before. ``advertised_listeners`` gives what clients are told
for each (unset: ``advertised_host`` or the listening host, with the port really listened on).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True)
class Endpoint:
    """``PROTOCOL://host:port``."""

    protocol: SecurityProtocol
    host: str
    port: int

    @property
    def name(self) -> str:
        return self.protocol.value

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """``"PLAINTEXT://h:9092,SASL_SSL://h:9093"`` -> endpoints; ValueError naming the bad one."""
    endpoints: list[Endpoint] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        try:
            protocol = SecurityProtocol(name.strip().upper())
        except ValueError:
            known = ", ".join(p.value for p in SecurityProtocol)
            raise ValueError(f"{item!r}: listener name must be one of {known}") from None
        if not sep or not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{item!r} is not PROTOCOL://HOST:PORT")
        if any(e.protocol is protocol for e in endpoints):
            raise ValueError(f"{item!r}: a second {protocol.value} listener")
        endpoints.append(Endpoint(protocol, host.strip("[]"), int(port)))
    return tuple(endpoints)
