"""ProducerConfig: Java's ``ProducerConfig``, one typed and validated object.

Built once by the caller's thread in ``KafkaProducer.__init__`` and read-only afterwards
(shared by every thread).

Settings are accepted under their Kafka names (``linger.ms``) or in snake_case
(``linger_ms``), from a dict, from keyword arguments, or both. Values may be given as
Python values or as the strings a Java ``.properties`` file would hold (``"5"``,
``"true"``). Defaults are those of the current Java producer. Differences from Java:

* ``client.id`` defaults to ``producer-<n>`` as in Java (n counts producers in the process).
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
  -> partition``. Transactions are not supported.
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
  ``ssl.*`` settings with ``security.protocol=PLAINTEXT`` are a ``ConfigError``.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

from kclient.errors import ConfigError
from kclient.sasl import SaslCredentials
from kclient.tls import SECURITY_PROTOCOLS

log = logging.getLogger(__name__)

INT32_MAX = 2_147_483_647
INT64_MAX = 9_223_372_036_854_775_807
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS_ALL = -1

_client_ids = itertools.count(1)


# ---- value parsers ------------------------------------------------------------------------


#: Settings whose values are never shown: not by ``repr``, not in any error or log line.
SECRET_SETTINGS = frozenset(
    {"ssl.key.password", "ssl.keystore.key", "sasl.password", "sasl.jaas.config"}
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


def _parse_partitioner(name: str, value: object) -> object:
    if value is None or callable(value):
        return value
    raise _type_error(name, "a callable (topic, key_bytes, num_partitions) -> int", value)


def _parse_security_protocol(name: str, value: object) -> str:
    text = _parse_str(name, value).strip().upper()
    if text not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{name!r} must be one of {', '.join(SECURITY_PROTOCOLS)}; got {value!r}")
    return text


def _parse_optional_str(name: str, value: object) -> str | None:
    return None if value is None else _parse_str(name, value)


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


def _parse_ssl_context(name: str, value: object) -> object:
    if value is None or isinstance(value, ssl.SSLContext):
        return value
    raise _type_error(name, "an ssl.SSLContext", value)


# ---- the settings table --------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    name: str
    parse: Callable[[str, object], Any]
    default: object
    low: int | None = None
    high: int | None = None

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


def _int(name: str, default: int, low: int | None = 0, high: int | None = None) -> _Setting:
    return _Setting(name, _parse_int, default, low, high)


# fmt: off
_SETTINGS: tuple[_Setting, ...] = (
    _Setting("bootstrap.servers", _parse_servers, None),
    _Setting("client.id", _parse_str, ""),
    _Setting("acks", _parse_acks, ACKS_ALL),
    _Setting("enable.idempotence", _parse_bool, True),
    _int("batch.size", 16_384, 0, INT32_MAX),
    _int("linger.ms", 5, 0, INT32_MAX),
    _int("buffer.memory", 32 * 1024 * 1024, 0, INT64_MAX),
    _int("max.block.ms", 60_000, 0, INT64_MAX),
    _int("max.request.size", 1024 * 1024, 0, INT32_MAX),
    _int("max.in.flight.requests.per.connection", 5, 1, INT32_MAX),
    _int("retries", INT32_MAX, 0, INT32_MAX),
    _int("delivery.timeout.ms", 120_000, 0, INT32_MAX),
    _int("request.timeout.ms", 30_000, 0, INT32_MAX),
    _int("retry.backoff.ms", 100, 0, INT64_MAX),
    _int("retry.backoff.max.ms", 1_000, 0, INT64_MAX),
    _int("reconnect.backoff.ms", 50, 0, INT64_MAX),
    _int("reconnect.backoff.max.ms", 1_000, 0, INT64_MAX),
    _int("socket.connection.setup.timeout.ms", 10_000, 0, INT64_MAX),
    _int("socket.connection.setup.timeout.max.ms", 30_000, 0, INT64_MAX),
    _int("connections.max.idle.ms", 540_000, -1, INT64_MAX),
    _int("send.buffer.bytes", 128 * 1024, -1, INT32_MAX),
    _int("receive.buffer.bytes", 32 * 1024, -1, INT32_MAX),
    _int("receive.message.max.bytes", 100_000_000, 1000, INT32_MAX),
    _int("metadata.max.age.ms", 300_000, 0, INT64_MAX),
    _int("metadata.max.idle.ms", 300_000, 5_000, INT64_MAX),
    _Setting("compression.type", _parse_compression, "none"),
    _int("compression.gzip.level", -1, -1, 9),
    _int("compression.lz4.level", 9, 1, 17),
    _int("compression.zstd.level", 3, -131_072, 22),
    _Setting("partitioner.ignore.keys", _parse_bool, False),
    _Setting("partitioner", _parse_partitioner, None),
    _Setting("key.serializer", _parse_callable_or_name, None),
    _Setting("value.serializer", _parse_callable_or_name, None),
    _Setting("security.protocol", _parse_security_protocol, "PLAINTEXT"),
    _Setting("ssl.truststore.location", _parse_optional_str, None),
    _Setting("ssl.truststore.certificates", _parse_optional_str, None),
    _Setting("ssl.truststore.type", _parse_store_type, "PEM"),
    _Setting("ssl.keystore.location", _parse_optional_str, None),
    _Setting("ssl.keystore.certificate.chain", _parse_optional_str, None),
    _Setting("ssl.keystore.key", _parse_optional_str, None),
    _Setting("ssl.keystore.type", _parse_store_type, "PEM"),
    _Setting("ssl.key.password", _parse_optional_str, None),
    _Setting("ssl.endpoint.identification.algorithm", _parse_endpoint_identification, "https"),
    _Setting("ssl.context", _parse_ssl_context, None),
    _Setting("ssl.certificate.location", _parse_optional_str, None),
    _Setting("ssl.key.location", _parse_optional_str, None),
    _Setting("sasl.mechanism", _parse_sasl_mechanism, "GSSAPI"),
    _Setting("sasl.username", _parse_optional_str, None),
    _Setting("sasl.password", _parse_optional_str, None),
    _Setting("sasl.jaas.config", _parse_optional_str, None),
)
# fmt: on

_BY_NAME: dict[str, _Setting] = {}
for _s in _SETTINGS:
    _BY_NAME[_s.name] = _s
    _BY_NAME[_s.attr] = _s

#: librdkafka's (confluent-kafka's) names for the same settings, accepted as they are.
_ALIASES = {"ssl.ca.location": "ssl.truststore.location", "sasl.mechanisms": "sasl.mechanism"}
for _alias, _name in _ALIASES.items():
    _BY_NAME[_alias] = _BY_NAME[_alias.replace(".", "_")] = _BY_NAME[_name]

_PEM_ONLY = (
    "kclient reads PEM files only, which have no store password; the password of an "
    "encrypted PEM private key is 'ssl.key.password'"
)
_UNSUPPORTED = {
    "transactional.id": "transactions are not supported by kclient",
    "transaction.timeout.ms": "transactions are not supported by kclient",
    "sasl.oauthbearer.token.endpoint.url": "SASL OAUTHBEARER is not supported by kclient",
    "sasl.kerberos.service.name": "SASL GSSAPI (Kerberos) is not supported by kclient",
    "ssl.keystore.password": _PEM_ONLY,
    "ssl.truststore.password": _PEM_ONLY,
}


def _suggest(key: str) -> str:
    names = [s.name for s in _SETTINGS] + [s.attr for s in _SETTINGS]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(key.replace("_", "."), names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class ProducerConfig:
    """Every producer setting, parsed, range-checked and cross-validated.

    ``ProducerConfig({"linger.ms": 5}, batch_size=32768)``. Attributes use snake_case
    (``config.linger_ms``); ``explicit`` holds the Kafka names the user set.
    """

    bootstrap_servers: tuple[str, ...]
    client_id: str
    acks: int
    enable_idempotence: bool
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
    connections_max_idle_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    receive_message_max_bytes: int
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    partitioner_ignore_keys: bool
    partitioner: Callable[[str, bytes | None, int], int] | None
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
    sasl: SaslCredentials | None
    """With SASL_*: the mechanism and credentials, checked."""
    explicit: frozenset[str]

    SETTING_NAMES: ClassVar[tuple[str, ...]] = tuple(s.name for s in _SETTINGS)

    def __init__(self, config: Mapping[str, object] | None = None, /, **kwargs: object) -> None:
        given: dict[str, object] = {}
        for source in (config or {}, kwargs):
            if not isinstance(source, Mapping):
                raise ConfigError(f"config must be a dict of settings, got {type(source).__name__}")
            for key, value in source.items():
                if not isinstance(key, str):
                    raise ConfigError(f"setting names must be strings, got {key!r}")
                setting = _BY_NAME.get(key)
                if setting is None:
                    reason = _UNSUPPORTED.get(key.replace("_", "."))
                    if reason is not None:
                        raise ConfigError(f"{key!r}: {reason}")
                    raise ConfigError(f"unknown producer setting {key!r}{_suggest(key)}")
                if setting.name in given:
                    raise ConfigError(
                        f"{setting.name!r} is given twice (under two of its names: Kafka's, "
                        "snake_case or librdkafka's)"
                    )
                given[setting.name] = value
        values: dict[str, object] = {}
        for setting in _SETTINGS:
            if setting.name in given:
                values[setting.name] = self._parse(setting, given[setting.name])
            else:
                values[setting.name] = setting.default
        self._cross_validate(values, frozenset(given))
        for name, value in values.items():
            object.__setattr__(self, _BY_NAME[name].attr, value)
        object.__setattr__(self, "explicit", frozenset(given))
        object.__setattr__(self, "sasl", _sasl_credentials(values, frozenset(given)))

    @staticmethod
    def _parse(setting: _Setting, raw: object) -> object:
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
        return {s.name: getattr(self, s.attr) for s in _SETTINGS}

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={self._shown(name)}" for name in sorted(self.explicit))
        return f"ProducerConfig({shown})"

    def _shown(self, name: str) -> str:
        return "[hidden]" if name in SECRET_SETTINGS else repr(getattr(self, _BY_NAME[name].attr))

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
    """Java's ``postProcessAndValidateIdempotenceConfigs``."""
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


def _sasl_credentials(values: dict[str, Any], explicit: frozenset[str]) -> SaslCredentials | None:
    protocol = values["security.protocol"]
    if not protocol.startswith("SASL_"):
        given = sorted(name for name in explicit if name.startswith("sasl."))
        if given:
            raise ConfigError(
                f"{', '.join(repr(n) for n in given)} given, but 'security.protocol' is "
                f"{protocol}: set it to SASL_SSL (or SASL_PLAINTEXT) to use SASL"
            )
        return None
    return SaslCredentials.from_settings(
        values["sasl.mechanism"],
        values["sasl.username"],
        values["sasl.password"],
        values["sasl.jaas.config"],
    )


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
