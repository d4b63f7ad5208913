"""kclient.aio transactions on a scripted transaction coordinator (no sockets):
aiokafka's ``transaction()`` context, ``send_offsets_to_transaction``, and commits that
are awaited without blocking the event loop.

The producer's I/O thread really runs; ``LiveTxnBroker`` (``test_producer_transactions``)
answers like a broker with a transaction coordinator.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kclient import TopicPartition
from kclient.aio import AIOKafkaProducer
from kclient.errors import KafkaTimeoutError
from kclient.protocol import ApiKey
from tests.sender.txn_helpers import TXN_ID
from tests.test_producer_transactions import LiveTxnBroker

END = ApiKey.END_TXN


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def producer(broker: LiveTxnBroker, **kwargs: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers="h:1", kafka_client=broker, transactional_id=TXN_ID, **kwargs
    )


def test_the_transaction_context_commits_or_aborts_and_start_registers_the_id() -> None:
    broker = LiveTxnBroker()

    async def main() -> None:
        async with producer(broker) as p:
            assert ApiKey.INIT_PRODUCER_ID in broker.sent_apis()  # start() awaited it
            async with p.transaction():
                first = await p.send("t", b"a", partition=0)
                await p.send_and_wait("t", b"b", partition=1)
            assert first.done()  # the commit delivered every record first
            with pytest.raises(ValueError, match="changed my mind"):
                async with p.transaction():
                    await p.send("t", b"c", partition=0)
                    await p.flush()  # written: only the abort marker will hide it
                    raise ValueError("changed my mind")
            await p.begin_transaction()  # the abort finished: a new one may begin
            await p.send("t", b"d", partition=0)
            await p.commit_transaction()

    run(main())
    assert [b["committed"] for b in broker.bodies(END)] == [True, False, True]
    assert broker.violations == []


def test_send_offsets_takes_aiokafka_offsets_and_a_group_id() -> None:
    broker = LiveTxnBroker()

    async def main() -> None:
        async with producer(broker) as p, p.transaction():
            await p.send("t", b"out", partition=0)
            await p.send_offsets_to_transaction(
                {TopicPartition("in", 0): 5, ("in", 1): (9, "meta")}, "the-group"
            )

    run(main())
    [add_offsets] = broker.bodies(ApiKey.ADD_OFFSETS_TO_TXN)
    [commit] = broker.bodies(ApiKey.TXN_OFFSET_COMMIT)
    assert add_offsets["group_id"] == commit["group_id"] == "the-group"
    offsets = {
        (t["name"], p["partition_index"]): (p["committed_offset"], p["committed_metadata"])
        for t in commit["topics"]
        for p in t["partitions"]
    }
    assert offsets == {("in", 0): (5, ""), ("in", 1): (9, "meta")}
    assert [b["committed"] for b in broker.bodies(END)] == [True]


def test_a_commit_is_awaited_while_the_loop_runs_and_resumed_after_a_timeout() -> None:
    broker = LiveTxnBroker()

    async def main() -> None:
        async with producer(broker, max_block_ms=200) as p:
            await p.begin_transaction()
            await p.send("t", b"a", partition=0)
            broker.script(broker.hold, END)
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.005)
                    ticks += 1

            ticker = asyncio.ensure_future(tick())
            with pytest.raises(KafkaTimeoutError, match=r"call commit_transaction\(\) again"):
                await p.commit_transaction()
            ticker.cancel()
            # the loop ran timers while the commit was awaited (a commit blocking the loop
            # would leave none: the ticker is cancelled as soon as it returns); one is
            # enough, as a starved machine gave 2 in the 200 ms
            assert ticks >= 1
            broker.release(END)
            await p.commit_transaction()  # resumes the same commit

    run(main())
    assert [b["committed"] for b in broker.bodies(END)] == [True]


def test_stop_aborts_an_open_transaction_while_the_loop_runs() -> None:
    broker = LiveTxnBroker()

    async def main() -> None:
        p = producer(broker)
        await p.start()
        await p.begin_transaction()
        written = await p.send("t", b"hidden", partition=0)
        await p.flush()
        broker.script(broker.hold, END)
        ticks = 0

        async def answer_the_abort_later() -> None:
            nonlocal ticks
            while ticks < 20:
                await asyncio.sleep(0.005)
                ticks += 1
            broker.release(END)

        answering = asyncio.ensure_future(answer_the_abort_later())
        await p.stop()
        assert answering.done()  # stop() awaited the abort: the loop ran meanwhile
        assert written.done() and ticks == 20

    run(main())
    assert [b["committed"] for b in broker.bodies(END)] == [False]  # aborted by stop()
