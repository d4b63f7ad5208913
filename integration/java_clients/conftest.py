"""Fixtures for judging the embedded broker by Apache Kafka's Java clients: a 3-broker
EmbeddedCluster per test and the compiled Java peer (fetched and compiled once; a machine
without Java or Maven fails with JavaToolMissing naming what to install, never skips)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kclient.broker.cluster import EmbeddedCluster
from kclient.testing.java_clients import compile_peer


@pytest.fixture(scope="session")
def java_peer() -> str:
    return compile_peer()


@pytest.fixture
def cluster(java_peer: str) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(brokers=3).start()
    try:
        yield c
    finally:
        c.close()
