"""``send_and_wait``: the results and where the records land, nothing queued until it is
awaited, a cancelled wait leaves the record to be delivered, errors raised at the await, a
never-awaited call warned about, asyncio takes it as a coroutine, and a subclass's own
``send`` is what it calls.

No sockets: ``LoopMockClient`` answers like a broker from loop callbacks.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

import pytest

from kclient.aio import AIOKafkaProducer
from kclient.errors import IllegalStateError
from tests.test_aio_loop import LoopMockClient, producer, run, turns


def test_results_and_where_the_records_land_are_the_same() -> None:
    client = LoopMockClient(partitions=2)

    async def main() -> list[tuple[int, int, int]]:
        async with producer(client) as p:
            saw = p.send_and_wait
            landed = [await saw("t", b"%d" % i, partition=i % 2) for i in range(6)]
            landed.append(await saw("t", b"h", None, 1, 5, [("h", b"v")]))  # the general way
            landed.append(await saw(topic="t", value=b"k", key=b"key", partition=0))
            return [(m.partition, m.offset, m.serialized_key_size) for m in landed]

    expected = [(i % 2, i // 2, -1) for i in range(6)]
    assert run(main()) == [*expected, (1, 3, -1), (0, 3, 3)]
    assert list(client.records[("t", 1)][-1].headers) == [("h", b"v")]


def test_nothing_is_queued_until_it_is_awaited_and_tasks_take_it() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client) as p:
            saw = p.send_and_wait
            await saw("t", b"first")  # the topic known: the common case next
            later = saw("t", b"later")
            await turns(5)
            assert client.produce_requests == 1
            task = asyncio.create_task(saw("t", b"task"))  # type: ignore[arg-type]
            assert (await later).offset == 1
            assert (await task).offset == 2
            assert (await asyncio.wait_for(saw("t", b"wait_for"), 5)).offset == 3

    run(main())


def test_a_cancelled_wait_leaves_the_record_to_be_delivered() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client) as p:
            saw = p.send_and_wait
            assert (await saw("t", b"first")).offset == 0  # the topic known: the common case next
            client.hold = True
            task = asyncio.create_task(saw("t", b"held"))  # type: ignore[arg-type]
            await turns(10)
            assert client.produce_requests == 2 and not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            client.hold = False
            client.release()
            assert (await saw("t", b"next")).offset == 2

    run(main())
    assert [r.value for r in client.records[("t", 0)]] == [b"first", b"held", b"next"]


def test_a_wait_resumes_when_its_answer_comes() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client) as p:
            saw = p.send_and_wait
            await saw("t", b"first")
            client.hold = True
            task = asyncio.create_task(saw("t", b"held"))  # type: ignore[arg-type]
            await turns(10)
            assert not task.done()
            client.hold = False
            client.release()
            assert (await task).offset == 1

    run(main())


def test_a_stopped_producer_raises_at_the_await() -> None:
    async def main() -> None:
        p = producer(LoopMockClient())
        await p.start()
        await p.stop()
        call = p.send_and_wait("t", b"late")
        with pytest.raises(IllegalStateError, match="stopped"):
            await call

    run(main())


def test_throw_and_close_before_it_starts_end_it() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client) as p:
            await p.send_and_wait("t", b"first")
            thrown: Any = p.send_and_wait("t", b"thrown")
            with pytest.raises(KeyError):
                thrown.throw(KeyError("in"))
            with pytest.raises(RuntimeError, match="cannot reuse"):
                await thrown
            closed: Any = p.send_and_wait("t", b"closed")
            closed.close()
            with pytest.raises(RuntimeError, match="cannot reuse"):
                await closed
            assert client.produce_requests == 1

    run(main())


def test_a_call_never_awaited_is_warned_about() -> None:
    async def main() -> list[str]:
        async with producer(LoopMockClient()) as p:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                p.send_and_wait("t", b"never")
                gc.collect()
            return [str(w.message) for w in caught if w.category is RuntimeWarning]

    [message] = run(main())
    assert "send_and_wait' was never awaited" in message


def test_a_subclass_s_own_send_is_what_send_and_wait_calls() -> None:
    sent: list[object] = []

    class Counting(AIOKafkaProducer):
        def send(self, topic: str, value: Any = None, *args: Any, **kwargs: Any) -> Any:
            sent.append(value)
            return super().send(topic, value, *args, **kwargs)

    async def main() -> list[int]:
        async with Counting(bootstrap_servers="127.0.0.1:1", kafka_client=LoopMockClient()) as p:
            saw = p.send_and_wait
            return [(await saw("t", b"%d" % i)).offset for i in range(3)]

    assert run(main()) == [0, 1, 2]
    assert sent == [b"0", b"1", b"2"]
