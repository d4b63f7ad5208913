"""kclient.aio with the Sender on the event loop (``kclient/aio/loop_sender.py``), on a
scripted client (no sockets, no threads): records go out and complete from loop
callbacks, linger is a loop timer, ``flush`` and ``stop`` await the Sender.

``LoopMockClient`` answers like a broker (``LiveMockClient``'s answers) without blocking
in ``poll``, and calls ``on_ready`` when it has news, as a socket becoming readable does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from kclient.aio import AIOKafkaProducer
from kclient.errors import IllegalStateError
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.protocol import ApiKey
from kclient.testing.client import MockClient
from tests.test_producer import LiveMockClient


class LoopMockClient(LiveMockClient):
    def __init__(self, partitions: int = 1) -> None:
        super().__init__(partitions)
        self.on_ready: Callable[[], None] = lambda: None
        self.produce_requests = 0

    def _news(self) -> None:
        asyncio.get_running_loop().call_soon(self.on_ready)

    def send(self, request: ClientRequest, now_ms: int) -> None:
        if request.api_key == ApiKey.PRODUCE:
            self.produce_requests += 1
        super().send(request, now_ms)
        if self._responses:  # answered: the next poll has it
            self._news()

    def release(self) -> None:
        super().release()
        self._news()

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        return MockClient.poll(self, timeout_ms, now_ms)  # never blocks


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def producer(client: LoopMockClient, **kwargs: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", kafka_client=client, **kwargs)


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_records_go_out_and_complete_on_the_loop_with_no_thread() -> None:
    client = LoopMockClient()
    threads = set(threading.enumerate())

    async def main() -> None:
        async with producer(client) as p:
            futures = [await p.send("t", b"%d" % i) for i in range(50)]
            assert set(threading.enumerate()) == threads  # no Sender thread
            assert [(await f).offset for f in futures] == list(range(50))
            assert (await p.send_and_wait("t", b"last")).offset == 50

    run(main())
    assert [r.value for r in client.records[("t", 0)]] == [b"%d" % i for i in range(50)] + [b"last"]


def test_a_record_completes_when_its_answer_comes_and_flush_awaits_it() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client) as p:
            client.hold = True
            future = await p.send("t", b"held")
            await turns(20)
            assert client.produce_requests == 1 and not future.done()
            flushing = asyncio.ensure_future(p.flush())
            await turns(20)
            assert not flushing.done()  # the loop runs on while flush awaits the Sender
            client.hold = False
            client.release()
            await flushing
            assert future.done() and future.result().offset == 0

    run(main())


def test_linger_is_a_loop_timer() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client, linger_ms=300) as p:
            futures = [await p.send("t", b"%d" % i) for i in range(3)]
            await turns(20)
            assert client.produce_requests == 0  # lingering, not sent
            await asyncio.gather(*futures)
            assert client.produce_requests == 1  # one request once linger.ms passed

    run(main())


def test_stop_delivers_what_was_sent_then_refuses_sends() -> None:
    client = LoopMockClient()

    async def main() -> list[asyncio.Future[Any]]:
        p = producer(client, linger_ms=60_000)
        await p.start()
        futures = [await p.send("t", b"%d" % i) for i in range(100)]
        await p.stop()
        with pytest.raises(IllegalStateError, match="stopped"):
            await p.send("t", b"late")
        return futures

    futures = run(main())
    assert [f.result().offset for f in futures] == list(range(100))


class ScriptedErrorsClient(LoopMockClient):
    """Answers the next Produce requests with the error codes in ``errors`` (each an error
    code and the per-record errors, by index in the batch), then like a broker."""

    def __init__(self, partitions: int = 1) -> None:
        super().__init__(partitions)
        self.errors: list[tuple[int, dict[int, str]]] = []

    def answer(self, request: ClientRequest) -> dict[str, Any]:
        if not self.errors:
            return super().answer(request)
        code, by_index = self.errors.pop(0)
        record_errors = [
            {"batch_index": i, "batch_index_error_message": m} for i, m in by_index.items()
        ]
        responses = [
            {
                "name": topic["name"],
                "partition_responses": [
                    {"index": part["index"], "error_code": code, "record_errors": record_errors}
                    for part in topic["partition_data"]
                ],
            }
            for topic in request.body_for(12)["topic_data"]
        ]
        return {"responses": responses}


async def outcomes(futures: list[asyncio.Future[Any]]) -> list[Any]:
    """Each future's offset, or its error's type name and message."""
    done = await asyncio.gather(*futures, return_exceptions=True)
    return [
        (type(r).__name__, str(r)) if isinstance(r, BaseException) else (r.partition, r.offset)
        for r in done
    ]


def test_each_record_of_a_batch_gets_its_own_error_or_the_batch_error() -> None:
    client = ScriptedErrorsClient()
    client.errors = [(87, {1: "bad timestamp"}), (29, {})]  # INVALID_RECORD, then not allowed

    async def main() -> None:
        async with producer(client) as p:
            first = [await p.send("t", b"%d" % i) for i in range(3)]  # one batch
            got = await outcomes(first)
            assert got[1] == (
                "InvalidRecordError",
                "[Error 87] INVALID_RECORD: t-0 record 1: bad timestamp",
            )
            assert got[0] == got[2] == ("InvalidRecordError", "[Error 87] INVALID_RECORD: t-0")
            second = [await p.send("t", b"%d" % i) for i in range(2)]
            assert [name for name, _ in await outcomes(second)] == [
                "TopicAuthorizationFailedError"
            ] * 2
            third = [await p.send("t", b"%d" % i) for i in range(2)]
            assert await outcomes(third) == [(0, 0), (0, 1)]

    run(main())


def test_records_of_a_split_batch_each_get_the_offset_of_where_they_landed() -> None:
    client = ScriptedErrorsClient()
    client.errors = [(10, {})]  # MESSAGE_TOO_LARGE: the batch is split and goes again

    async def main() -> None:
        async with producer(client) as p:
            futures = [await p.send("t", b"%d" % i) for i in range(6)]
            assert await outcomes(futures) == [(0, i) for i in range(6)]
            assert client.produce_requests > 2  # the first, then the halves

    run(main())
    assert [r.value for r in client.records[("t", 0)]] == [b"%d" % i for i in range(6)]


def test_a_cancelled_future_leaves_the_others_of_its_batch_to_complete() -> None:
    client = LoopMockClient(partitions=2)
    errors: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))
        async with producer(client) as p:
            client.hold = True
            futures = [await p.send("t", b"%d" % i, partition=i % 2) for i in range(6)]
            futures[2].cancel()  # the caller stopped caring about one record
            await turns(20)
            client.hold = False
            client.release()
            got = await outcomes(futures[:2] + futures[3:])
            assert got == [(0, 0), (1, 0), (1, 1), (0, 2), (1, 2)]  # partition, offset

    run(main())
    assert errors == []
    # a cancelled future does not take back its record: it was queued, and it went
    assert [r.value for r in client.records[("t", 0)]] == [b"0", b"2", b"4"]
