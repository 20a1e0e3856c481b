"""The broker's settings: one table, four sources.

Every setting has a default, a key in ``odradek.toml`` (top level, the setting's name), an
``ODRADEK_<NAME>`` environment variable, and -- for the few listed with a flag -- a command-line
flag. Later sources win: default < TOML < environment < command line. The storage settings of
``broker.log.config.SETTINGS`` are broker-wide defaults here too (a topic's configs override
them). docs/operations.md is generated from these tables (``settings_markdown``) and a test fails
when it is out of date.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from broker.log.config import SETTINGS as LOG_SETTINGS
from broker.log.config import LogConfig
from broker.security.listeners import Endpoint, SecurityProtocol, parse_endpoints
from coordinator.assignors import BUILTIN_STRATEGIES
from coordinator.config import CoordinatorConfig

ENV_PREFIX = "ODRADEK_"
LOG_LEVELS = ("debug", "info", "warning", "error")


class SettingsError(ValueError):
    """A setting has an unknown name or a value that cannot be used; the message names it."""


def _bool(text: str) -> bool:
    word = text.strip().lower()
    if word in ("true", "1", "yes", "on"):
        return True
    if word in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true or false)")


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < low:
            raise ValueError(f"{value} is below the minimum {low}")
        return value

    return parse


def _port(text: str) -> int:
    value = int(text.strip())
    if not 0 <= value <= 65535:
        raise ValueError(f"{value} is not a TCP port (0-65535)")
    return value


def _optional_broker_id(text: str) -> int | None:
    word = text.strip().lower()
    if word in ("", "none", "-1"):
        return None
    return _int_at_least(0)(word)


def _optional_str(text: str) -> str | None:
    return text.strip() or None


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT`` too) as a listener setting takes it."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def _optional_listener(text: str) -> str | None:
    if not text.strip() or text.strip().lower() == "none":
        return None
    host_port(text)
    return text.strip()


def _log_level(text: str) -> str:
    word = text.strip().lower()
    if word not in LOG_LEVELS:
        raise ValueError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return word


def _principals(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip() for p in text.split(";") if p.strip()))
    for name in names:
        kind, colon, rest = name.partition(":")
        if not colon or not kind or not rest:
            raise ValueError(f"{name!r} is not a principal TYPE:NAME (User:alice)")
    return names


def _endpoints(text: str) -> str:
    endpoints = parse_endpoints(text)
    kafka = [e for e in endpoints if e.kafka]
    if kafka:
        raise ValueError(f"{kafka[0]}: Kafka-protocol listeners go in kafka_listeners")
    return ",".join(str(e) for e in endpoints)


def _optional_endpoints(text: str) -> str | None:
    return _endpoints(text) or None


def _kafka_endpoints(text: str) -> str:
    return ",".join(str(replace(e, kafka=False)) for e in parse_endpoints(text, kafka=True))


def _optional_kafka_endpoints(text: str) -> str | None:
    return _kafka_endpoints(text) or None


def _optional_listener_name(text: str) -> str | None:
    word = text.strip().upper()
    if not word:
        return None
    SecurityProtocol(word)  # ValueError names the bad value
    return word


CLIENT_AUTH = ("none", "requested", "required")


def _client_auth(text: str) -> str:
    word = text.strip().lower()
    if word not in CLIENT_AUTH:
        raise ValueError(f"{text!r} is not one of {', '.join(CLIENT_AUTH)}")
    return word


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _mechanism_names(text: str) -> str:
    names = [n.strip().upper() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SASL_MECHANISMS]
    if not names or unknown:
        raise ValueError(f"{text!r} must name mechanisms among {', '.join(SASL_MECHANISMS)}")
    return ",".join(dict.fromkeys(names))


def _mechanism(text: str) -> str:
    name = _mechanism_names(text)
    if "," in name:
        raise ValueError(f"{text!r} must name one mechanism")
    return name


class Secret:
    """A setting's secret value: ``******`` in reprs, logs and docs; ``reveal()`` gives it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('******')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _optional_secret(text: str) -> Secret | None:
    return Secret(text) if text else None


def _strategy_names(text: str) -> str:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    known = [s.name for s in BUILTIN_STRATEGIES]
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise ValueError(f"{text!r} must name strategies among {', '.join(known)}, comma-separated")
    return ",".join(dict.fromkeys(names))


@dataclass(frozen=True)
class Setting:
    name: str
    kafka_name: str  # empty where Kafka has no such setting
    parse: Callable[[str], Any]
    meaning: str
    flag: str | None = None  # the command-line flag, where there is one

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def default(self) -> Any:
        return getattr(BrokerSettings(), self.name)

    @property
    def shown_default(self) -> str:
        return _shown(self.default)


SETTINGS: tuple[Setting, ...] = (
    Setting("host", "listeners (host part)", str,
            "Address to listen on.", "--host"),
    Setting("port", "listeners (port part)", _port,
            "TCP port to listen on; 0 picks a free one (printed on start).", "--port"),
    Setting("data_dir", "log.dirs", str,
            "Directory holding the logs, topic metadata and the broker's identity.",
            "--data-dir"),
    Setting("broker_id", "broker.id", _optional_broker_id,
            "This broker's id; unset: the id kept in the data directory, else 0. It must match "
            "the kept one.", "--broker-id"),
    Setting("advertised_host", "advertised.listeners (host part)", _optional_str,
            "Host given to clients in Metadata; unset: host (127.0.0.1 when host is 0.0.0.0)."),
    # security (docs/security.md)
    Setting("listeners", "listeners", _endpoints,
            "Comma-separated (or a TOML array) PROTOCOL://HOST:PORT, one per security protocol "
            "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); port 0 picks a free one. Empty: one "
            "PLAINTEXT listener on host:port."),
    Setting("advertised_listeners", "advertised.listeners", _optional_endpoints,
            "What clients are told for each listener (PROTOCOL://HOST:PORT); unset: "
            "advertised_host or the listening host, with the port listened on."),
    Setting("kafka_listeners", "listeners (of a Kafka broker)", _kafka_endpoints,
            "Listeners speaking Kafka's binary protocol (0.10.2's API table), for kcat, "
            "librdkafka, kafka-python, kafkajs: PROTOCOL://HOST:PORT as for listeners, one per "
            "security protocol; port 0 picks a free one. Empty: none "
            "(docs/kafka-compatibility.md)."),
    Setting("kafka_advertised_listeners", "advertised.listeners (of a Kafka broker)",
            _optional_kafka_endpoints,
            "What Kafka clients are told for each Kafka listener (PROTOCOL://HOST:PORT); unset: "
            "as advertised_listeners' default."),
    Setting("inter_broker_listener_name", "inter.broker.listener.name",
            _optional_listener_name,
            "The listener other brokers (replica fetchers, the controller) connect to; unset: "
            "the first listener."),
    Setting("ssl_certfile", "ssl.keystore.location (PEM)", _optional_str,
            "PEM certificate (chain) of this broker's SSL and SASL_SSL listeners."),
    Setting("ssl_keyfile", "ssl.keystore.key (PEM)", _optional_str,
            "PEM private key of ssl_certfile."),
    Setting("ssl_cafile", "ssl.truststore.location (PEM)", _optional_str,
            "PEM CA certificates trusted for client certificates and for other brokers' "
            "listeners; unset: the system's."),
    Setting("ssl_client_auth", "ssl.client.auth", _client_auth,
            "none, requested or required: whether SSL clients must show a certificate (its "
            "subject becomes the principal, User:CN=...)."),
    Setting("sasl_enabled_mechanisms", "sasl.enabled.mechanisms", _mechanism_names,
            "Mechanisms SASL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (PLAIN is "
            "checked against the user's SCRAM credential)."),
    Setting("connection_failed_authentication_delay_ms",
            "connection.failed.authentication.delay.ms", _int_at_least(0),
            "How long a failed SASL login waits before its SASL_AUTHENTICATION_FAILED answer "
            "and the close (KIP-306), to slow password guessing; only that connection waits. "
            "0: answer at once."),
    Setting("sasl_mechanism_inter_broker_protocol", "sasl.mechanism.inter.broker.protocol",
            _mechanism, "Mechanism brokers log in with on a SASL inter-broker listener."),
    Setting("inter_broker_sasl_username", "sasl.jaas.config (username)", _optional_str,
            "The user brokers log in as on a SASL inter-broker listener."),
    Setting("inter_broker_sasl_password", "sasl.jaas.config (password)", _optional_secret,
            "Its password (never logged; prefer the environment variable or the TOML file)."),
    Setting("auto_create_topics_enable", "auto.create.topics.enable", _bool,
            "Create a missing topic on the first Metadata or Produce request naming it."),
    Setting("num_partitions", "num.partitions", _int_at_least(1),
            "Partition count of auto-created topics and of CreateTopics asking for -1."),
    Setting("default_replication_factor", "default.replication.factor", _int_at_least(1),
            "Replication factor of auto-created topics and of CreateTopics asking for -1."),
    Setting("max_partitions_per_topic", "", _int_at_least(1),
            "The most partitions one topic may have; CreateTopics asking for more is refused."),
    Setting("max_request_bytes", "socket.request.max.bytes", _int_at_least(1024),
            "Largest request frame; a bigger length prefix closes the connection."),
    Setting("connections_max_idle_ms", "connections.max.idle.ms", _int_at_least(1),
            "Close a connection that sends no request, or does not take its response, this long."),
    Setting("request_read_timeout_ms", "", _int_at_least(1),
            "Close a connection whose request has not arrived whole this long after its first "
            "byte (waiting for memory included), freeing its memory. 30 s: Kafka clients' "
            "request.timeout.ms, after which the sender has given up anyway."),
    Setting("queued_max_request_bytes", "queued.max.request.bytes", _int_at_least(1024),
            "Most bytes of requests being read or queued, over all connections (at least "
            "max_request_bytes); at the bound, reading stops until requests finish. Bounded, "
            "unlike Kafka's -1: see docs/operations.md, Requests and connections."),
    Setting("maintenance_interval_ms", "log.retention.check.interval.ms", _int_at_least(1),
            "How often the logs are flushed (flush_ms), trimmed by retention and compacted."),
    Setting("shutdown_timeout_ms", "", _int_at_least(0),
            "On SIGTERM/SIGINT, how long in-flight requests may take before they are cut off."),
    Setting("log_level", "", _log_level,
            "Least severe event the broker logs to stderr: debug, info, warning or error."),
    Setting("metrics_listener", "", _optional_listener,
            "HOST:PORT serving Prometheus metrics at /metrics (for example 127.0.0.1:9404; "
            "port 0 picks a free one, logged as metrics.listening); unset: no metrics "
            "listener. See docs/operations.md, Watching odradek."),
    Setting("metrics_partition_series", "", _bool,
            "Export per-partition series (consumer lag and committed offset per group and "
            "partition); false keeps only per-group sums, bounding the series count."),
    # authorization (docs/security.md)
    Setting("authorizer_enabled", "authorizer.class.name (AclAuthorizer)", _bool,
            "Check every request against the ACLs (Kafka's AclAuthorizer); false: everyone "
            "may do everything and the ACL APIs answer SECURITY_DISABLED."),
    Setting("super_users", "super.users", _principals,
            "Semicolon-separated principals (User:admin;User:broker) that every ACL check "
            "allows."),
    Setting("allow_everyone_if_no_acl_found", "allow.everyone.if.no.acl.found", _bool,
            "Allow a request on a resource that no ACL names at all (false: deny it)."),
    # the group coordinator (coordinator.config.CoordinatorConfig)
    Setting("group_min_session_timeout_ms", "group.min.session.timeout.ms", _int_at_least(1),
            "Shortest session timeout a member may ask for (else INVALID_SESSION_TIMEOUT)."),
    Setting("group_max_session_timeout_ms", "group.max.session.timeout.ms", _int_at_least(1),
            "Longest session timeout a member may ask for (seed: max.session.timeout)."),
    Setting("group_initial_rebalance_delay_ms", "group.initial.rebalance.delay.ms",
            _int_at_least(0),
            "How long a new group's first round waits for more members (Kafka: 3000; see "
            "CoordinatorConfig)."),
    Setting("partition_assignment_strategies", "partition.assignment.strategies (seed 001)",
            _strategy_names,
            "Comma-separated strategies members may ask for: range, roundrobin, sticky."),
    Setting("offsets_topic_partitions", "offsets.topic.num.partitions", _int_at_least(1),
            "Partitions of __consumer_offsets when it is created (an existing topic keeps its "
            "count)."),
    Setting("offset_metadata_max_bytes", "offset.metadata.max.bytes", _int_at_least(0),
            "Longest commit metadata (else OFFSET_METADATA_TOO_LARGE)."),
    Setting("offsets_retention_ms", "offsets.retention.minutes (in ms)", _int_at_least(1),
            "How long an Empty group keeps its committed offsets."),
    Setting("offsets_retention_check_interval_ms", "offsets.retention.check.interval.ms",
            _int_at_least(1),
            "How often expired offsets are looked for."),
    # cluster mode (docs/cluster.md)
    Setting("zookeeper_connect", "zookeeper.connect", _optional_str,
            "host:port[,host:port...][/chroot] of the ZooKeeper holding the cluster; unset: "
            "one broker on its own, no ZooKeeper.", "--zookeeper-connect"),
    Setting("zookeeper_session_timeout_ms", "zookeeper.session.timeout.ms", _int_at_least(1),
            "ZooKeeper session timeout: how long a dead broker stays registered, so the bound "
            "on noticing it."),
    Setting("zookeeper_connection_timeout_ms", "zookeeper.connection.timeout.ms",
            _int_at_least(1),
            "How long one attempt to reach ZooKeeper waits; the broker logs the failure and "
            "tries again."),
    Setting("broker_rack", "broker.rack", _optional_str,
            "This broker's rack; replicas of a partition are spread over racks.",
            "--broker-rack"),
    Setting("controller_socket_timeout_ms", "controller.socket.timeout.ms", _int_at_least(1),
            "How long the controller waits for a broker to answer one request before retrying."),
    Setting("controlled_shutdown_enable", "controlled.shutdown.enable", _bool,
            "On SIGTERM, ask the controller to move this broker's leaderships first."),
    Setting("controlled_shutdown_max_retries", "controlled.shutdown.max.retries",
            _int_at_least(0),
            "Further attempts when a controlled shutdown leaves partitions behind."),
    Setting("controlled_shutdown_retry_backoff_ms", "controlled.shutdown.retry.backoff.ms",
            _int_at_least(0), "Wait between controlled-shutdown attempts."),
    Setting("auto_leader_rebalance_enable", "auto.leader.rebalance.enable", _bool,
            "The controller moves leadership back to preferred replicas when a broker's "
            "imbalance exceeds leader_imbalance_per_broker_percentage."),
    Setting("leader_imbalance_check_interval_ms", "leader.imbalance.check.interval.seconds "
            "(in ms)", _int_at_least(1), "How often the controller checks leader imbalance."),
    Setting("leader_imbalance_per_broker_percentage", "leader.imbalance.per.broker.percentage",
            _int_at_least(0),
            "Share of a broker's preferred partitions led elsewhere that triggers a preferred "
            "election."),
    Setting("replica_lag_time_max_ms", "replica.lag.time.max.ms", _int_at_least(1),
            "A follower not caught up with its leader for this long leaves the ISR (Kafka 2.5+: "
            "30 s, seed 003: 10 s)."),
    Setting("min_insync_replicas", "min.insync.replicas", _int_at_least(1),
            "acks=all produces need at least this many in-sync replicas (else "
            "NOT_ENOUGH_REPLICAS); a topic's min_insync_replicas config overrides it."),
    Setting("unclean_leader_election_enable", "unclean.leader.election.enable", _bool,
            "With no live in-sync replica, let an out-of-sync one lead (losing what it lacks)."),
    Setting("offsets_topic_replication_factor", "offsets.topic.replication.factor",
            _int_at_least(1),
            "Replication factor of __consumer_offsets in cluster mode; it is created once that "
            "many brokers are live."),
)
_BY_NAME = {s.name: s for s in SETTINGS}
_LOG_NAMES = {s.name for s in LOG_SETTINGS}
_GROUP = CoordinatorConfig()  # the coordinator's defaults are its own


@dataclass(frozen=True)
class BrokerSettings:
    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: str = "./odradek-data"
    broker_id: int | None = None
    advertised_host: str | None = None
    listeners: str = ""
    advertised_listeners: str | None = None
    kafka_listeners: str = ""
    kafka_advertised_listeners: str | None = None
    inter_broker_listener_name: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_cafile: str | None = None
    ssl_client_auth: str = "none"
    sasl_enabled_mechanisms: str = ",".join(SASL_MECHANISMS)
    connection_failed_authentication_delay_ms: int = 100
    sasl_mechanism_inter_broker_protocol: str = "SCRAM-SHA-256"
    inter_broker_sasl_username: str | None = None
    inter_broker_sasl_password: Secret | None = None
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    max_partitions_per_topic: int = 1_000
    max_request_bytes: int = 100 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    request_read_timeout_ms: int = 30_000
    queued_max_request_bytes: int = 256 * 1024 * 1024
    maintenance_interval_ms: int = 5_000
    shutdown_timeout_ms: int = 10_000
    log_level: str = "info"
    metrics_listener: str | None = None
    metrics_partition_series: bool = True
    authorizer_enabled: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    group_min_session_timeout_ms: int = _GROUP.group_min_session_timeout_ms
    group_max_session_timeout_ms: int = _GROUP.group_max_session_timeout_ms
    group_initial_rebalance_delay_ms: int = _GROUP.group_initial_rebalance_delay_ms
    partition_assignment_strategies: str = ",".join(_GROUP.partition_assignment_strategies)
    offsets_topic_partitions: int = _GROUP.offsets_topic_partitions
    offset_metadata_max_bytes: int = _GROUP.offset_metadata_max_bytes
    offsets_retention_ms: int = _GROUP.offsets_retention_ms
    offsets_retention_check_interval_ms: int = _GROUP.offsets_retention_check_interval_ms
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 18_000
    broker_rack: str | None = None
    controller_socket_timeout_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    replica_lag_time_max_ms: int = 30_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    offsets_topic_replication_factor: int = 3
    log: LogConfig = dataclasses.field(default_factory=LogConfig)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def advertised(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The listeners: ``listeners``, else the one PLAINTEXT listener on host:port."""
        if self.listeners:
            return parse_endpoints(self.listeners)
        return (Endpoint(SecurityProtocol.PLAINTEXT, self.host, self.port),)

    @property
    def kafka_endpoints(self) -> tuple[Endpoint, ...]:
        """The Kafka-protocol listeners (``kafka_listeners``), none by default."""
        return parse_endpoints(self.kafka_listeners, kafka=True)

    @property
    def all_endpoints(self) -> tuple[Endpoint, ...]:
        """Every listener the broker opens: its own protocol's, then Kafka's."""
        return self.endpoints + self.kafka_endpoints

    @property
    def inter_broker_endpoint(self) -> Endpoint:
        name = self.inter_broker_listener_name
        return next((e for e in self.endpoints if e.name == name), self.endpoints[0])

    def advertised_endpoint(self, name: str, port: int) -> tuple[str, int]:
        """What clients are told for listener ``name``, which really listens on ``port``."""
        advertised = parse_endpoints(self.advertised_listeners or "") + parse_endpoints(
            self.kafka_advertised_listeners or "", kafka=True)
        for endpoint in advertised:
            if endpoint.name == name:
                return endpoint.host, endpoint.port or port
        listening = next((e for e in self.all_endpoints if e.name == name), None)
        host = listening.host if listening is not None else self.host
        if self.advertised_host:
            return self.advertised_host, port
        return ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host), port

    def coordinator_config(self) -> CoordinatorConfig:
        """The group coordinator's settings (raises ValueError when they contradict)."""
        return CoordinatorConfig(
            group_min_session_timeout_ms=self.group_min_session_timeout_ms,
            group_max_session_timeout_ms=self.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            partition_assignment_strategies=tuple(self.partition_assignment_strategies.split(",")),
            offsets_topic_partitions=self.offsets_topic_partitions,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            offsets_retention_ms=self.offsets_retention_ms,
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
        )


assert set(_BY_NAME) == {f.name for f in dataclasses.fields(BrokerSettings)} - {"log"}, (
    "every BrokerSettings field needs a row in SETTINGS"
)


def load_settings(
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> BrokerSettings:
    """Settings from the defaults, then ``config_file`` (TOML), then ``env`` (``ODRADEK_*``),
    then ``overrides`` (command-line flags, as text). Raises SettingsError naming the source."""
    raw: dict[str, tuple[str, str]] = {}  # name -> (text, where it came from)
    if config_file is not None:
        for name, value in _read_toml(config_file).items():
            raw[name] = (_text(value), f"{config_file}: {name}")
    known = [*(s.name for s in SETTINGS), *sorted(_LOG_NAMES)]
    for name in known:
        text = (env or {}).get(ENV_PREFIX + name.upper())
        if text is not None:
            raw[name] = (text, f"environment variable {ENV_PREFIX}{name.upper()}")
    for name, text in (overrides or {}).items():
        raw[name] = (text, _BY_NAME[name].flag or name)
    broker: dict[str, Any] = {}
    log_changes: dict[str, str] = {}
    for name, (text, where) in raw.items():
        if name in _LOG_NAMES:
            log_changes[name] = text
            try:
                LogConfig.from_mapping({name: text})
            except ValueError as exc:
                raise SettingsError(f"{where}: {exc}") from None
            continue
        setting = _BY_NAME.get(name)
        if setting is None:
            raise SettingsError(f"{where}: unknown setting {name!r}")
        try:
            broker[name] = setting.parse(text)
        except ValueError as exc:
            raise SettingsError(f"{where}: {exc}") from None
    try:
        log_config = LogConfig.from_mapping(log_changes)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    settings = BrokerSettings(**broker, log=log_config)
    try:
        settings.coordinator_config()
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    _check_security(settings)
    if settings.queued_max_request_bytes < settings.max_request_bytes:
        raise SettingsError(
            f"queued_max_request_bytes ({settings.queued_max_request_bytes}) must be at least "
            f"max_request_bytes ({settings.max_request_bytes}): the largest request must fit"
        )
    if settings.max_partitions_per_topic < settings.offsets_topic_partitions:
        raise SettingsError(
            f"max_partitions_per_topic ({settings.max_partitions_per_topic}) must be at least "
            f"offsets_topic_partitions ({settings.offsets_topic_partitions}): "
            "__consumer_offsets could not be created, and no group could commit"
        )
    return settings


def _check_security(settings: BrokerSettings) -> None:
    """What the listeners need must be there, named by the setting that is missing."""
    names = [e.name for e in settings.endpoints]
    if settings.inter_broker_listener_name not in (None, *names):
        raise SettingsError(f"inter_broker_listener_name {settings.inter_broker_listener_name} "
                            f"is not among the listeners ({', '.join(names)})")
    tls = [e.name for e in settings.all_endpoints if e.protocol.uses_tls]
    if tls and not (settings.ssl_certfile and settings.ssl_keyfile):
        raise SettingsError(f"listener {tls[0]} needs ssl_certfile and ssl_keyfile")
    inter = settings.inter_broker_endpoint
    if settings.zookeeper_connect and inter.protocol.uses_sasl and not (
            settings.inter_broker_sasl_username and settings.inter_broker_sasl_password):
        raise SettingsError(f"inter-broker listener {inter.name} needs "
                            "inter_broker_sasl_username and inter_broker_sasl_password")


#: settings a TOML file may give as an array (joined with commas)
_LIST_SETTINGS = {"listeners", "advertised_listeners", "kafka_listeners",
                  "kafka_advertised_listeners", "sasl_enabled_mechanisms"}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path} is not valid TOML: {exc}") from None
    for name, value in doc.items():
        if name in _LIST_SETTINGS and isinstance(value, list):
            doc[name] = ",".join(str(item) for item in value)
        elif isinstance(value, dict | list):
            raise SettingsError(f"{path}: {name} must be a single value, not a table or array")
    return doc


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------------------------- docs


def _shown(value: Any) -> str:
    if value is None or value == ():
        return "unset"
    if isinstance(value, tuple):
        return ";".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def settings_markdown() -> str:
    """The settings tables of docs/operations.md."""
    lines = [
        "| setting (TOML key) | environment | flag | default | Kafka's name | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        lines.append(
            f"| `{s.name}` | `{s.env}` | {f'`{s.flag}`' if s.flag else ''} | "
            f"`{s.shown_default}` | {f'`{s.kafka_name}`' if s.kafka_name else '-'} | "
            f"{s.meaning} |"
        )
    lines += [
        "",
        "Storage defaults for every topic (a topic's configs, given to CreateTopics by this name "
        "or Kafka's topic-level name, override them):",
        "",
        "| setting (TOML key) | environment | default | Kafka's name | meaning |",
        "|---|---|---|---|---|",
    ]
    defaults = LogConfig()
    for ls in LOG_SETTINGS:
        lines.append(
            f"| `{ls.name}` | `{ENV_PREFIX}{ls.name.upper()}` | "
            f"`{_shown(getattr(defaults, ls.name))}` | `{ls.broker_name}` "
            f"{f'(topic: `{ls.topic_name}`)' if ls.topic_name else '(broker only)'} | "
            f"{ls.meaning} |"
        )
    return "\n".join(lines) + "\n"
