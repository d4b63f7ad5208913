"""Fixtures for the network client's integration tests: the embedded broker and tansu."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration.network.brokers import Broker, RestartableTansu
from integration.peers import free_port, run_tansu, stop_process
from kclient.broker import EmbeddedBroker


@pytest.fixture(params=["embedded", "tansu"])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """One broker: kclient's embedded broker, then the independent tansu."""
    if request.param == "embedded":
        with EmbeddedBroker() as embedded:
            yield embedded
    else:
        with run_tansu() as tansu:
            yield tansu


@pytest.fixture
def restartable_tansu() -> Iterator[RestartableTansu]:
    tansu = RestartableTansu(free_port())
    tansu.start()
    try:
        yield tansu
    finally:
        if tansu.proc is not None:
            stop_process(tansu.proc)
