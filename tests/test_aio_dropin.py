"""aiokafka code that only changed its import: ``kclient.aio`` exports what a producer
imports from ``aiokafka``, ``send_and_wait``'s result has aiokafka's fields, and
``kclient.aio.errors`` has aiokafka's error names, hierarchy and codes over kclient's own
classes, so its ``except`` clauses catch what kclient raises. aiokafka (a test dependency)
is read here only to compare names; kclient itself never imports it.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import aiokafka.errors as theirs
import pytest

import kclient.errors
from kclient.aio import (
    OffsetAndMetadata,
    RecordMetadata,
    TopicPartition,
    errors,
)
from kclient.network.bootstrap_refusals import BootstrapRefusedError
from kclient.testing.client import ClientRequest
from tests.test_aio_loop import LoopMockClient, ScriptedErrorsClient, producer, run


class LogAppendTimeClient(LoopMockClient):
    """Answers as a topic with ``message.timestamp.type=LogAppendTime`` does."""

    def answer(self, request: ClientRequest) -> dict[str, Any]:
        answer = super().answer(request)
        for topic in answer["responses"]:
            for part in topic["partition_responses"]:
                part["log_append_time_ms"] = 1_700_000_000_000
        return answer


def test_send_and_wait_gives_aiokafkas_fields() -> None:
    async def main(client: LoopMockClient) -> list[RecordMetadata]:
        async with producer(client) as p:
            saw = p.send_and_wait
            return [
                await saw("t", b"x", timestamp_ms=5),
                await saw("t", b"y", timestamp_ms=6),
                (await (await p.send("t", b"z", timestamp_ms=7))),
            ]

    created = run(main(LoopMockClient()))
    assert [(m.topic_partition, m.offset, m.timestamp, m.timestamp_type) for m in created] == [
        (TopicPartition("t", 0), 0, 5, 0),
        (TopicPartition("t", 0), 1, 6, 0),
        (TopicPartition("t", 0), 2, 7, 0),
    ]
    assert all(m.log_start_offset is None for m in created)
    appended = run(main(LogAppendTimeClient()))
    assert {(m.timestamp, m.timestamp_type) for m in appended} == {(1_700_000_000_000, 1)}


def test_aiokafkas_except_clauses_catch_what_kclient_raises() -> None:
    client = ScriptedErrorsClient()
    client.errors = [(29, {})] * 3  # TOPIC_AUTHORIZATION_FAILED

    async def main() -> list[str]:
        caught = []
        async with producer(client) as p:
            for handler in (
                errors.TopicAuthorizationFailedError,
                errors.BrokerResponseError,
                errors.KafkaError,
            ):
                try:
                    await p.send_and_wait("t", b"x")
                except handler as error:  # noqa: PERF203 (one clause per handler)
                    caught.append(f"{type(error).__name__} {error.errno} {error.message}")
        return caught

    assert run(main()) == ["TopicAuthorizationFailedError 29 TOPIC_AUTHORIZATION_FAILED"] * 3
    with pytest.raises(errors.KafkaTimeoutError):
        raise kclient.errors.BufferExhaustedError("buffer.memory full for max.block.ms")
    with pytest.raises(errors.KafkaConfigurationError, match="linger.ms"):
        run(producer(LoopMockClient(), linger_ms=-1).start())
    with pytest.raises(errors.NotLeaderForPartitionError):
        raise kclient.errors.NotLeaderOrFollowerError("t-0")
    with pytest.raises(errors.NoBrokersAvailable):  # every bootstrap address refused
        raise BootstrapRefusedError("127.0.0.1:1: connection refused")


def _exported(module: Any) -> dict[str, type[BaseException]]:
    return {
        name: cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and not name.startswith("_")
    }


def test_every_aiokafka_error_name_is_here_with_its_place_and_code() -> None:
    their_classes = _exported(theirs)
    assert len(their_classes) > 100
    for name, their in their_classes.items():
        ours = getattr(errors, name, None)
        assert ours is not None, f"kclient.aio.errors has no {name}"
        assert name in errors.__all__
        for their_base_name, their_base in their_classes.items():
            if issubclass(their, their_base):  # the hierarchy: every ancestor it has there
                assert issubclass(ours, getattr(errors, their_base_name)), (name, their_base_name)
        if issubclass(their, theirs.BrokerResponseError) and hasattr(their, "errno"):
            assert ours.errno == their.errno  # type: ignore[attr-defined]
            assert errors.for_code(their.errno) is ours or their.errno in (2, 14, 15, 16)
        if issubclass(their, theirs.KafkaError):
            assert issubclass(ours, kclient.errors.KafkaError)
            if ours.__module__ == errors.__name__:  # kclient's own keep kclient's flags
                assert ours.retriable == their.retriable, name


def test_kclient_aio_errors_does_not_import_aiokafka() -> None:
    code = "import sys, kclient.aio.errors; print('aiokafka' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_offsets_for_a_transaction_are_made_as_in_aiokafka() -> None:
    assert OffsetAndMetadata(5, "") == OffsetAndMetadata(offset=5, metadata="")
    assert TopicPartition("t", 1) == ("t", 1)
