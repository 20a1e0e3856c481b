"""The codec's typed errors: each tells the broker how Kafka answers it.

An unknown API key and a body that does not parse close the connection with nothing written, as
Kafka does; an unsupported version is answered (for ApiVersions, with the table) and the
connection stays open. So they are three classes, not one with a reason string. The first two
carry what could be read of the header, so the broker can log and answer with the correlation id.
"""

from __future__ import annotations

from protocol.errors import ProtocolError


class KafkaCodecError(ProtocolError):
    """Base of the errors of Kafka's binary protocol."""


class MalformedMessageError(KafkaCodecError):
    """The bytes do not parse as the schema says: too short, a negative or impossible length,
    invalid UTF-8, an array longer than the bytes left."""


class UnknownApiKeyError(KafkaCodecError):
    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(
            f"unknown Kafka API key {api_key} (version {api_version}, "
            f"correlation id {correlation_id})"
        )
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class UnsupportedApiVersionError(KafkaCodecError):
    def __init__(
        self, api_name: str, api_key: int, api_version: int, correlation_id: int,
        min_version: int, max_version: int,
    ) -> None:
        super().__init__(
            f"{api_name} (key {api_key}) version {api_version} is not supported: "
            f"versions {min_version}-{max_version} are (correlation id {correlation_id})"
        )
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class EncodeError(KafkaCodecError):
    """A value handed to an encoder does not fit its schema (a missing field, an int out of
    range, a wrong type): a bug on our side, raised before anything is written."""
