"""ProducerConfig: Java's ``ProducerConfig``, one typed and validated object.

Built once by the caller's thread in ``KafkaProducer.__init__`` and read-only afterwards
(shared by every thread). Every setting is declared once, in ``kclient.settings`` (name,
parser, default, range and the documentation's words for it); this module applies the table
and checks the settings against each other.

Settings are accepted under their Kafka names (``linger.ms``) or in snake_case
(``linger_ms``), from a dict, from keyword arguments, or both. Values may be given as
Python values or as the strings a Java ``.properties`` file would hold (``"5"``,
``"true"``). Defaults are those of the current Java producer. Differences from Java:

* ``client.id`` defaults to ``producer-<n>`` as in Java (n counts producers in the process).
* ``batch.size`` defaults to 131072 (128 KiB), not Java's 16384. A Python producer's I/O
  thread needs the GIL for every answer while the caller's thread holds it in ``send()``,
  and waits up to Python's switch interval (5 ms) for it: with 16 KiB batches and 5
  requests in flight that bounds one partition near 20 MB/s (0.4-0.7x confluent-kafka at
  each one's defaults in ``benchmarks/producer_perf.py --defaults``). Each open batch
  reserves ``batch.size`` of ``buffer.memory`` (32 MiB): 256 partitions' batches at once.
* ``send.buffer.bytes`` defaults to -1 (the OS's socket buffer, which Linux grows with the
  traffic, as librdkafka leaves it), not Java's 131072. The next request in flight is
  written only once the one before is wholly in the socket, so with a fixed 128 KiB
  buffer a 1 MiB request waited for the broker to read most of the one before, and the
  broker waited for the I/O thread (which needs the GIL) to write the rest: 1 MiB
  batches went 20-40% slower (``benchmarks/producer_perf.py`` on tansu, 2026-11-29).
* Like Java, ``enable.idempotence`` is on by default, and if the user explicitly sets
  ``acks`` to something other than ``all``, ``retries`` to 0 or
  ``max.in.flight.requests.per.connection`` above 5 *without* setting
  ``enable.idempotence``, idempotence is switched off implicitly (Java's
  ``postProcessAndValidateIdempotenceConfigs``). Only an explicit
  ``enable.idempotence=true`` that conflicts with them is a ``ConfigError``.
* Like Java, ``delivery.timeout.ms`` must be at least ``linger.ms + request.timeout.ms``;
  when the user did not set it, it is raised to that sum instead of failing.
* Like Java (KIP-580), when ``retry.backoff.ms`` exceeds ``retry.backoff.max.ms`` the
  maximum is used as a constant backoff (the same holds for ``reconnect.backoff.*`` and
  ``socket.connection.setup.timeout.*``).
* ``receive.message.max.bytes`` (librdkafka's name; Java has no such limit, 100000000 by
  default as in librdkafka): a broker's response announced larger than this closes the
  connection with an error naming the setting, instead of being read into memory.
* ``key.serializer`` / ``value.serializer`` take a callable (``value -> bytes``), an object
  with Java's ``serialize(topic, data)`` method, or a name: ``bytes``, ``str``, ``json``,
  ``int``, ``long``. ``partitioner`` takes a callable ``(topic, key_bytes, num_partitions)
  -> partition``.
* ``transactional.id`` makes the producer transactional (``init_transactions`` …
  ``commit_transaction``) and implies idempotence: with it, ``enable.idempotence=false``
  or a setting idempotence cannot live with (``acks``, ``retries``,
  ``max.in.flight.requests.per.connection``) is a ``ConfigError`` naming them (Java's
  rule). ``transaction.timeout.ms`` (60000) is sent to the transaction coordinator, which
  aborts a transaction left open longer; without ``transactional.id`` it has no effect
  and a warning says so.
* The values of ``sasl.password``, ``ssl.key.password``, ``ssl.keystore.key`` and
  ``sasl.jaas.config`` (``SECRET_SETTINGS``) are never shown: not by ``repr``, not in an
  error (a wrongly typed one is reported by its type), not in a log line.
* TLS (``security.protocol=SSL``) takes PEM files only: ``ssl.truststore.location`` (CA
  certificates; the system's when unset), ``ssl.keystore.location`` (private key and
  certificate chain, for mutual TLS) and ``ssl.key.password``, or the same as PEM text in
  ``ssl.truststore.certificates`` / ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``;
  ``ssl.truststore.type`` / ``ssl.keystore.type`` default to (and must be) ``PEM``.
  ``ssl.endpoint.identification.algorithm`` is ``https`` (check the broker's name) or
  empty (don't). ``ssl.context`` (kclient only) takes a ready ``ssl.SSLContext`` instead.
  librdkafka's names work too: ``ssl.ca.location`` (= ``ssl.truststore.location``),
  ``ssl.certificate.location`` + ``ssl.key.location`` (certificate and key in two files),
  ``sasl.mechanisms`` (= ``sasl.mechanism``), ``sasl.username`` / ``sasl.password``.
* confluent-kafka's producer settings are taken under librdkafka's names too
  (``kclient.librdkafka``): ``queue.buffering.max.ms`` (= ``linger.ms``),
  ``queue.buffering.max.kbytes`` (KiB → ``buffer.memory`` bytes), ``message.timeout.ms``
  (= ``delivery.timeout.ms``, 0 = the largest), ``compression.codec``,
  ``socket.timeout.ms`` (= ``request.timeout.ms``), ``message.max.bytes`` (=
  ``max.request.size``) and more; a count where kclient bounds bytes
  (``queue.buffering.max.messages``, ``batch.num.messages``) or a callback that is an
  argument of ``send`` here (``on_delivery``) is a ``ConfigError`` naming what to set
  instead, and an unknown name gets a "did you mean" over both sets of names.
  ``ssl.*`` settings with ``security.protocol=PLAINTEXT`` are a ``ConfigError``.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NoReturn

from kclient import librdkafka
from kclient.errors import ConfigError
from kclient.sasl import Credentials, SaslCredentials, parse_jaas_config
from kclient.settings import (
    ACKS_ALL,
    BY_NAME,
    MAX_IN_FLIGHT_FOR_IDEMPOTENCE,
    SECRET_SETTINGS,
    SETTINGS,
    UNSUPPORTED,
    Setting,
)

log = logging.getLogger(__name__)

_client_ids = itertools.count(1)


def _suggest(key: str) -> str:
    """'; did you mean ...?' with the closest name kclient takes (its own or librdkafka's)."""
    names = [s.name for s in SETTINGS] + [s.attr for s in SETTINGS]
    names += sorted(librdkafka.LIBRDKAFKA_NAMES)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(key.replace("_", "."), names, n=1, cutoff=0.6)
    if not close:
        return ""
    mapped = librdkafka.MAPPED.get(close[0])
    if mapped is not None:
        return f"; did you mean {close[0]!r} (librdkafka's name for {mapped.setting!r})?"
    if close[0] in librdkafka.REFUSED:
        return f"; did you mean {close[0]!r}? ({librdkafka.REFUSED[close[0]]})"
    return f"; did you mean {close[0]!r}?"


class ProducerConfig:
    """Every producer setting, parsed, range-checked and cross-validated.

    ``ProducerConfig({"linger.ms": 5}, batch_size=32768)``. Attributes use snake_case
    (``config.linger_ms``); ``explicit`` holds the Kafka names the user set.
    """

    bootstrap_servers: tuple[str, ...]
    client_id: str
    acks: int
    enable_idempotence: bool
    transactional_id: str | None
    transaction_timeout_ms: int
    batch_size: int
    linger_ms: int
    buffer_memory: int
    max_block_ms: int
    max_request_size: int
    max_in_flight_requests_per_connection: int
    retries: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    bootstrap_refused_timeout_ms: int
    client_dns_lookup: str
    bootstrap_resolve_timeout_ms: int
    connections_max_idle_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    receive_message_max_bytes: int
    statistics_interval_ms: int
    stats_cb: Callable[[str], object] | None
    enable_metrics_push: bool
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    metadata_recovery_strategy: str
    metadata_recovery_rebootstrap_trigger_ms: int
    metadata_cluster_check_enable: bool
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    partitioner_ignore_keys: bool
    partitioner: Callable[[str, bytes | None, int], int] | None
    interceptors: tuple[Any, ...]
    key_serializer: object
    value_serializer: object
    security_protocol: str
    ssl_truststore_location: str | None
    ssl_truststore_certificates: str | None
    ssl_truststore_type: str
    ssl_keystore_location: str | None
    ssl_keystore_certificate_chain: str | None
    ssl_keystore_key: str | None
    ssl_keystore_type: str
    ssl_key_password: str | None
    ssl_endpoint_identification_algorithm: str
    ssl_context: ssl.SSLContext | None
    """With SSL: the given ``ssl.context``, else one built from the ``ssl.*`` settings."""
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    sasl_mechanism: str
    sasl_username: str | None
    sasl_password: str | None
    sasl_jaas_config: str | None
    oauth_cb: Callable[[str], object] | None
    sasl_oauth_token_provider: object
    sasl_oauthbearer_method: str
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: str | None
    sasl_oauthbearer_scope: str | None
    sasl_oauthbearer_extensions: str | None
    sasl_oauthbearer_config: str | None
    enable_sasl_oauthbearer_unsecure_jwt: bool
    sasl_login_connect_timeout_ms: int
    sasl_login_read_timeout_ms: int
    sasl_login_retry_backoff_ms: int
    sasl_login_retry_backoff_max_ms: int
    sasl_kerberos_service_name: str
    sasl_kerberos_principal: str | None
    sasl_kerberos_keytab: str | None
    sasl: Credentials | None
    """With SASL_*: the mechanism and credentials, checked."""
    explicit: frozenset[str]

    SETTING_NAMES: ClassVar[tuple[str, ...]] = tuple(s.name for s in SETTINGS)

    def __init__(self, config: Mapping[str, object] | None = None, /, **kwargs: object) -> None:
        given: dict[str, object] = {}
        for source in (config or {}, kwargs):
            if not isinstance(source, Mapping):
                raise ConfigError(f"config must be a dict of settings, got {type(source).__name__}")
            for key, value in source.items():
                if not isinstance(key, str):
                    raise ConfigError(f"setting names must be strings, got {key!r}")
                setting = BY_NAME.get(key)
                if setting is None:
                    reason = UNSUPPORTED.get(key.replace("_", "."))
                    if reason is not None:
                        raise ConfigError(f"{key!r}: {reason}")
                    translated = librdkafka.translate(key, value)  # or its ConfigError
                    if translated is None:
                        raise ConfigError(f"unknown producer setting {key!r}{_suggest(key)}")
                    name, value = translated
                    setting = BY_NAME[name]
                if setting.name in given:
                    raise ConfigError(
                        f"{setting.name!r} is given twice (under two of its names: Kafka's, "
                        "snake_case or librdkafka's)"
                    )
                given[setting.name] = value
        values: dict[str, object] = {}
        for setting in SETTINGS:
            if setting.name in given:
                values[setting.name] = self._parse(setting, given[setting.name])
            else:
                values[setting.name] = setting.default
        self._cross_validate(values, frozenset(given))
        for name, value in values.items():
            object.__setattr__(self, BY_NAME[name].attr, value)
        object.__setattr__(self, "explicit", frozenset(given))
        object.__setattr__(self, "sasl", _sasl_credentials(values, frozenset(given)))

    @staticmethod
    def _parse(setting: Setting, raw: object) -> object:
        value = setting.parse(setting.name, raw)
        if isinstance(value, int) and not isinstance(value, bool):
            if setting.low is not None and value < setting.low:
                raise ConfigError(f"{setting.name!r} must be at least {setting.low}, got {value}")
            if setting.high is not None and value > setting.high:
                raise ConfigError(f"{setting.name!r} must be at most {setting.high}, got {value}")
        return value

    @staticmethod
    def _cross_validate(values: dict[str, Any], explicit: frozenset[str]) -> None:
        if values["bootstrap.servers"] is None:
            raise ConfigError("'bootstrap.servers' is required (e.g. '127.0.0.1:9092')")
        if not values["client.id"]:
            values["client.id"] = f"producer-{next(_client_ids)}"
        _validate_idempotence(values, explicit)
        linger_ms, request_timeout_ms = values["linger.ms"], values["request.timeout.ms"]
        if values["delivery.timeout.ms"] < linger_ms + request_timeout_ms:
            if "delivery.timeout.ms" in explicit:
                raise ConfigError(
                    f"'delivery.timeout.ms' ({values['delivery.timeout.ms']}) must be at least "
                    f"'linger.ms' + 'request.timeout.ms' ({linger_ms} + {request_timeout_ms})"
                )
            values["delivery.timeout.ms"] = linger_ms + request_timeout_ms
            log.warning(
                "'delivery.timeout.ms' raised to linger.ms + request.timeout.ms = %d ms",
                values["delivery.timeout.ms"],
            )
        _validate_tls(values, explicit)
        if (values["statistics.interval.ms"] > 0) != (values["stats_cb"] is not None):
            raise ConfigError(
                "'statistics.interval.ms' and 'stats_cb' go together: set both (how often, "
                "and the callable that gets the statistics as JSON) or neither"
            )
        if values["batch.size"] > values["buffer.memory"]:
            raise ConfigError(
                f"'batch.size' ({values['batch.size']} bytes) is larger than 'buffer.memory' "
                f"({values['buffer.memory']} bytes): no batch would ever fit; lower "
                "'batch.size' or raise 'buffer.memory'"
            )
        for low, high in (
            ("retry.backoff.ms", "retry.backoff.max.ms"),
            ("reconnect.backoff.ms", "reconnect.backoff.max.ms"),
            ("socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms"),
        ):
            values[low] = min(values[low], values[high])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ProducerConfig is read-only; build a new one")

    def compression_level(self) -> int | None:
        """The level set for the configured codec; None means the codec's default
        (also for ``compression.gzip.level=-1``, Java's ``Deflater.DEFAULT_COMPRESSION``)."""
        codec = self.compression_type
        if (
            codec not in ("gzip", "lz4", "zstd")
            or f"compression.{codec}.level" not in self.explicit
        ):
            return None
        level: int = getattr(self, f"compression_{codec}_level")
        return None if codec == "gzip" and level == -1 else level

    def to_dict(self) -> dict[str, object]:
        """Every setting under its Kafka name (secrets included: never log the result)."""
        return {s.name: getattr(self, s.attr) for s in SETTINGS}

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={self._shown(name)}" for name in sorted(self.explicit))
        return f"ProducerConfig({shown})"

    def _shown(self, name: str) -> str:
        return "[hidden]" if name in SECRET_SETTINGS else repr(getattr(self, BY_NAME[name].attr))

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a ProducerConfig holds secrets and is not pickled; pickle the settings it was "
            "built from and build it again"
        )

    def __copy__(self) -> ProducerConfig:
        return self  # immutable

    def __deepcopy__(self, memo: object) -> ProducerConfig:
        return self


def _validate_idempotence(values: dict[str, Any], explicit: frozenset[str]) -> None:
    """Java's ``postProcessAndValidateIdempotenceConfigs``: a transactional id needs it."""
    conflicts: list[str] = []
    if values["acks"] != ACKS_ALL:
        conflicts.append(f"'acks' must be all (is {values['acks']})")
    in_flight = values["max.in.flight.requests.per.connection"]
    if in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(
            "'max.in.flight.requests.per.connection' must be at most "
            f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} (is {in_flight})"
        )
    if values["retries"] == 0:
        conflicts.append("'retries' must be greater than 0")
    transactional_id = values["transactional.id"]
    if transactional_id is None and "transaction.timeout.ms" in explicit:
        log.warning("'transaction.timeout.ms' has no effect without 'transactional.id'")
    if transactional_id is not None:
        if not values["enable.idempotence"]:
            raise ConfigError(
                "'transactional.id' is set, which needs idempotence, but 'enable.idempotence' "
                "is false. Remove 'enable.idempotence' (or set it to true), or remove "
                "'transactional.id'."
            )
        if conflicts:
            raise ConfigError(
                "'transactional.id' is set, which needs idempotence, but "
                + "; ".join(conflicts)
                + ". Change those settings or remove 'transactional.id'."
            )
    if not values["enable.idempotence"] or not conflicts:
        return
    if "enable.idempotence" in explicit:
        raise ConfigError(
            "'enable.idempotence' is true, but "
            + "; ".join(conflicts)
            + ". Change those settings or set 'enable.idempotence' to false."
        )
    log.info("idempotence disabled because %s", "; ".join(conflicts))
    values["enable.idempotence"] = False


def _sasl_credentials(values: dict[str, Any], explicit: frozenset[str]) -> Credentials | None:
    protocol = values["security.protocol"]
    if not protocol.startswith("SASL_"):
        given = sorted(name for name in explicit if name.startswith("sasl.") or "oauth" in name)
        if given:
            raise ConfigError(
                f"{', '.join(repr(n) for n in given)} given, but 'security.protocol' is "
                f"{protocol}: set it to SASL_SSL (or SASL_PLAINTEXT) to use SASL"
            )
        return None
    if values["sasl.mechanism"] == "OAUTHBEARER":
        return _oauthbearer_credentials(values)
    kerberos = sorted(name for name in explicit if name.startswith("sasl.kerberos."))
    if values["sasl.mechanism"] == "GSSAPI" and (
        kerberos or not any(values[n] is not None for n in ("sasl.username", "sasl.password"))
    ):
        from kclient.sasl_gssapi import GssapiCredentials

        try:
            return GssapiCredentials.from_config(values)
        except ConfigError as exc:
            if "sasl.mechanism" in explicit:
                raise
            raise ConfigError(
                f"{exc} ('sasl.mechanism' is not set: GSSAPI is Java's default; set it to "
                "PLAIN or SCRAM-SHA-256/512 to use a user and password)"
            ) from None
    if kerberos:
        raise ConfigError(
            f"{', '.join(repr(n) for n in kerberos)} given, but 'sasl.mechanism' is "
            f"{values['sasl.mechanism']}: set 'sasl.mechanism' to GSSAPI to use Kerberos"
        )
    return SaslCredentials.from_settings(
        values["sasl.mechanism"],
        values["sasl.username"],
        values["sasl.password"],
        values["sasl.jaas.config"],
    )


def _oauthbearer_credentials(values: dict[str, Any]) -> Credentials:
    from kclient.oauth import credentials_from_settings

    for name in ("sasl.username", "sasl.password"):
        if values[name] is not None:
            raise ConfigError(f"{name!r} is not used by OAUTHBEARER (it takes a token): remove it")
    jaas: dict[str, str] = {}
    if values["sasl.jaas.config"] is not None:
        module, jaas = parse_jaas_config(values["sasl.jaas.config"])
        if not module.endswith("OAuthBearerLoginModule"):
            shown = module if module.endswith("LoginModule") else "an unknown login module"
            raise ConfigError(
                f"'sasl.jaas.config' uses {shown}, which does not go with 'sasl.mechanism' "
                "OAUTHBEARER (use OAuthBearerLoginModule)"
            )
    return credentials_from_settings(values, jaas)


def _validate_tls(values: dict[str, Any], explicit: frozenset[str]) -> None:
    """Build the TLS context now, so that a missing or unreadable file fails here."""
    tls_settings = sorted(name for name in explicit if name.startswith("ssl."))
    if values["security.protocol"] not in ("SSL", "SASL_SSL"):
        if tls_settings:
            raise ConfigError(
                f"{', '.join(repr(n) for n in tls_settings)} given, but 'security.protocol' is "
                f"{values['security.protocol']}: set 'security.protocol' to SSL (or SASL_SSL) "
                "to use TLS"
            )
        return
    if values["ssl.context"] is not None:
        others = [n for n in tls_settings if n != "ssl.context"]
        if others:
            raise ConfigError(
                f"'ssl.context' is given: it replaces {', '.join(repr(n) for n in others)}; "
                "set those on the context instead"
            )
        return
    from kclient.tls import client_context

    values["ssl.context"] = client_context(
        truststore_location=values["ssl.truststore.location"],
        truststore_certificates=values["ssl.truststore.certificates"],
        keystore_location=values["ssl.keystore.location"],
        keystore_certificate_chain=values["ssl.keystore.certificate.chain"],
        keystore_key=values["ssl.keystore.key"],
        key_password=values["ssl.key.password"],
        check_hostname=values["ssl.endpoint.identification.algorithm"] == "https",
        certificate_location=values["ssl.certificate.location"],
        key_location=values["ssl.key.location"],
    )
