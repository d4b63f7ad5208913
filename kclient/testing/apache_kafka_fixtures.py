"""pytest fixtures over :class:`~kclient.testing.apache_kafka.ApacheKafka`: Apache Kafka
itself, started from Maven Central's jars (needs Java 17+ and Maven; no Docker).

Corresponds to the embedded-broker fixtures of :mod:`kclient.testing.pytest_plugin`, with
the real broker: session-scoped (a JVM starts in seconds, not milliseconds), so tests keep
apart by topic name. Without ``java`` or ``mvn`` a test using them fails with one line
saying what to install (``JavaToolMissing``): never a silent skip.

* ``apache_kafka``: one node per version in :data:`~kclient.testing.apache_kafka.VERSIONS`
  (the tests using it run once per version), with PLAINTEXT, SSL, SASL_PLAINTEXT (PLAIN,
  SCRAM-SHA-256/512) and OAUTHBEARER (unsecured tokens) listeners. GSSAPI needs a KDC: the
  Kerberos tests start a node of their own with ``kerberos=`` (``kclient.testing.kdc``).
* ``apache_kafka_cluster``: three nodes of the newest version (replication factor 3,
  ``min.insync.replicas=2``), PLAINTEXT only, for failover tests.

When a test using them fails, the end of the brokers' logs is added to its report.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from kclient.testing.apache_kafka import LISTENERS, VERSIONS, ApacheKafka

__all__ = ["apache_kafka", "apache_kafka_cluster", "pytest_runtest_makereport"]

_FIXTURES = ("apache_kafka", "apache_kafka_cluster")
#: The session node's listeners: all but GSSAPI, which needs a KDC of the test's own.
SESSION_LISTENERS = tuple(name for name in LISTENERS if name != "GSSAPI")


@pytest.fixture(scope="session", params=VERSIONS, ids=lambda v: f"kafka{v}")
def apache_kafka(request: pytest.FixtureRequest) -> Iterator[ApacheKafka]:
    """One Apache Kafka node of each version, with every listener but GSSAPI; stopped at
    the end."""
    with ApacheKafka(request.param, listeners=SESSION_LISTENERS) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def apache_kafka_cluster() -> Iterator[ApacheKafka]:
    """Three Apache Kafka nodes of the newest version; stopped at the end."""
    with ApacheKafka(VERSIONS[0], brokers=3) as kafka:
        yield kafka


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """Add the brokers' log tails to the report of a failed test that used them."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for name in _FIXTURES:
        kafka = funcargs.get(name)
        if kafka is not None:
            report.sections.append((f"Apache Kafka log ({name})", kafka.log_tail(40)))
