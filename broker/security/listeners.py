"""Listeners: where the broker listens and with which security protocol (Kafka's ``listeners``).

``listeners = ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://0.0.0.0:9093"]``: each listener is
named by its security protocol (one listener per protocol). Unset, ``host`` and ``port`` are
the one PLAINTEXT listener, as before. ``advertised_listeners`` gives what clients are told
for each (unset: ``advertised_host`` or the listening host, with the port really listened on).

``kafka_listeners`` are the same syntax for the listeners that speak Kafka's binary protocol
(broker/kafka): each is named ``KAFKA_`` and its protocol (``KAFKA_PLAINTEXT``), so that the
broker's registration and its Metadata answers can tell a client of either kind its own address.
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
    #: a listener speaking Kafka's binary protocol (``kafka_listeners``), not odradek's own
    kafka: bool = False

    @property
    def name(self) -> str:
        return KAFKA_PREFIX + self.protocol.value if self.kafka else self.protocol.value

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


KAFKA_PREFIX = "KAFKA_"


def parse_endpoints(text: str, *, kafka: bool = False) -> tuple[Endpoint, ...]:
    """``"PLAINTEXT://h:9092,SASL_SSL://h:9093"`` -> endpoints; ValueError naming the bad one.
    ``kafka``: they are Kafka-protocol listeners. A registration's ``KAFKA_PLAINTEXT://...``
    names one either way."""
    endpoints: list[Endpoint] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        word = name.strip().upper()
        is_kafka = kafka or word.startswith(KAFKA_PREFIX)
        try:
            protocol = SecurityProtocol(word.removeprefix(KAFKA_PREFIX))
        except ValueError:
            known = ", ".join(p.value for p in SecurityProtocol)
            raise ValueError(f"{item!r}: listener name must be one of {known}") from None
        if not sep or not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{item!r} is not PROTOCOL://HOST:PORT")
        endpoint = Endpoint(protocol, host.strip("[]"), int(port), is_kafka)
        if any(e.name == endpoint.name for e in endpoints):
            raise ValueError(f"{item!r}: a second {protocol.value} listener")
        endpoints.append(endpoint)
    return tuple(endpoints)
