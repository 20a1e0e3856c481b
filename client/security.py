"""How a client reaches a secured listener: kafka-python's option names, checked once.

``security_protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; ``ssl_cafile`` (else the
system's CAs), ``ssl_certfile``/``ssl_keyfile`` (a client certificate, for mutual TLS),
``ssl_check_hostname``; ``sasl_mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with
``sasl_plain_username``/``sasl_plain_password`` (kafka-python uses these names for SCRAM too).
The password is in no repr, log line or exception.

``from_properties`` reads Kafka's client properties (``--command-config``):
``security.protocol=SASL_SSL``, ``sasl.mechanism=SCRAM-SHA-256``, ``sasl.jaas.config`` (its
username and password), ``ssl.truststore.location`` (a PEM file here), and every option above
by its own name (``sasl_plain_username=...`` or ``sasl.plain.username=...``).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TypedDict

from client.errors import ConfigError
from protocol.sasl import MECHANISMS

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SecurityOptions(TypedDict, total=False):
    """The keyword arguments Producer, Consumer and Admin take for security."""

    security_protocol: str
    ssl_cafile: str | None
    ssl_certfile: str | None
    ssl_keyfile: str | None
    ssl_check_hostname: bool
    sasl_mechanism: str
    sasl_plain_username: str | None
    sasl_plain_password: str | None


@dataclass(frozen=True)
class SecurityConfig:
    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        object.__setattr__(self, "security_protocol", protocol)
        object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.upper())
        if protocol not in PROTOCOLS:
            raise ConfigError(f"security_protocol={self.security_protocol!r} is invalid; use "
                              f"{', '.join(PROTOCOLS)}")
        if self.uses_sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise ConfigError(f"sasl_mechanism={self.sasl_mechanism!r} is invalid; use "
                                  f"{', '.join(MECHANISMS)}")
            if not self.sasl_plain_username or self.sasl_plain_password is None:
                raise ConfigError(f"security_protocol={protocol} needs sasl_plain_username "
                                  "and sasl_plain_password")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ConfigError("ssl_certfile and ssl_keyfile go together")

    def options(self) -> SecurityOptions:
        """These settings as the clients' keyword arguments."""
        return SecurityOptions(
            security_protocol=self.security_protocol, ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile, ssl_keyfile=self.ssl_keyfile,
            ssl_check_hostname=self.ssl_check_hostname, sasl_mechanism=self.sasl_mechanism,
            sasl_plain_username=self.sasl_plain_username,
            sasl_plain_password=self.sasl_plain_password)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context for SSL and SASL_SSL (None otherwise); ConfigError for an unreadable
        file, naming the setting."""
        if not self.uses_tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ssl_cafile={self.ssl_cafile}: {exc}") from None
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile and self.ssl_keyfile:
            try:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"ssl_certfile/ssl_keyfile: {exc}") from None
        return context

    @classmethod
    def from_properties(cls, text: str, *, where: str = "command config") -> SecurityConfig:
        """Kafka's ``key=value`` lines (``#`` comments); unknown keys are refused by name."""
        values: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{where} line {number}: not key=value")
            values[key.strip()] = value.strip()
        return cls.from_mapping(values, where=where)

    @classmethod
    def from_mapping(cls, given: Mapping[str, str], *, where: str = "options"
                     ) -> SecurityConfig:
        """From property names (``security.protocol``, ``sasl_mechanism`` ...) and text values;
        unknown names are refused by name."""
        values: dict[str, str] = {}
        for key, value in given.items():
            name = _PROPERTY_NAMES.get(key.replace("_", "."))
            if name is None:
                raise ConfigError(f"{where}: unknown key {key!r} "
                                  f"(known: {', '.join(PROPERTY_KEYS)})")
            values[name] = value
        values.update(_jaas_credentials(values.pop("sasl_jaas_config", "")))
        check = values.pop("ssl_check_hostname", "true").lower()
        if check not in ("true", "false"):
            raise ConfigError(f"{where}: ssl.check.hostname must be true or false")
        return cls(**values, ssl_check_hostname=check == "true")

    @classmethod
    def from_file(cls, path: Path) -> SecurityConfig:
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"--command-config {path}: {exc.strerror}") from None
        return cls.from_properties(text, where=str(path))


_PROPERTY_NAMES = {f.name.replace("_", "."): f.name for f in fields(SecurityConfig)}
_PROPERTY_NAMES.update({
    # Kafka's own keys for the same things (PEM files here)
    "ssl.truststore.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "sasl.jaas.config": "sasl_jaas_config",
})
#: every property name ``from_mapping`` knows
PROPERTY_KEYS = tuple(sorted(_PROPERTY_NAMES))
_JAAS_VALUE = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas_credentials(config: str) -> dict[str, str]:
    """``sasl.jaas.config``'s ``username="..." password="..."`` (any login module)."""
    found = {name: value.replace('\\"', '"') for name, value in _JAAS_VALUE.findall(config)}
    return {f"sasl_plain_{name}": value for name, value in found.items()}
