"""Transactions of ``kclient.aio``: aiokafka's ``transaction()`` context and the awaiting of
kclient's ``TransactionManager`` results.

Kafka's counterpart is the transactional half of Java's ``KafkaProducer`` (the blocking
``initTransactions``/``commitTransaction``/``abortTransaction``/``sendOffsetsToTransaction``
calls); here they are awaited instead. Runs on the event loop that started the producer:
the Sender completes a ``TransactionalRequestResult`` and ``await_result`` notices it
without blocking the loop (short sleeps, 0.5 ms doubling to 10 ms).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kclient.errors import KafkaTimeoutError
from kclient.sender.offsets import OffsetAndMetadata
from kclient.sender.txn_state import TransactionalRequestResult

if TYPE_CHECKING:
    from kclient.aio.producer import AIOKafkaProducer

_FIRST_WAIT_S = 0.0005
_MAX_WAIT_S = 0.01


async def await_result(
    result: TransactionalRequestResult,
    timeout_ms: int,
    operation: str,
    wakeup: Callable[[], None],
    last_problem: Callable[[], str | None],
) -> None:
    """Wait for ``result`` (waking the Sender first) up to ``timeout_ms``; raise its error,
    or ``KafkaTimeoutError`` saying the call may be made again to keep waiting."""
    wakeup()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    wait_s = _FIRST_WAIT_S
    while not result.is_completed:
        remaining_s = deadline - loop.time()
        if remaining_s <= 0:
            problem = last_problem()
            raise KafkaTimeoutError(
                f"{operation}() did not complete within {timeout_ms} ms ('max_block_ms')"
                + (f" (last: {problem})" if problem else "")
                + f"; call {operation}() again to keep waiting"
            )
        await asyncio.sleep(min(wait_s, remaining_s))
        wait_s = min(wait_s * 2, _MAX_WAIT_S)
    result.wait(0)  # seen: a later call starts afresh instead of resuming this one
    result.raise_error()


def aiokafka_offsets(offsets: Mapping[Any, Any]) -> dict[Any, Any]:
    """aiokafka's offset values — an int, ``(offset, metadata)`` (its ``OffsetAndMetadata``
    is that tuple) — as kclient's; keys and anything else are checked by ``offsets_of``."""
    if not isinstance(offsets, Mapping):
        return offsets  # offsets_of says what is wrong
    converted: dict[Any, Any] = {}
    for tp, value in offsets.items():
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], int):
            offset, metadata = value
            value = OffsetAndMetadata(offset, metadata or "")
        converted[tp] = value
    return converted


class TransactionContext:
    """``async with producer.transaction():`` begins a transaction, commits it when the
    block ends, and aborts it when the block raises (the exception goes on); after a fatal
    error (the producer was fenced) nothing is aborted: the producer is finished."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def __aenter__(self) -> TransactionContext:
        await self._producer.begin_transaction()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            await self._producer.commit_transaction()
        elif not self._producer._transaction_fatal():
            await self._producer.abort_transaction()
