"""The network client's settings: the network part of Kafka's ``ProducerConfig`` /
``CommonClientConfigs``, typed and checked.

Immutable; any thread may read it. ``parse_bootstrap_servers`` turns ``bootstrap.servers``
into (host, port) pairs; host names are resolved later, on every connection attempt.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, fields

from kclient.errors import ConfigError
from kclient.network.bootstrap_resolution import CLIENT_DNS_LOOKUPS
from kclient.network.selector import DEFAULT_RECEIVE_MESSAGE_MAX_BYTES
from kclient.sasl import Credentials
from kclient.tls import SECURITY_PROTOCOLS, client_context

#: Kafka's ``security.protocol`` values, all spoken by the client.


@dataclass(frozen=True)
class NetworkClientConfig:
    """The network settings, with the Java producer's defaults (Kafka names in comments)."""

    client_id: str = "kclient"  # client.id
    request_timeout_ms: int = 30_000  # request.timeout.ms
    max_in_flight_requests_per_connection: int = 5  # max.in.flight.requests.per.connection
    reconnect_backoff_ms: int = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: int = 1000  # reconnect.backoff.max.ms
    socket_connection_setup_timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    socket_connection_setup_timeout_max_ms: int = 30_000  # ….max.ms
    # bootstrap.refused.timeout.ms (kclient's): the first metadata wait fails once every
    # bootstrap server refused connections this long (-1: never; see bootstrap_refusals)
    bootstrap_refused_timeout_ms: int = 2_000
    # client.dns.lookup: use_all_dns_ips or resolve_canonical_bootstrap_servers_only
    client_dns_lookup: str = "use_all_dns_ips"
    # bootstrap.resolve.timeout.ms (KIP-909): 0 resolves bootstrap.servers when the client
    # is created; above 0, on the client's thread, retried this long (bootstrap_resolution)
    bootstrap_resolve_timeout_ms: int = 0
    connections_max_idle_ms: int = 540_000  # connections.max.idle.ms
    send_buffer_bytes: int = -1  # send.buffer.bytes (-1: OS default)
    receive_buffer_bytes: int = 32_768  # receive.buffer.bytes (-1: OS default)
    # receive.message.max.bytes (librdkafka's; Java has no limit): a larger response
    # closes the connection
    receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES
    retry_backoff_ms: int = 100  # retry.backoff.ms (metadata refresh backoff)
    retry_backoff_max_ms: int = 1000  # retry.backoff.max.ms (… after failures in a row)
    metadata_max_age_ms: int = 300_000  # metadata.max.age.ms
    metadata_max_idle_ms: int = 300_000  # metadata.max.idle.ms
    metadata_recovery_strategy: str = "rebootstrap"  # metadata.recovery.strategy (KIP-899)
    # metadata.recovery.rebootstrap.trigger.ms (KIP-1102)
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000
    # metadata.cluster.check.enable (KIP-1242): ApiVersions v5 names the cluster and node
    # a connection is for; a broker that is not it answers REBOOTSTRAP_REQUIRED
    metadata_cluster_check_enable: bool = True
    security_protocol: str = "PLAINTEXT"  # security.protocol
    ssl_context: ssl.SSLContext | None = None  # SSL, SASL_SSL: from the ssl.* settings
    sasl: Credentials | None = None  # SASL_*: sasl.mechanism and the credentials

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"'security.protocol' must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"got {self.security_protocol!r}"
            )
        if self.uses_tls and self.ssl_context is None:
            object.__setattr__(self, "ssl_context", client_context())  # the system's CAs
        if self.security_protocol.startswith("SASL_") and self.sasl is None:
            raise ConfigError(
                f"'security.protocol' {self.security_protocol} needs 'sasl.mechanism' and "
                "credentials ('sasl.username' and 'sasl.password', or 'sasl.jaas.config')"
            )
        for name in (
            "request_timeout_ms",
            "max_in_flight_requests_per_connection",
            "socket_connection_setup_timeout_ms",
            "receive_message_max_bytes",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"'{_kafka_name(name)}' must be at least 1")
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ConfigError(
                "'metadata.recovery.strategy' must be 'rebootstrap' or 'none', got "
                f"{self.metadata_recovery_strategy!r}"
            )
        if self.client_dns_lookup not in CLIENT_DNS_LOOKUPS:
            raise ConfigError(
                f"'client.dns.lookup' must be one of {', '.join(CLIENT_DNS_LOOKUPS)}, got "
                f"{self.client_dns_lookup!r}"
            )
        for name in (
            "bootstrap_resolve_timeout_ms",
            "reconnect_backoff_ms",
            "retry_backoff_ms",
            "metadata_max_age_ms",
            "metadata_recovery_rebootstrap_trigger_ms",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"'{_kafka_name(name)}' must not be negative")
        # As in Java (KIP-580): a base above its maximum backs off at the maximum.
        for low, high in (
            ("reconnect_backoff_ms", "reconnect_backoff_max_ms"),
            ("retry_backoff_ms", "retry_backoff_max_ms"),
            ("socket_connection_setup_timeout_ms", "socket_connection_setup_timeout_max_ms"),
        ):
            object.__setattr__(self, low, min(getattr(self, low), getattr(self, high)))

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_config(cls, config: object) -> NetworkClientConfig:
        """Take every field this class has from ``config`` by attribute name (the
        producer's ``kclient.config.ProducerConfig``); fields it lacks keep their
        defaults. Timeouts of 0, which the producer's settings allow as Java's do, count
        as 1 ms."""
        names = [f.name for f in fields(cls)]
        values = {n: getattr(config, n) for n in names if hasattr(config, n)}
        for name in _AT_LEAST_ONE_MS:
            if name in values:
                values[name] = max(values[name], 1)
        return cls(**values)


_AT_LEAST_ONE_MS = (
    "request_timeout_ms",
    "socket_connection_setup_timeout_ms",
    "socket_connection_setup_timeout_max_ms",
)


_KAFKA_NAMES = {
    "request_timeout_ms": "request.timeout.ms",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "socket_connection_setup_timeout_ms": "socket.connection.setup.timeout.ms",
    "receive_message_max_bytes": "receive.message.max.bytes",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "retry_backoff_max_ms": "retry.backoff.max.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "metadata_recovery_rebootstrap_trigger_ms": "metadata.recovery.rebootstrap.trigger.ms",
    "bootstrap_resolve_timeout_ms": "bootstrap.resolve.timeout.ms",
}


def _kafka_name(field_name: str) -> str:
    return _KAFKA_NAMES.get(field_name, field_name)


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"host:port,[::1]:9093"`` (or a list of such) → ``[(host, port), …]``."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        if item.startswith("["):
            host, sep, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
            ok = bool(sep)
        else:
            host, _, port_text = item.rpartition(":")
            ok = ":" not in host
        if not ok or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigError(
                f"invalid address {item!r} in 'bootstrap.servers': expected host:port "
                "(e.g. localhost:9092, or [::1]:9092 for IPv6)"
            )
        result.append((host, int(port_text)))
    if not result:
        raise ConfigError("'bootstrap.servers' is required (e.g. 'localhost:9092')")
    return result
