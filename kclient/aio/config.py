"""aiokafka's ``AIOKafkaProducer`` constructor keywords → kclient producer settings.

No Kafka counterpart (Java has one set of names); runs on the caller's thread when an
``AIOKafkaProducer`` is built. Kafka's dotted names and kclient's snake_case names pass
through unchanged (``ProducerConfig`` checks them); aiokafka's own names are renamed;
a keyword kclient cannot honour raises ``ConfigError`` saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kclient.errors import ConfigError

#: aiokafka's constructor keywords and the settings they are.
AIOKAFKA_NAMES = {
    "bootstrap_servers": "bootstrap.servers",
    "client_id": "client.id",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "request_timeout_ms": "request.timeout.ms",
    "acks": "acks",
    "key_serializer": "key.serializer",
    "value_serializer": "value.serializer",
    "compression_type": "compression.type",
    "max_batch_size": "batch.size",
    "max_request_size": "max.request.size",
    "linger_ms": "linger.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "security_protocol": "security.protocol",
    "ssl_context": "ssl.context",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "enable_idempotence": "enable.idempotence",
    "transactional_id": "transactional.id",
    "transaction_timeout_ms": "transaction.timeout.ms",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_oauth_token_provider": "sasl_oauth_token_provider",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
}
_UNSUPPORTED = {
    "sasl_kerberos_domain_name": "not supported: GSSAPI uses the host name each connection is "
    "made to (list the brokers by the host names in their principals)",
}
#: Defaults that differ from ``KafkaProducer``'s, as aiokafka's: no linger.
_DEFAULTS = {"linger.ms": 0}


def producer_settings(kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """aiokafka keywords and Kafka's names → producer settings, and ``max.block.ms``."""
    settings: dict[str, Any] = dict(_DEFAULTS)
    for name, value in kwargs.items():
        if name in _UNSUPPORTED:
            raise ConfigError(f"{name!r}: {_UNSUPPORTED[name]}")
        if name == "loop":
            if value is not None:
                raise ConfigError("'loop' is not supported: the producer uses the running loop")
            continue
        if name == "api_version":
            if value not in (None, "auto"):
                raise ConfigError(
                    f"'api_version' {value!r} is not supported: kclient asks each broker "
                    "(ApiVersions) and uses the newest versions both support; leave it out"
                )
            continue
        if name == "partitioner" and value is not None:
            value = _adapt_partitioner(value)
        if name == "compression_type" and value is None:
            value = "none"
        if name == "bootstrap_servers" and not isinstance(value, str):
            value = ",".join(value)
        settings[AIOKAFKA_NAMES.get(name, name)] = value
    max_block_ms = settings.pop("max.block.ms", settings.pop("max_block_ms", 60_000))
    if not isinstance(max_block_ms, int) or isinstance(max_block_ms, bool) or max_block_ms < 0:
        raise ConfigError(f"'max.block.ms' must be a non-negative int, got {max_block_ms!r}")
    return settings, max_block_ms


def _adapt_partitioner(partitioner: Any) -> Callable[[str, bytes | None, int], int]:
    """aiokafka calls ``partitioner(key_bytes, all_partitions, available_partitions)``."""

    def partition(topic: str, key: bytes | None, num_partitions: int) -> int:
        partitions = list(range(num_partitions))
        return int(partitioner(key, partitions, partitions))

    return partition
