"""The producer's settings table: every setting's name, parser, default and range, and
the words the documentation's configuration reference is made of (``settings_markdown``).

The one place a producer setting is declared: ``ProducerConfig`` (``config``) parses and
validates by it, ``NetworkClientConfig.from_config`` takes its fields by name, and
the documentation's configuration reference is ``settings_markdown()``, rendered when the
docs are built (``docs/_ext/kclient_docs.py``). Immutable module data: any thread.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kclient.errors import ConfigError
from kclient.network.bootstrap_resolution import CLIENT_DNS_LOOKUPS
from kclient.tls import SECURITY_PROTOCOLS

INT32_MAX = 2_147_483_647
INT64_MAX = 9_223_372_036_854_775_807
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

PYTHON_BATCH_SIZE = 131_072
"""kclient's ``batch.size`` default (Java's is 16384; see the setting's words)."""
ACKS_ALL = -1


# ---- value parsers ------------------------------------------------------------------------


#: Settings whose values are never shown: not by ``repr``, not in any error or log line.
SECRET_SETTINGS = frozenset(
    {
        "ssl.key.password",
        "ssl.keystore.key",
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
    }
)


def _type_error(name: str, expected: str, value: object) -> ConfigError:
    if name in SECRET_SETTINGS:
        return ConfigError(
            f"{name!r} must be {expected}, got a value of type {type(value).__name__} "
            "(not shown: the setting is secret)"
        )
    return ConfigError(f"{name!r} must be {expected}, got {value!r} ({type(value).__name__})")


def _parse_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise _type_error(name, "an integer", value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _type_error(name, "an integer", value) from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _type_error(name, "an integer", value)


def _parse_bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _type_error(name, "true or false", value)


def _parse_str(name: str, value: object) -> str:
    if isinstance(value, str):
        return value
    raise _type_error(name, "a string", value)


def _parse_servers(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        items = [str(part).strip() for part in value]
    else:
        raise _type_error(name, "'host:port[,host:port...]' or a list of them", value)
    items = [item for item in items if item]
    if not items:
        raise ConfigError(f"{name!r} is required (e.g. '127.0.0.1:9092')")
    for item in items:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{name!r}: {item!r} is not host:port (e.g. '127.0.0.1:9092')")
    return tuple(items)


def _parse_acks(name: str, value: object) -> int:
    if isinstance(value, str) and value.strip().lower() == "all":
        return ACKS_ALL
    acks = _parse_int(name, value)
    if acks not in (-1, 0, 1):
        raise ConfigError(f"{name!r} must be one of all, -1, 0, 1; got {value!r}")
    return acks


def _parse_compression(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().lower()
    if text not in COMPRESSION_TYPES:
        raise ConfigError(f"{name!r} must be one of {', '.join(COMPRESSION_TYPES)}; got {value!r}")
    return text


def _parse_callable_or_name(name: str, value: object) -> object:
    if value is None or isinstance(value, str) or callable(value) or hasattr(value, "serialize"):
        return value
    raise _type_error(name, "a callable or a serializer name", value)


def _parse_stats_callback(name: str, value: object) -> object:
    if value is None or callable(value):
        return value
    raise _type_error(name, "a callable taking the statistics as a JSON string", value)


#: librdkafka's partitioner names (confluent-kafka's ``partitioner`` setting).
LIBRDKAFKA_PARTITIONERS = (
    "random",
    "consistent",
    "consistent_random",
    "murmur2",
    "murmur2_random",
    "fnv1a",
    "fnv1a_random",
)


def _parse_partitioner(name: str, value: object) -> object:
    if value is None or callable(value):
        return value
    if value == "murmur2_random":  # librdkafka's Java-compatible one: kclient's built-in
        return None
    if value in LIBRDKAFKA_PARTITIONERS:
        raise ConfigError(
            f"{name!r}: {value!r} is librdkafka's partitioner; kclient's built-in one is "
            "librdkafka's 'murmur2_random' (Java's murmur2 for keyed records; keyless ones "
            "stick to a partition for a batch): leave 'partitioner' out, or give a callable "
            "(topic, key_bytes, num_partitions) -> partition"
        )
    raise _type_error(name, "a callable (topic, key_bytes, num_partitions) -> int", value)


INTERCEPTOR_METHODS = ("on_send", "on_acknowledgement", "close")
"""What every object of ``interceptors`` must have (``kclient.producer.interceptors``)."""


def _parse_interceptors(name: str, value: object) -> tuple[object, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError(
            f"{name!r} must be a list of interceptor objects (with on_send, "
            f"on_acknowledgement and close), got {type(value).__name__}"
        )
    for index, interceptor in enumerate(value):
        missing = [m for m in INTERCEPTOR_METHODS if not callable(getattr(interceptor, m, None))]
        if missing:
            raise ConfigError(
                f"{name!r}: item {index} ({type(interceptor).__name__}) has no "
                f"{', '.join(missing)} method; an interceptor needs on_send(record), "
                "on_acknowledgement(metadata, exception) and close() (subclass "
                "kclient.ProducerInterceptor for the ones it does not need)"
            )
    return tuple(value)


def _parse_security_protocol(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().upper()
    if text not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{name!r} must be one of {', '.join(SECURITY_PROTOCOLS)}; got {value!r}")
    return text


def _parse_optional_str(name: str, value: object) -> str | None:
    return None if value is None else _parse_str(name, value)


def _parse_transactional_id(name: str, value: object) -> str | None:
    text = _parse_optional_str(name, value)
    if text is not None and not text.strip():
        raise ConfigError(f"{name!r} must not be empty: give a name, or leave it unset")
    return text


def _parse_store_type(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().upper()
    if text != "PEM":
        raise ConfigError(
            f"{name!r} must be PEM (got {value!r}): kclient reads PEM files only; convert a "
            "JKS or PKCS12 store with keytool -importkeystore and openssl pkcs12 -nodes"
        )
    return text


def _parse_endpoint_identification(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().lower()
    if text not in ("https", ""):
        raise ConfigError(
            f"{name!r} must be 'https' (verify the broker's host name) or '' (don't); got {value!r}"
        )
    return text


def _parse_sasl_mechanism(name: str, value: object) -> str:
    return _parse_str(name, value).strip().upper()


def _parse_oauth_callback(name: str, value: object) -> object:
    if value is None or callable(value):
        return value
    raise _type_error(name, "a callable: oauth_cb(config_str) -> (token, expiry_s)", value)


def _parse_object(name: str, value: object) -> object:
    return value


def _parse_oauth_method(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().lower()
    if text not in ("default", "oidc"):
        raise ConfigError(f"{name!r} must be 'default' or 'oidc', got {value!r}")
    return text


def _parse_recovery_strategy(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().lower()
    if text not in ("rebootstrap", "none"):
        raise ConfigError(f"{name!r} must be 'rebootstrap' or 'none', got {value!r}")
    return text


def _parse_client_dns_lookup(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().lower()
    if text not in CLIENT_DNS_LOOKUPS:
        removed = (
            " ('default' was removed in Kafka 3.0, KIP-602: use_all_dns_ips is the default)"
            if text == "default"
            else ""
        )
        raise ConfigError(
            f"{name!r} must be one of {', '.join(CLIENT_DNS_LOOKUPS)}; got {value!r}{removed}"
        )
    return text


def _parse_ssl_context(name: str, value: object) -> object:
    if value is None or isinstance(value, ssl.SSLContext):
        return value
    raise _type_error(name, "an ssl.SSLContext", value)


# ---- the settings table --------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One producer setting: how it is parsed and checked, and how the reference shows it."""

    name: str
    parse: Callable[[str, object], Any]
    default: object
    low: int | None = None
    high: int | None = None
    #: what it does (the reference's "meaning" column)
    doc: str = ""
    #: the default as the reference shows it, when not simply the value
    shown: str | None = None
    #: the Java producer's default as the reference shows it, when not the same as ours
    java: str | None = None

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")

    def shown_default(self) -> str:
        if self.shown is not None:
            return self.shown
        value = self.default
        if value is None:
            return "none"
        if isinstance(value, bool):
            return f"`{str(value).lower()}`"
        if isinstance(value, str):
            return f"`{value}`"
        return str(value)


def _int(
    name: str,
    default: int,
    low: int | None = 0,
    high: int | None = None,
    doc: str = "",
    *,
    java: str | None = None,
) -> Setting:
    return Setting(name, _parse_int, default, low, high, doc, java=java)


def _str(name: str, doc: str, *, java: str | None = None) -> Setting:
    """An optional text setting (None by default)."""
    return Setting(name, _parse_optional_str, None, doc=doc, java=java)


_PEM = "must be `PEM` (convert JKS/PKCS12 with keytool and openssl)"

# fmt: off
#: SASL/OAUTHBEARER (``kclient.oauth``): where the token comes from.
_OAUTHBEARER = (
    Setting("oauth_cb", _parse_oauth_callback, None, java="(librdkafka's)",
            doc="OAUTHBEARER token provider: `oauth_cb(sasl.oauthbearer.config)` returns "
            "`(token, expiry_seconds_since_epoch[, principal[, extensions]])`"),
    Setting("sasl_oauth_token_provider", _parse_object, None, java="(aiokafka's)",
            doc="OAUTHBEARER token provider object with `async token()` (and optionally "
            "`extensions()`)"),
    Setting("sasl.oauthbearer.method", _parse_oauth_method, "default", java="(librdkafka's)",
            doc="`oidc`: fetch tokens from `sasl.oauthbearer.token.endpoint.url` (client "
            "credentials grant); `default`: from `oauth_cb` or an unsecured JWT"),
    _str("sasl.oauthbearer.token.endpoint.url", "the OIDC token endpoint (http or https; "
         "https uses the `ssl.*` trust settings)"),
    _str("sasl.oauthbearer.client.id", "OIDC client id",
         java="`sasl.oauthbearer.client.credentials.client.id`"),
    _str("sasl.oauthbearer.client.secret", "OIDC client secret",
         java="`sasl.oauthbearer.client.credentials.client.secret`"),
    _str("sasl.oauthbearer.scope", "OIDC scope requested"),
    _str("sasl.oauthbearer.extensions", "SASL extensions sent with the token "
         "(`key=value,key2=value2`, KIP-342)", java="(librdkafka's)"),
    _str("sasl.oauthbearer.config", "passed to `oauth_cb`; for unsecured JWTs "
         "`principal=<sub> scope=a,b lifeSeconds=3600 extension_<k>=<v>`",
         java="(librdkafka's)"),
    Setting("enable.sasl.oauthbearer.unsecure.jwt", _parse_bool, False, java="(librdkafka's)",
            doc="make unsigned JWTs from `sasl.oauthbearer.config` (for brokers with Kafka's "
            "unsecured validator: tests, development)"),
    _int("sasl.login.connect.timeout.ms", 10_000, 1, INT32_MAX,
         "OIDC token endpoint: connection timeout per attempt", java="(none)"),
    _int("sasl.login.read.timeout.ms", 10_000, 1, INT32_MAX,
         "OIDC token endpoint: read timeout per attempt", java="(none)"),
    _int("sasl.login.retry.backoff.ms", 100, 0, INT32_MAX,
         "OIDC token endpoint: first backoff after a failed attempt, doubling"),
    _int("sasl.login.retry.backoff.max.ms", 10_000, 0, INT32_MAX,
         "OIDC token endpoint: total backoff before giving up"),
)

SETTINGS: tuple[Setting, ...] = (
    Setting("bootstrap.servers", _parse_servers, None, shown="(required)", java="(required)",
            doc="`host:port` list used to find the cluster"),
    Setting("client.id", _parse_str, "", shown="`producer-N`",
            doc="name sent in every request header"),
    Setting("acks", _parse_acks, ACKS_ALL, shown="`all`",
            doc="`0` (no ack), `1` (leader), `all`/`-1` (all in-sync replicas)"),
    Setting("enable.idempotence", _parse_bool, True,
            doc="duplicate-free, ordered retries (implicitly off when `acks`≠all, `retries`=0 "
            "or in-flight > 5 are set without it)"),
    Setting("transactional.id", _parse_transactional_id, None,
            doc="makes the producer transactional (see Transactions); implies idempotence, so "
            "`enable.idempotence=false` or `acks`≠all, `retries`=0, in-flight > 5 with it are a "
            "`ConfigError`"),
    _int("transaction.timeout.ms", 60_000, 1, INT32_MAX,
         "the coordinator aborts a transaction open longer than this (at most the broker's "
         "`transaction.max.timeout.ms`)"),
    _int("batch.size", PYTHON_BATCH_SIZE, 0, INT32_MAX,
         "bytes per partition batch (reserved from `buffer.memory` while the batch is open). "
         "Larger than Java's: with 16 KiB a Python producer's I/O thread waits for the GIL "
         "(up to 5 ms, Python's switch interval) per answer, so 5 requests in flight bound it "
         "near 20 MB/s", java="16384"),
    _int("linger.ms", 5, 0, INT32_MAX, "how long a batch may wait for more records"),
    _int("buffer.memory", 32 * 1024 * 1024, 0, INT64_MAX,
         "bytes of records waiting to be sent; `send` blocks when full"),
    _int("max.block.ms", 60_000, 0, INT64_MAX,
         "longest `send` blocks for metadata or buffer space"),
    _int("max.request.size", 1024 * 1024, 0, INT32_MAX, "largest request (and record) sent"),
    _int("max.in.flight.requests.per.connection", 5, 1, INT32_MAX,
         "unanswered requests per broker"),
    _int("retries", INT32_MAX, 0, INT32_MAX,
         "retries of a failed batch (bounded by `delivery.timeout.ms`)"),
    _int("delivery.timeout.ms", 120_000, 0, INT32_MAX,
         "upper bound on the time to report success or failure of a `send`"),
    _int("request.timeout.ms", 30_000, 0, INT32_MAX, "how long to wait for a response"),
    _int("retry.backoff.ms", 100, 0, INT64_MAX,
         "backoff before retrying a batch or a failed metadata refresh, growing "
         "exponentially (±20 % jitter) up to `retry.backoff.max.ms`"),
    _int("retry.backoff.max.ms", 1_000, 0, INT64_MAX, "the most `retry.backoff.ms` grows to"),
    _int("reconnect.backoff.ms", 50, 0, INT64_MAX,
         "backoff before reconnecting to a broker, growing exponentially (±20 % jitter) up "
         "to `reconnect.backoff.max.ms`"),
    _int("reconnect.backoff.max.ms", 1_000, 0, INT64_MAX,
         "the most `reconnect.backoff.ms` grows to"),
    _int("socket.connection.setup.timeout.ms", 10_000, 0, INT64_MAX,
         "connection setup timeout, growing per failure up to the `.max.ms`"),
    _int("socket.connection.setup.timeout.max.ms", 30_000, 0, INT64_MAX,
         "the most the connection setup timeout grows to"),
    _int("bootstrap.refused.timeout.ms", 2_000, -1, INT64_MAX,
         "when every bootstrap server refuses connections (each resolved name tried, "
         "refused or no longer resolving, none ever connected), the first metadata wait "
         "(`send`, `partitions_for`, `kclient.aio`'s `start`) fails after this long with "
         "`BootstrapRefusedError` naming each address; -1: wait `max.block.ms`. Names that "
         "never resolved: `bootstrap.resolve.timeout.ms`", java="(none; kclient's)"),
    Setting("client.dns.lookup", _parse_client_dns_lookup, "use_all_dns_ips",
            doc="`use_all_dns_ips`: each connection tries the next address its broker's name "
            "resolves to; `resolve_canonical_bootstrap_servers_only` (KIP-235): each name of "
            "`bootstrap.servers` becomes the canonical names of its addresses (reverse "
            "lookup), which TLS host name verification and GSSAPI then use. When the names "
            "are resolved: `bootstrap.resolve.timeout.ms`"),
    _int("bootstrap.resolve.timeout.ms", 0, 0, INT64_MAX,
         "`0`: `bootstrap.servers` is resolved when the producer is created (`kclient.aio`: "
         "by `start`, on the loop); names that do not resolve are left out, and if none "
         "resolves that fails with `ConfigError`. Above 0 (KIP-909, evolving in Java): "
         "resolved by the I/O thread, retried every `retry.backoff.ms` until one resolves; "
         "after this long `send`, `partitions_for` and `start` fail with "
         "`BootstrapResolutionError` (final: create the producer again). Names that "
         "resolve but refuse: `bootstrap.refused.timeout.ms`"),
    _int("connections.max.idle.ms", 540_000, -1, INT64_MAX,
         "idle connections are closed after this"),
    _int("send.buffer.bytes", -1, -1, INT32_MAX,
         "socket send buffer; -1 (the default, not Java's 131072): the OS's, which grows with "
         "the traffic, as librdkafka's. A fixed 128 KiB buffer held a 1 MiB request back "
         "until the broker had read most of the one before"),
    _int("receive.buffer.bytes", 32 * 1024, -1, INT32_MAX,
         "socket receive buffer (-1: OS default)"),
    _int("receive.message.max.bytes", 100_000_000, 1000, INT32_MAX,
         "largest response accepted from a broker: a larger one closes the connection with "
         "an error naming this setting. Above any answer a producer expects (Metadata for a "
         "300,000-partition topic is 8-13 MB); buffers grow as bytes arrive, never by the "
         "announced size", java="(no limit; librdkafka's name and default)"),
    _int("statistics.interval.ms", 0, 0, 86_400_000,
         "how often `stats_cb` gets the producer's statistics as JSON, on a thread of their "
         "own (0: never)", java="(librdkafka's)"),
    Setting("stats_cb", _parse_stats_callback, None, java="(librdkafka's)",
            doc="`stats_cb(json_text)`: `metrics()` with librdkafka's `name`, `client_id`, "
            "`type`, `ts`, `time`, `age`, `msg_size`, `msg_size_max`; needs "
            "`statistics.interval.ms`"),
    Setting("enable.metrics.push", _parse_bool, True,
            doc="push the producer's metrics to the cluster when its brokers ask for them "
            "(KIP-714; only a broker with a client-telemetry plugin does, see Telemetry)"),
    _int("metadata.max.age.ms", 300_000, 0, INT64_MAX, "metadata refresh interval"),
    _int("metadata.max.idle.ms", 300_000, 5_000, INT64_MAX,
         "forget topics not produced to for this long"),
    Setting("metadata.recovery.strategy", _parse_recovery_strategy, "rebootstrap",
            doc="`rebootstrap`: when no known broker can be reached, or no metadata came for "
            "`metadata.recovery.rebootstrap.trigger.ms`, or a broker answers "
            "REBOOTSTRAP_REQUIRED, close every connection and start again from "
            "`bootstrap.servers` (names resolved anew); `none`: keep trying the brokers "
            "last known (KIP-899, KIP-1102)", java="`rebootstrap` (4.0+)"),
    _int("metadata.recovery.rebootstrap.trigger.ms", 300_000, 0, INT64_MAX,
         "with `rebootstrap`: how long metadata refreshes may fail before a rebootstrap"),
    Setting("metadata.cluster.check.enable", _parse_bool, True,
            doc="each connection says which cluster and node it is for (ApiVersions v5, "
            "KIP-1242): a broker of another cluster, or another node, refuses it, the "
            "connection is closed and the metadata refreshed (rebootstrapped with "
            "`metadata.recovery.strategy=rebootstrap`)"),
    Setting("compression.type", _parse_compression, "none",
            doc="`none`, `gzip`, `snappy`, `lz4`, `zstd`"),
    _int("compression.gzip.level", -1, -1, 9, "gzip level (-1: the codec's default)"),
    _int("compression.lz4.level", 9, 1, 17, "lz4 level"),
    _int("compression.zstd.level", 3, -131_072, 22, "zstd level"),
    Setting("partitioner.ignore.keys", _parse_bool, False,
            doc="use the sticky partitioner even for keyed records"),
    Setting("partitioner", _parse_partitioner, None, shown="built-in",
            doc="callable `(topic, key_bytes, num_partitions) -> partition`"),
    Setting("interceptors", _parse_interceptors, (), shown="none",
            doc="objects with `on_send(record)`, `on_acknowledgement(metadata, exception)` and "
            "`close()`, called in order (Java's `interceptor.classes`, as instances)"),
    Setting("key.serializer", _parse_callable_or_name, None, shown="bytes", java="(required)",
            doc="callable, object with `serialize(topic, data)`, or `bytes`, `str`, `json`, "
            "`int`, `long`"),
    Setting("value.serializer", _parse_callable_or_name, None, shown="bytes",
            java="(required)", doc="the same, for values"),
    Setting("security.protocol", _parse_security_protocol, "PLAINTEXT",
            doc="`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`"),
    Setting("ssl.truststore.location", _parse_optional_str, None, shown="system CAs",
            java="JVM CAs", doc="PEM file of the CA certificates to trust (`ssl.ca.location` "
            "is librdkafka's name)"),
    Setting("ssl.truststore.certificates", _parse_optional_str, None, shown="system CAs",
            java="JVM CAs", doc="the same as PEM text"),
    Setting("ssl.truststore.type", _parse_store_type, "PEM", java="`JKS`", doc=_PEM),
    _str("ssl.keystore.location",
         "PEM file with the client's private key and certificate chain (mutual TLS)"),
    _str("ssl.keystore.certificate.chain", "the client's certificate chain as PEM text"),
    _str("ssl.keystore.key", "the client's private key as PEM text"),
    Setting("ssl.keystore.type", _parse_store_type, "PEM", java="`JKS`", doc=_PEM),
    _str("ssl.key.password", "password of an encrypted private key"),
    Setting("ssl.endpoint.identification.algorithm", _parse_endpoint_identification, "https",
            doc="`https` checks the broker's host name against its certificate; `\"\"` does "
            "not"),
    Setting("ssl.context", _parse_ssl_context, None, java="(Python only)",
            doc="a ready `ssl.SSLContext`, used instead of the settings above"),
    _str("ssl.certificate.location", "the client certificate in a PEM file",
         java="(librdkafka's)"),
    _str("ssl.key.location", "the client certificate's key in a PEM file",
         java="(librdkafka's)"),
    Setting("sasl.mechanism", _parse_sasl_mechanism, "GSSAPI",
            doc="`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` or `GSSAPI` "
            "(Kerberos, with the `gssapi` extra)"),
    _str("sasl.username", "the SASL user", java="(librdkafka's)"),
    _str("sasl.password", "the SASL user's password", java="(librdkafka's)"),
    _str("sasl.jaas.config",
         "Java's form of the same (`PlainLoginModule`, `ScramLoginModule`, "
         "`OAuthBearerLoginModule`, or `Krb5LoginModule` with `keyTab=` and `principal=`)"),
    *_OAUTHBEARER,
    Setting("sasl.kerberos.service.name", _parse_str, "kafka",
            doc="GSSAPI: the first part of the brokers' Kerberos principal "
            "(`kafka/host@REALM`); the host is the one each connection is made to"),
    _str("sasl.kerberos.principal", "GSSAPI: the client's Kerberos principal "
         "(default: the keytab's or ticket cache's)", java="(librdkafka's)"),
    _str("sasl.kerberos.keytab", "GSSAPI: the client's keytab file (default: the ticket "
         "cache, from `kinit`)", java="(librdkafka's)"),
)
# fmt: on


def settings_markdown() -> str:
    """The configuration reference's table of producer settings, one row per setting."""
    rows = [
        "| setting | default | Java default | meaning |",
        "|---|---|---|---|",
    ]
    for s in SETTINGS:
        shown = s.shown_default()
        java = s.java if s.java is not None else shown
        rows.append(f"| `{s.name}` | {shown} | {java} | {s.doc} |")
    return "\n".join(rows) + "\n"


BY_NAME: dict[str, Setting] = {}
for _s in SETTINGS:
    BY_NAME[_s.name] = _s
    BY_NAME[_s.attr] = _s

#: librdkafka's (confluent-kafka's) and kafka-python's names for the same settings,
#: accepted as they are (kafka-python's ``ssl_cafile=`` keyword reads as ``ssl.cafile``).
ALIASES = {
    "ssl.ca.location": "ssl.truststore.location",
    "sasl.mechanisms": "sasl.mechanism",
    "ssl.cafile": "ssl.truststore.location",
    "ssl.certfile": "ssl.certificate.location",
    "ssl.keyfile": "ssl.key.location",
    "ssl.password": "ssl.key.password",
    "sasl.plain.username": "sasl.username",
    "sasl.plain.password": "sasl.password",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
}
for _alias, _name in ALIASES.items():
    BY_NAME[_alias] = BY_NAME[_alias.replace(".", "_")] = BY_NAME[_name]

_PEM_ONLY = (
    "kclient reads PEM files only, which have no store password; the password of an "
    "encrypted PEM private key is 'ssl.key.password'"
)
UNSUPPORTED = {
    "ssl.keystore.password": _PEM_ONLY,
    "ssl.truststore.password": _PEM_ONLY,
}
