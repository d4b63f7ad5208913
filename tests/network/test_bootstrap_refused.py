"""Every bootstrap server refusing connections is told apart from a slow or lost one
(issue 31, item 3): ``bootstrap_refused_error`` answers once each bootstrap server's
attempts have been refused (or its name does not exist) for
``bootstrap.refused.timeout.ms`` and no connection ever succeeded; the repeated
connection warnings are rate-limited. MockSelector + MockClock: no sockets, no sleeps."""

from __future__ import annotations

import logging
import socket

import pytest

from kclient.errors import KafkaConnectionError, KafkaTimeoutError
from kclient.network import NetworkClientConfig
from kclient.network.bootstrap_refusals import BootstrapRefusedError
from kclient.network.connection_states import Address
from kclient.protocol import ApiKey
from tests.network.test_client import Env, make_env, metadata_response_for


def _resolver(host: str, port: int) -> list[Address]:
    if host == "nohost.invalid":
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return [(socket.AF_INET, "127.0.0.1", port)]


def _refusing(config: NetworkClientConfig | None = None) -> Env:
    env = make_env(
        bootstrap_only=[("localhost", 9092), ("nohost.invalid", 9093)],
        resolver=_resolver,
        config=config,
    )
    env.selector.refuse_connect(-1)
    return env


def _run(env: Env, ms: int, step_ms: int = 50) -> None:
    for _ in range(ms // step_ms):
        env.poll()
        env.clock.advance(step_ms)


def test_every_bootstrap_server_refusing_is_an_error_after_the_setting() -> None:
    env = _refusing()
    _run(env, 1_000)
    assert env.client.bootstrap_refused_error(env.now) is None  # still within 2 s
    _run(env, 1_500)
    error = env.client.bootstrap_refused_error(env.now)
    assert isinstance(error, BootstrapRefusedError)
    assert isinstance(error, KafkaConnectionError) and isinstance(error, KafkaTimeoutError)
    text = str(error)
    assert "localhost:9092 (127.0.0.1:9092): connection refused" in text
    assert "nohost.invalid:9093: no such host" in text
    assert "bootstrap.servers" in text and "bootstrap.refused.timeout.ms" in text


def test_the_setting_bounds_it_and_minus_one_turns_it_off() -> None:
    env = _refusing(NetworkClientConfig(bootstrap_refused_timeout_ms=300))
    _run(env, 1_000)  # with the default (2 s) not yet: see above
    assert env.client.bootstrap_refused_error(env.now) is not None
    env = _refusing(NetworkClientConfig(bootstrap_refused_timeout_ms=-1))
    _run(env, 10_000)
    assert env.client.bootstrap_refused_error(env.now) is None


def test_a_server_that_does_not_answer_is_not_a_refusal() -> None:
    env = make_env(bootstrap_only=[("localhost", 9092), ("localhost", 9093)], resolver=_resolver)
    env.selector.refuse_connect(-1)
    env.selector.block_connect(-2)  # SYN dropped: only the connection setup timeout ends it
    _run(env, 30_000, step_ms=100)
    assert env.client.bootstrap_refused_error(env.now) is None


def test_once_a_connection_succeeded_refusals_never_fail_fast() -> None:
    env = make_env(bootstrap_only=[("localhost", 9092)], resolver=_resolver)
    env.selector.serve(ApiKey.METADATA, metadata_response_for)
    _run(env, 200)
    assert not env.metadata.fetch().is_bootstrap_configured
    for node_id in (-1, 0, 1, 2):
        env.selector.refuse_connect(node_id)
    for node in env.metadata.fetch().nodes:
        env.client.disconnect(node.id)
    _run(env, 10_000)
    assert env.client.bootstrap_refused_error(env.now) is None


def test_repeated_connection_warnings_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    env = _refusing()
    with caplog.at_level(logging.DEBUG, logger="kclient"):
        _run(env, 20_000)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    attempts = [r for r in caplog.records if "cannot connect to node" in r.getMessage()]
    assert len(attempts) > 10  # every attempt is still logged, at DEBUG
    assert len(warnings) <= 2, [r.getMessage() for r in warnings]  # once per server per 30 s
    _run(env, 15_000)
    again = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("more like it in the last 30 s" in m for m in again)
