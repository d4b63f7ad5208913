"""pytest plugin (registered through the ``pytest11`` entry point).

Fixtures that start embedded Kafka brokers on free 127.0.0.1 ports, for tests of code
that produces to (or consumes from) Kafka. Any Kafka client can connect to them.

* ``kafka_broker``: a fresh :class:`~kclient.broker.EmbeddedBroker` per test.
* ``kafka_bootstrap_servers``: its ``bootstrap.servers`` string.
* ``kafka_cluster``: a fresh 3-broker :class:`~kclient.broker.EmbeddedCluster` per test
  (``stop_broker`` / ``start_broker`` for failover tests).
* ``kafka_broker_session``: one broker shared by the whole session (create a topic
  per test to keep tests apart).
* ``apache_kafka`` / ``apache_kafka_cluster``: Apache Kafka itself (1 node per version in
  4.4 and 3.9, or 3 nodes of 4.4), session-scoped, started from Maven Central's jars
  when Java 17+ and Maven are installed; see :mod:`kclient.testing.apache_kafka_fixtures`
  (``python -m kclient.testing.apache_kafka fetch`` downloads the jars ahead of time).
* ``kerberos_kdc``: a local MIT Kerberos KDC for the session, with broker and client
  keytabs (:mod:`kclient.testing.kdc_fixtures`; Debian's krb5-kdc and krb5-admin-server).

Settings for the per-test fixtures come from the ``embedded_kafka`` marker, with the
names of :class:`~kclient.broker.BrokerConfig` (``brokers`` sizes a cluster)::

    @pytest.mark.embedded_kafka(num_partitions=3, auto_create_topics=False)
    def test_orders(kafka_broker):
        kafka_broker.create_topic("orders", partitions=3)
        ...
        assert [r.value for r in kafka_broker.read_records("orders", 0)] == [b"..."]

The broker package is imported only when a fixture is used, so merely having kclient
installed costs other test suites nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from kclient.testing.apache_kafka_fixtures import *  # noqa: F403 -- Apache Kafka's fixtures
from kclient.testing.kdc_fixtures import *  # noqa: F403 -- kerberos_kdc

if TYPE_CHECKING:
    from kclient.broker import EmbeddedBroker, EmbeddedCluster

_MARKER = "embedded_kafka"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(**settings): settings of the kafka_broker / kafka_cluster fixtures "
        "(BrokerConfig names, e.g. num_partitions=3; brokers=N for kafka_cluster)",
    )


def _settings(request: pytest.FixtureRequest, fixture: str) -> dict[str, Any]:
    """The marker's settings, checked: each a ``BrokerConfig`` name (a typo gets a "did you
    mean"), ``brokers`` only for ``kafka_cluster``; a TypeError naming the marker if not."""
    marker = request.node.get_closest_marker(_MARKER)
    if marker is None:
        return {}
    if marker.args:
        raise TypeError(
            f"@pytest.mark.{_MARKER} takes settings by name (e.g. num_partitions=3), "
            f"got positional {marker.args!r}"
        )
    from kclient.broker import BrokerConfig

    known = {field.name for field in dataclasses.fields(BrokerConfig)}
    settings = dict(marker.kwargs)
    for name in settings:
        if name not in known and name != "brokers":
            close = difflib.get_close_matches(name, sorted(known | {"brokers"}), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"@pytest.mark.{_MARKER}({name}=...): {name!r} is not a setting of the "
                f"embedded broker (kclient.broker.BrokerConfig){hint}"
            )
    brokers = settings.pop("brokers", None)
    if fixture == "kafka_broker" and brokers not in (None, 1):
        raise TypeError(
            f"@pytest.mark.{_MARKER}(brokers={brokers!r}) sizes the kafka_cluster fixture; "
            "kafka_broker is always one broker: use kafka_cluster (or drop brokers=)"
        )
    if brokers is not None:
        settings["brokers"] = brokers
    return settings


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """A fresh embedded broker on a free 127.0.0.1 port, closed after the test."""
    from kclient.broker import EmbeddedBroker

    settings = _settings(request, "kafka_broker")
    settings.pop("brokers", None)
    with EmbeddedBroker(**settings) as broker:
        yield broker


@pytest.fixture
def kafka_bootstrap_servers(kafka_broker: EmbeddedBroker) -> str:
    """``bootstrap.servers`` of the test's ``kafka_broker``."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    """A fresh embedded cluster (3 brokers unless the marker says ``brokers=N``)."""
    from kclient.broker import EmbeddedCluster

    settings = _settings(request, "kafka_cluster")
    brokers = int(settings.pop("brokers", 3))
    with EmbeddedCluster(brokers, **settings) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_broker_session() -> Iterator[EmbeddedBroker]:
    """One embedded broker for the whole session (default settings)."""
    from kclient.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker
