"""The embedded Kafka broker: Kafka's broker network layer and a minimal log, in Python.

Acceptor → Processors (``num.network.threads``) → RequestChannel (``queued.max.requests``)
→ RequestHandlerPool (``num.io.threads``) → Apis, as in Kafka (README, "The embedded
broker"). Uses only ``kclient.protocol``, ``kclient.record`` and ``kclient.errors``.

    from kclient.broker import EmbeddedBroker, EmbeddedCluster

    with EmbeddedBroker() as broker:            # one broker on a free 127.0.0.1 port
        broker.create_topic("events", partitions=3)
        ...broker.bootstrap_servers...

TLS listeners: ``EmbeddedBroker(security_protocol="SSL", ssl_keystore_location=PEM)``
(plus ``ssl_truststore_location`` and ``ssl_client_auth="required"`` for mutual TLS).
SASL listeners: ``EmbeddedBroker(security_protocol="SASL_PLAINTEXT", sasl_users={"alice":
"secret"})`` (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; SASL_SSL adds the keystore;
``connections_max_reauth_ms`` for re-authentication, KIP-368).

Command line: ``kclient-broker`` / ``python -m kclient.broker`` (``--help``).
"""

from kclient.broker.cluster import EmbeddedBroker, EmbeddedCluster
from kclient.broker.config import BrokerConfig
from kclient.broker.metrics import BrokerMetricsSnapshot, format_snapshot

__all__ = [
    "BrokerConfig",
    "BrokerMetricsSnapshot",
    "EmbeddedBroker",
    "EmbeddedCluster",
    "format_snapshot",
]
