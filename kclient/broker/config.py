"""BrokerConfig: the embedded broker's settings (Kafka's ``KafkaConfig``, the part we use).

Immutable and validated on construction; read by every broker thread. Names follow the
Kafka broker settings they stand for (``num.network.threads`` -> ``num_network_threads``).
"""

from __future__ import annotations

import dataclasses
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kclient.broker.sasl_gssapi import GssapiAcceptor
from kclient.broker.sasl_oauth import (
    TokenValidator,
    check_oauthbearer_settings,
    oauth_validator,
)
from kclient.broker.sasl_server import (
    ALL_MECHANISMS,
    DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
    DEFAULT_MAX_RECEIVE_SIZE,
    MECHANISMS,
    SaslServer,
)
from kclient.errors import ConfigError
from kclient.tls import SECURITY_PROTOCOLS, server_context

#: Kafka's default ``message.max.bytes`` (1 MiB plus the 12-byte log overhead).
DEFAULT_MESSAGE_MAX_BYTES = 1024 * 1024 + 12
#: ``queued.max.request.bytes`` here (Kafka's default, -1, sets no bound).
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 100 * 1024 * 1024
#: ``max.request.items``: 200,000 of the smallest entries decode to about 45 MB of Python
#: objects (a Produce request of 1,000,000 six-byte partition entries made 224 MB).
DEFAULT_MAX_REQUEST_ITEMS = 200_000
#: Kafka's default ``fetch.max.bytes`` (55 MiB).
DEFAULT_FETCH_MAX_BYTES = 55 * 1024 * 1024

_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: ``security.protocol`` values the embedded broker's listener speaks.
#: ``sasl.enabled.mechanisms`` by default: the password mechanisms (OAUTHBEARER on request).
DEFAULT_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Mechanisms that authenticate the users of ``sasl.users``.
_PASSWORD_MECHANISMS = frozenset(DEFAULT_SASL_MECHANISMS)
#: ``ssl.client.auth`` values.
SSL_CLIENT_AUTH = ("none", "requested", "required")


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of one embedded broker (all brokers of an EmbeddedCluster share them).

    ``port`` 0 picks a free port. Defaults match the Kafka broker except
    ``auto_create_topics`` (on, as in Kafka) and ``log_dir`` (None: in memory).
    """

    host: str = "127.0.0.1"
    port: int = 0
    #: ``num.network.threads``: Processor threads per listener.
    num_network_threads: int = 3
    #: ``num.io.threads``: request handler threads.
    num_io_threads: int = 8
    #: ``queued.max.requests``: bound of the shared request queue.
    queued_max_requests: int = 500
    #: ``socket.request.max.bytes``: larger frames close the connection.
    socket_request_max_bytes: int = 100 * 1024 * 1024
    #: ``queued.max.request.bytes``: the bytes of requests being read or waiting for their
    #: answer, per broker; past it only requests of up to 4 KiB are read until others are
    #: answered. -1: no bound (Kafka's default; ours is 100 MiB).
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    #: ``max.request.items`` (ours; Kafka has no such bound): the most array entries
    #: (topics, partitions, ...) one request may hold in all; a request of more closes the
    #: connection before they are decoded (each costs the broker a few hundred bytes of
    #: Python objects, so a 100 MiB request of tiny entries would cost gigabytes).
    max_request_items: int = DEFAULT_MAX_REQUEST_ITEMS
    #: ``fetch.max.bytes``: the most one Fetch answer holds, whatever the request asks.
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    #: ``message.max.bytes``: largest record batch accepted (topics may override).
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    #: ``auto.create.topics.enable``.
    auto_create_topics: bool = True
    #: ``num.partitions``: partitions of auto-created topics and CreateTopics with -1.
    num_partitions: int = 1
    #: ``max.partitions.per.topic`` (kclient's; Kafka has no such cap): the most partitions
    #: a topic may have, and the most one CreateTopics request may create in all. Each
    #: partition costs memory (and with a log dir, a directory and files).
    max_partitions_per_topic: int = 10_000
    #: ``log.dirs``: None keeps every log in memory.
    log_dir: str | None = None
    #: ``log.segment.bytes``: roll a new segment file past this size.
    log_segment_bytes: int = 256 * 1024 * 1024
    #: ``connections.max.idle.ms``: idle connections are closed after this long.
    connections_max_idle_ms: int = 600_000
    #: ``delete.topic.enable``.
    delete_topic_enable: bool = True
    #: Reported in Metadata responses.
    cluster_id: str = "kclient-embedded"
    #: ``security.protocol`` of the listener (Kafka's ``listeners=SSL://...``): PLAINTEXT,
    #: SSL, SASL_PLAINTEXT or SASL_SSL. Clients connect back to the same host/port with
    #: the same protocol.
    security_protocol: str = "PLAINTEXT"
    #: ``ssl.keystore.location``: PEM file with the private key and the certificate chain.
    ssl_keystore_location: str | None = None
    #: ``ssl.key.password``: opens an encrypted private key in the keystore.
    ssl_key_password: str | None = field(default=None, repr=False)
    #: ``ssl.truststore.location``: PEM CA certificates that sign client certificates.
    ssl_truststore_location: str | None = None
    #: ``ssl.client.auth``: none, requested (checked if sent) or required (mutual TLS).
    ssl_client_auth: str = "none"
    #: ``sasl.enabled.mechanisms`` (SASL listeners): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
    #: a comma-separated string is accepted too.
    sasl_enabled_mechanisms: tuple[str, ...] = DEFAULT_SASL_MECHANISMS
    #: The users of a SASL listener: name -> password (Kafka's JAAS ``user_NAME="..."``
    #: for PLAIN and SCRAM credentials for SCRAM, here one list for every mechanism).
    sasl_users: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    #: ``sasl.server.max.receive.size``: largest request accepted before authentication.
    sasl_server_max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    #: GSSAPI: ``sasl.kerberos.service.name``, keytab and principal (None: any key in it).
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_keytab: str | None = None
    sasl_kerberos_principal: str | None = None
    #: ``connections.max.reauth.ms`` (SASL listeners, KIP-368): an authenticated session
    #: lasts this long; then the client must re-authenticate on its connection or have it
    #: closed at its next request. 0 (Kafka's default): sessions never expire.
    connections_max_reauth_ms: int = 0
    #: ``connection.failed.authentication.delay.ms`` (SASL listeners): the answer to a
    #: failed authentication is sent (and the connection closed) only after this long, so
    #: that guessing passwords is slow; other connections are served meanwhile. Must be
    #: below ``connections.max.idle.ms``, as in Kafka. 0 answers at once.
    connection_failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
    #: OAUTHBEARER (``kclient.broker.sasl_oauth``): without a JWKS URL, Kafka's unsecured
    #: validator (unsigned JWTs; ``sasl_oauthbearer_required_scope``, Kafka's JAAS option
    #: ``unsecuredValidatorRequiredScope``). ``sasl.oauthbearer.jwks.endpoint.url``:
    #: signed JWTs (RS256/ES256) checked against its keys, refreshed every
    #: ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, with ``sasl.oauthbearer.expected.*``.
    sasl_oauthbearer_jwks_endpoint_url: str | None = None
    sasl_oauthbearer_expected_audience: tuple[str, ...] = ()
    sasl_oauthbearer_expected_issuer: str | None = None
    sasl_oauthbearer_required_scope: tuple[str, ...] = ()
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = 3_600_000
    sasl_oauthbearer_clock_skew_seconds: int = 30
    #: Python API only (Kafka's ``sasl.server.callback.handler.class``): a validator of
    #: one's own (``validate(token, now_ms) -> ValidatedToken``, ``kclient.broker.sasl_oauth``).
    sasl_server_callback_handler: TokenValidator | None = field(
        default=None, repr=False, compare=False, hash=False
    )
    #: ``group.initial.rebalance.delay.ms``: when the first member joins an Empty group,
    #: the coordinator waits this long for more members (again after each newcomer, up
    #: to the rebalance timeout) before it forms the generation. Kafka's default is 3000;
    #: here 100, so that a test's consumers start in a fraction of a second.
    group_initial_rebalance_delay_ms: int = 100
    #: ``group.min.session.timeout.ms``: the smallest ``session.timeout.ms`` a consumer
    #: may ask for (else INVALID_SESSION_TIMEOUT). Kafka's default is 6000; here 100, so
    #: tests may use short sessions to see a dead consumer's partitions move quickly.
    group_min_session_timeout_ms: int = 100
    #: ``group.max.session.timeout.ms``: the largest ``session.timeout.ms`` (Kafka's).
    group_max_session_timeout_ms: int = 1_800_000
    #: ``group.max.size``: members per group (GROUP_MAX_SIZE_REACHED beyond; Kafka's).
    group_max_size: int = 0x7FFFFFFF
    #: ``offset.metadata.max.bytes``: longest metadata string of a committed offset
    #: (OFFSET_METADATA_TOO_LARGE beyond; Kafka's).
    offset_metadata_max_bytes: int = 4096
    #: ``transaction.max.timeout.ms``: the largest ``transaction.timeout.ms`` a
    #: transactional producer may ask for (INVALID_TRANSACTION_TIMEOUT beyond; Kafka's).
    transaction_max_timeout_ms: int = 900_000
    #: ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: how often the
    #: transaction coordinator aborts transactions open longer than their timeout.
    #: Kafka's default is 10000; here 1000, so a timed-out transaction ends promptly.
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 1000
    #: ``transactional.id.expiration.ms``: a transactional id with no transaction for
    #: this long is forgotten; its next producer starts with a new producer id (Kafka's
    #: default, 7 days).
    transactional_id_expiration_ms: int = 604_800_000
    #: ``transaction.remove.expired.transaction.cleanup.interval.ms`` (Kafka's: 1 hour).
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    #: The finalized ``transaction.version`` feature advertised in ApiVersions (v3+), as
    #: ``kafka-features.sh`` sets it on Kafka 4.x. 2 (the default): KIP-890 part 2 for
    #: clients that use it (EndTxn v5 bumps the epoch per transaction, Produce v12 and
    #: TxnOffsetCommit v5 add partitions implicitly); 1: EndTxn and TxnOffsetCommit are
    #: served up to v4 and Produce v12+ only verifies, as with transaction version 1.
    transaction_version: int = 2
    #: ``producer.id.expiration.ms``: a partition forgets a producer that has not written
    #: to it for this long (no transaction open); Kafka's default, 1 day.
    producer_id_expiration_ms: int = 86_400_000
    #: ``producer.id.expiration.check.interval.ms`` (Kafka's: 10 minutes).
    producer_id_expiration_check_interval_ms: int = 600_000
    #: ``quota.producer.byte.rate``: the Produce bytes per second each client id may send
    #: (measured per client id; AlterClientQuotas entities take precedence). None, the
    #: default as in Kafka: unlimited.
    quota_producer_byte_rate: int | None = None
    #: ``quota.consumer.byte.rate``: the Fetch bytes per second each client id may read.
    quota_consumer_byte_rate: int | None = None
    #: ``quota.request.percentage``: the share of one request handler thread's time each
    #: client id may take, in percent (100: one thread's whole time).
    quota_request_percentage: float | None = None
    #: ``quota.controller.mutation.rate``: partitions per second each client id may create
    #: or delete (KIP-599; CreateTopics v6+/DeleteTopics v5+ over it are refused with
    #: THROTTLING_QUOTA_EXCEEDED, older versions throttled).
    quota_controller_mutation_rate: float | None = None
    #: ``quota.window.num``: samples the quota rates are measured over (Kafka's 11).
    quota_window_num: int = 11
    #: ``quota.window.size.seconds``: the length of each sample (Kafka's 1).
    quota_window_size_seconds: int = 1
    #: Serve KIP-714's GetTelemetrySubscriptions and PushTelemetry, as a Kafka broker with a
    #: client-telemetry plugin in ``metric.reporters``; off (the default), ApiVersions does
    #: not list them and clients push nothing. ``EmbeddedCluster.telemetry()`` shows what
    #: clients pushed.
    client_telemetry: bool = False
    #: The client-metrics subscription (a ``CLIENT_METRICS`` resource's ``metrics``): metric
    #: name prefixes; ``("",)`` (the default) every metric, ``()`` none.
    client_telemetry_metrics: tuple[str, ...] = ("",)
    #: ... and its ``interval.ms``: how often clients push (Kafka's default, 5 minutes).
    client_telemetry_push_interval_ms: int = 300_000

    def kafka_settings(self) -> dict[str, str]:
        """The broker's settings under Kafka's names, as DescribeConfigs reports them."""
        settings = {name: str(value) for name, value in self._counts().items()}
        settings["auto.create.topics.enable"] = str(self.auto_create_topics).lower()
        settings["delete.topic.enable"] = str(self.delete_topic_enable).lower()
        return dict(sorted(settings.items()))

    def _counts(self) -> dict[str, int]:
        """The settings that must be positive integers, under Kafka's names."""
        return {
            "num.network.threads": self.num_network_threads,
            "num.io.threads": self.num_io_threads,
            "queued.max.requests": self.queued_max_requests,
            "socket.request.max.bytes": self.socket_request_max_bytes,
            "message.max.bytes": self.message_max_bytes,
            "fetch.max.bytes": self.fetch_max_bytes,
            "max.request.items": self.max_request_items,
            "num.partitions": self.num_partitions,
            "max.partitions.per.topic": self.max_partitions_per_topic,
            "log.segment.bytes": self.log_segment_bytes,
            "connections.max.idle.ms": self.connections_max_idle_ms,
            "sasl.server.max.receive.size": self.sasl_server_max_receive_size,
            "group.min.session.timeout.ms": self.group_min_session_timeout_ms,
            "group.max.session.timeout.ms": self.group_max_session_timeout_ms,
            "group.max.size": self.group_max_size,
            "offset.metadata.max.bytes": self.offset_metadata_max_bytes,
            "transaction.max.timeout.ms": self.transaction_max_timeout_ms,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
                self.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
            "transactional.id.expiration.ms": self.transactional_id_expiration_ms,
            "transaction.remove.expired.transaction.cleanup.interval.ms": (
                self.transaction_remove_expired_transaction_cleanup_interval_ms
            ),
            "producer.id.expiration.ms": self.producer_id_expiration_ms,
            "producer.id.expiration.check.interval.ms": (
                self.producer_id_expiration_check_interval_ms
            ),
            "quota.window.num": self.quota_window_num,
            "quota.window.size.seconds": self.quota_window_size_seconds,
        }

    def __post_init__(self) -> None:
        for name, value in self._counts().items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"'{name}' must be a positive integer, got {value!r}")
        if self.transaction_version not in (1, 2) or isinstance(self.transaction_version, bool):
            raise ConfigError(
                f"'transaction.version' must be 1 or 2, got {self.transaction_version!r}"
            )
        queued = self.queued_max_request_bytes
        if (
            not isinstance(queued, int)
            or isinstance(queued, bool)
            or not (queued > 0 or queued == -1)
        ):
            raise ConfigError(
                "'queued.max.request.bytes' must be a positive number of bytes or -1 (no "
                f"bound), got {queued!r}"
            )
        reauth_ms = self.connections_max_reauth_ms
        if not isinstance(reauth_ms, int) or isinstance(reauth_ms, bool) or reauth_ms < 0:
            raise ConfigError(
                "'connections.max.reauth.ms' must be 0 (sessions never expire) or a positive "
                f"number of milliseconds, got {reauth_ms!r}"
            )
        delay_ms = self.connection_failed_authentication_delay_ms
        if (
            not isinstance(delay_ms, int)
            or isinstance(delay_ms, bool)
            or not 0 <= delay_ms < self.connections_max_idle_ms
        ):
            raise ConfigError(
                "'connection.failed.authentication.delay.ms' must be 0 (answer at once) or a "
                f"number of milliseconds below 'connections.max.idle.ms' "
                f"({self.connections_max_idle_ms}), got {delay_ms!r}"
            )
        rebalance_delay_ms = self.group_initial_rebalance_delay_ms
        if (
            not isinstance(rebalance_delay_ms, int)
            or isinstance(rebalance_delay_ms, bool)
            or rebalance_delay_ms < 0
        ):
            raise ConfigError(
                "'group.initial.rebalance.delay.ms' must be 0 or a positive number of "
                f"milliseconds, got {rebalance_delay_ms!r}"
            )
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ConfigError(
                f"'group.max.session.timeout.ms' ({self.group_max_session_timeout_ms}) is "
                f"below 'group.min.session.timeout.ms' ({self.group_min_session_timeout_ms})"
            )
        quota_settings: tuple[tuple[str, float | None, bool], ...] = (
            ("quota.producer.byte.rate", self.quota_producer_byte_rate, True),
            ("quota.consumer.byte.rate", self.quota_consumer_byte_rate, True),
            ("quota.request.percentage", self.quota_request_percentage, False),
            ("quota.controller.mutation.rate", self.quota_controller_mutation_rate, False),
        )
        for setting, quota, whole in quota_settings:
            if quota is None:
                continue
            kinds = (int,) if whole else (int, float)
            if not isinstance(quota, kinds) or isinstance(quota, bool) or not 0 < quota < 2**63:
                unit = "a positive whole number" if whole else "a positive number"
                raise ConfigError(
                    f"'{setting}' must be {unit} (or unset: unlimited), got {quota!r}"
                )
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"listener port must be 0..65535, got {self.port}")
        if self.num_partitions > self.max_partitions_per_topic:
            raise ConfigError(
                f"'num.partitions' ({self.num_partitions}) must be at most "
                f"'max.partitions.per.topic' ({self.max_partitions_per_topic})"
            )
        if self.log_segment_bytes < 1024:
            raise ConfigError(
                f"'log.segment.bytes' must be at least 1024, got {self.log_segment_bytes}"
            )
        if not _CLUSTER_ID.match(self.cluster_id):
            raise ConfigError(f"cluster id must match {_CLUSTER_ID.pattern}: {self.cluster_id!r}")
        self._check_security()

    def _check_security(self) -> None:
        """The shape of the TLS and SASL settings (the PEM files are read by
        ``ssl_context``, the SCRAM credentials derived by ``sasl_server``)."""
        protocol = self.security_protocol
        if not isinstance(protocol, str) or protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                "'security.protocol' must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, "
                f"got {protocol!r}"
            )
        protocol = protocol.upper()
        object.__setattr__(self, "security_protocol", protocol)
        if self.ssl_client_auth not in SSL_CLIENT_AUTH:
            raise ConfigError(
                "'ssl.client.auth' must be none, requested or required, "
                f"got {self.ssl_client_auth!r}"
            )
        self._check_sasl_settings()
        if self.ssl_key_password is not None and not isinstance(self.ssl_key_password, str):
            raise ConfigError(
                "'ssl.key.password' must be a string, got a value of type "
                f"{type(self.ssl_key_password).__name__} (not shown: it is secret)"
            )
        if self.tls:
            if not self.ssl_keystore_location:
                raise ConfigError(
                    f"'security.protocol' {protocol} needs 'ssl.keystore.location' "
                    "(a PEM file with the broker's private key and certificate chain)"
                )
        else:
            # ssl.* settings would be silently ignored, which hides a mistake
            ssl_settings = {
                "ssl.keystore.location": self.ssl_keystore_location,
                "ssl.key.password": self.ssl_key_password,
                "ssl.truststore.location": self.ssl_truststore_location,
                "ssl.client.auth": None if self.ssl_client_auth == "none" else self.ssl_client_auth,
            }
            for name, value in ssl_settings.items():
                if value is not None:
                    tls_protocol = "SASL_SSL" if self.sasl else "SSL"
                    raise ConfigError(
                        f"'{name}' is set but 'security.protocol' is {protocol}: "
                        f"set security.protocol={tls_protocol} (or leave the ssl.* settings out)"
                    )
        password_mechanisms = _PASSWORD_MECHANISMS.intersection(self.sasl_enabled_mechanisms)
        if self.sasl and not self.sasl_users and password_mechanisms:
            raise ConfigError(
                f"'security.protocol' {protocol} needs at least one user in 'sasl.users' "
                "(kclient-broker --sasl-users-file FILE): nobody could authenticate with "
                f"{', '.join(sorted(password_mechanisms))}"
            )
        self._check_oauthbearer()

    def _check_oauthbearer(self) -> None:
        for name, value in check_oauthbearer_settings(self).items():
            object.__setattr__(self, name, value)

    def _check_sasl_settings(self) -> None:
        """Normalize and check ``sasl.enabled.mechanisms`` and ``sasl.users``; refuse them
        on a listener without SASL (they would be silently ignored)."""
        mechanisms = self.sasl_enabled_mechanisms
        if isinstance(mechanisms, str):
            mechanisms = tuple(mechanisms.split(","))
        if not isinstance(mechanisms, (tuple, list)) or not all(
            isinstance(m, str) for m in mechanisms
        ):
            raise ConfigError(
                f"'sasl.enabled.mechanisms' must be a list of mechanism names, got {mechanisms!r}"
            )
        names = tuple(dict.fromkeys(m.strip().upper() for m in mechanisms if m.strip()))
        unknown = [m for m in names if m not in ALL_MECHANISMS]
        if unknown:
            raise ConfigError(
                f"'sasl.enabled.mechanisms' lists {', '.join(unknown)}, which the embedded "
                f"broker does not serve (it serves {', '.join(ALL_MECHANISMS)})"
            )
        if ("GSSAPI" in names) != (self.sasl_kerberos_keytab is not None):
            raise ConfigError(
                "'sasl.enabled.mechanisms' GSSAPI needs 'sasl.kerberos.keytab' (the broker's "
                "keytab; kclient-broker --sasl-kerberos-keytab FILE)"
                if "GSSAPI" in names
                else "'sasl.kerberos.keytab' is set but 'sasl.enabled.mechanisms' has no GSSAPI"
            )
        if not names:
            raise ConfigError(
                f"'sasl.enabled.mechanisms' is empty; enable some of {', '.join(MECHANISMS)}"
            )
        object.__setattr__(self, "sasl_enabled_mechanisms", names)
        users = self.sasl_users
        if not isinstance(users, Mapping):
            raise ConfigError(
                f"'sasl.users' must map user names to passwords, got {type(users).__name__}"
            )
        for name, password in users.items():
            if not isinstance(name, str) or not name or "\0" in name:
                raise ConfigError(
                    f"'sasl.users' has a bad user name {name!r} (empty, or not a string, "
                    "or with a NUL character)"
                )
            if not isinstance(password, str) or not password or "\0" in password:
                raise ConfigError(
                    f"'sasl.users': the password of {name!r} must be a non-empty string "
                    "without NUL characters"
                )
        object.__setattr__(self, "sasl_users", MappingProxyType(dict(users)))
        if self.sasl:
            return
        sasl_settings = {
            "sasl.users": bool(users),
            "sasl.enabled.mechanisms": names != DEFAULT_SASL_MECHANISMS,
            "sasl.server.max.receive.size": (
                self.sasl_server_max_receive_size != DEFAULT_MAX_RECEIVE_SIZE
            ),
            "connections.max.reauth.ms": self.connections_max_reauth_ms != 0,
            "connection.failed.authentication.delay.ms": (
                self.connection_failed_authentication_delay_ms
                != DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
            ),
        }
        for name, is_set in sasl_settings.items():
            if is_set:
                sasl_protocol = "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
                raise ConfigError(
                    f"'{name}' is set but 'security.protocol' is {self.security_protocol}: "
                    f"set security.protocol={sasl_protocol} (or leave '{name}' out)"
                )

    @property
    def tls(self) -> bool:
        """Whether the listener speaks TLS (``security.protocol`` SSL or SASL_SSL)."""
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """Whether clients must authenticate with SASL (SASL_PLAINTEXT or SASL_SSL)."""
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The listener's server-side TLS context, or None without TLS.

        Reads the PEM files now, so a missing or unusable file is a ``ConfigError`` naming
        its setting (``ssl.keystore.location`` ...) before any socket is opened. Built once
        per cluster and shared by every Processor (an ``SSLContext`` is thread-safe).
        """
        if not self.tls:
            return None
        assert self.ssl_keystore_location is not None
        return server_context(
            keystore_location=self.ssl_keystore_location,
            key_password=self.ssl_key_password,
            truststore_location=self.ssl_truststore_location,
            client_auth=self.ssl_client_auth,
        )

    def sasl_server(self) -> SaslServer | None:
        """The listener's SASL mechanisms and users, or None without SASL.

        Derives the SCRAM credentials (salted PBKDF2, 4096 iterations) now: built once per
        cluster and shared by every Processor, never per connection.
        """
        if not self.sasl:
            return None
        return SaslServer(
            self.sasl_enabled_mechanisms,
            self.sasl_users,
            max_receive_size=self.sasl_server_max_receive_size,
            connections_max_reauth_ms=self.connections_max_reauth_ms,
            failed_authentication_delay_ms=self.connection_failed_authentication_delay_ms,
            oauth_validator=oauth_validator(self),
            gssapi=None
            if self.sasl_kerberos_keytab is None
            else GssapiAcceptor(  # reads the keytab now: a bad one fails here
                self.sasl_kerberos_service_name,
                self.sasl_kerberos_keytab,
                self.sasl_kerberos_principal,
            ),
        )

    def quota_defaults(self) -> dict[str, float]:
        """The per-client quotas set by these settings (quota key -> value)."""
        defaults = {
            "producer_byte_rate": self.quota_producer_byte_rate,
            "consumer_byte_rate": self.quota_consumer_byte_rate,
            "request_percentage": self.quota_request_percentage,
            "controller_mutation_rate": self.quota_controller_mutation_rate,
        }
        return {k: float(v) for k, v in defaults.items() if v is not None}

    def replace(self, **changes: Any) -> BrokerConfig:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)


def parse_listen(value: str) -> tuple[str, int]:
    """``'HOST:PORT'`` (or ``':PORT'``, or ``'PORT'``) -> (host, port)."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(
            f"--listen expects HOST:PORT (e.g. 127.0.0.1:9092), got {value!r}"
        ) from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"--listen port must be 0..65535, got {port}")
    return host, port
