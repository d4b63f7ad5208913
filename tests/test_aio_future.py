"""``send``'s futures (``kclient/aio/_future.c``, settled by ``completions.py``): asyncio
accepts them everywhere it accepts its own, a batch's futures are all done before any
callback runs, and those callbacks run in one pass after the Sender's step — each in its
own context, a failing one reported to the loop — resuming an awaiting Task in that pass.

No sockets: a batch is completed here as the Sender completes it (``ProduceResult.set``,
then its watchers are notified), inside a pretend step, then ``dispatch`` runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
from typing import Any

import pytest

from kclient.aio import AIOKafkaProducer
from kclient.aio.completions import NATIVE, BatchCompletions
from kclient.errors import IllegalStateError, NotEnoughReplicasError
from kclient.network.cluster import TopicPartition
from kclient.sender.future import FutureRecordMetadata, ProduceResult, RecordMetadata
from tests.test_aio_loop import LoopMockClient, producer

native = pytest.mark.skipif(
    not NATIVE, reason="asyncio futures here (extension not built, or KCLIENT_PURE_PYTHON set)"
)

TP = TopicPartition("t", 3)
request_id = contextvars.ContextVar("request_id", default="none")


class Step:
    """A pretend Sender step: completions settle inside it, ``dispatch`` runs after."""

    def __init__(self, after_step: str = "c") -> None:
        self.running = False
        self.completions = BatchCompletions(asyncio.get_running_loop(), lambda: self.running)
        self.after_step = self.completions.after_step  # the C dispatch (the driver's)
        if after_step == "python":
            self.after_step = self.completions.dispatch

    async def track(self, result: ProduceResult, count: int) -> list[Any]:
        records = [FutureRecordMetadata(result, i, 1000 + i, -1, 1) for i in range(count)]
        return [await self.completions.track(r) for r in records]

    def complete(
        self, result: ProduceResult, error: BaseException | None = None, *, in_step: bool = True
    ) -> None:
        """As the Sender completes a batch: in its step (or not: ``stop``'s abort)."""
        self.running = in_step
        for watcher in result.set(40, -1, error, finish=True):
            watcher._notify()
        self.running = False
        self.after_step()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


@native
def test_asyncio_takes_the_futures_as_its_own() -> None:
    async def main() -> None:
        step = Step()
        result = ProduceResult(TP)
        futures = await step.track(result, 4)
        assert all(asyncio.isfuture(f) for f in futures)
        waiting = asyncio.ensure_future(asyncio.gather(*futures[:2]))
        shielded = asyncio.shield(futures[2])
        waited = asyncio.ensure_future(asyncio.wait(futures, timeout=5))
        as_task = asyncio.ensure_future(asyncio.wait_for(futures[3], 5))
        with pytest.raises(asyncio.TimeoutError):  # the timeout cancels only the wait's own future
            await asyncio.wait_for(asyncio.shield(futures[0]), 0.001)
        await asyncio.sleep(0)
        asyncio.get_running_loop().call_soon(step.complete, result)
        assert [m.offset for m in await waiting] == [40, 41]
        assert await shielded == RecordMetadata("t", 3, 42, 1002, -1, 1)
        done, pending = await waited
        assert (len(done), pending) == (4, set())
        assert (await as_task).offset == 43
        stamps = [(await f).timestamp for f in asyncio.as_completed(futures)]
        assert sorted(stamps) == [1000, 1001, 1002, 1003]

    run(main())


@native
def test_every_future_of_a_batch_is_done_before_any_callback_runs_in_its_context() -> None:
    seen: list[tuple[str, list[bool]]] = []

    async def main() -> None:
        step = Step()
        result = ProduceResult(TP)
        futures = await step.track(result, 3)
        for i, future in enumerate(futures):
            request_id.set(f"request-{i}")  # each callback keeps the context it was added in
            future.add_done_callback(
                lambda _: seen.append((request_id.get(), [f.done() for f in futures]))
            )
        request_id.set("the step's")
        asyncio.get_running_loop().call_soon(step.complete, result)
        await asyncio.sleep(0)
        assert seen == [(f"request-{i}", [True, True, True]) for i in range(3)]

    run(main())


@native
@pytest.mark.parametrize("after_step", ["c", "python"])
def test_a_task_awaiting_a_record_resumes_in_the_pass_not_a_loop_iteration_later(
    after_step: str,
) -> None:
    order: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        step = Step(after_step)
        result = ProduceResult(TP)
        [future] = await step.track(result, 1)

        async def waiter() -> None:
            await future
            order.append("task resumed")

        task = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)

        def socket_ready() -> None:  # as the loop's reader callback runs the Sender
            step.complete(result)
            order.append("step over")

        loop.call_soon(socket_ready)
        await task

    run(main())
    assert order == ["task resumed", "step over"]


@native
@pytest.mark.parametrize("after_step", ["c", "python"])
@pytest.mark.parametrize("in_step", [True, False])
def test_inside_a_running_task_the_callbacks_go_through_the_loop(
    in_step: bool, after_step: str
) -> None:
    order: list[str] = []

    async def main() -> None:
        step = Step(after_step)
        result = ProduceResult(TP)
        [future] = await step.track(result, 1)

        async def waiter() -> None:
            order.append(f"offset {(await future).offset}")

        task = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)
        step.complete(result, in_step=in_step)  # from this Task (run_now, stop): no re-entry
        order.append("completed")
        await task

    run(main())
    assert order == ["completed", "offset 40"]


@native
def test_a_failing_callback_goes_to_the_loop_handler_and_the_others_still_run() -> None:
    reported: list[dict[str, Any]] = []
    ran: list[int] = []

    def broken(_: object) -> None:
        raise ZeroDivisionError("in a user callback")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        step = Step()
        result = ProduceResult(TP)
        first, second = await step.track(result, 2)
        first.add_done_callback(broken)
        second.add_done_callback(lambda f: ran.append(f.result().offset))
        step.complete(result)

    run(main())
    assert ran == [41]
    assert [type(c["exception"]) for c in reported] == [ZeroDivisionError]
    assert "Exception in callback" in reported[0]["message"]


@native
def test_a_failed_batch_fails_every_future_and_an_unread_error_is_reported() -> None:
    reported: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        step = Step()
        result = ProduceResult(TP)
        read, dropped = await step.track(result, 2)
        step.complete(result, NotEnoughReplicasError("t-3"))
        with pytest.raises(NotEnoughReplicasError):
            await read
        del dropped
        gc.collect()

    run(main())
    assert [c["message"] for c in reported] == ["Future exception was never retrieved"]
    assert isinstance(reported[0]["exception"], NotEnoughReplicasError)


@native
def test_a_cancelled_wait_leaves_the_record_to_complete_and_the_others_settle() -> None:
    async def main() -> None:
        step = Step()
        result = ProduceResult(TP)
        futures = await step.track(result, 3)
        assert futures[1].cancel("gave up") and not futures[1].cancel()
        step.complete(result)
        assert [f.cancelled() for f in futures] == [False, True, False]
        with pytest.raises(asyncio.CancelledError, match="gave up"):
            await futures[1]
        assert [(await futures[0]).offset, (await futures[2]).offset] == [40, 42]
        with pytest.raises(asyncio.InvalidStateError):
            futures[0].set_result(None)

    run(main())


def test_send_queues_at_the_call_and_create_task_takes_it_as_a_coroutine() -> None:
    client = LoopMockClient()

    async def main() -> None:
        async with producer(client) as p:
            assert isinstance(p, AIOKafkaProducer)
            queued = p.send("t", b"at the call")  # queued now; awaiting gives its future
            task = asyncio.create_task(p.send("t", b"as a task"))
            future = await queued
            assert (await future).offset == 0
            assert (await (await task)).offset == 1
            assert (await p.send_and_wait("t", b"last")).offset == 2

    run(main())
    assert [r.value for r in client.records[("t", 0)]] == [b"at the call", b"as a task", b"last"]


def test_tasks_resumed_in_the_pass_send_again_while_the_sender_is_between_steps() -> None:
    client = LoopMockClient(partitions=3)

    async def chain(p: AIOKafkaProducer, partition: int) -> list[int]:
        return [
            (await p.send_and_wait("t", b"%d" % i, partition=partition)).offset for i in range(30)
        ]

    async def main() -> list[list[int]]:
        async with producer(client) as p:
            return list(await asyncio.gather(*(chain(p, n) for n in range(3))))

    assert run(main()) == [list(range(30))] * 3


@native
def test_send_and_wait_needs_no_scheduled_sender_step_per_round_trip() -> None:
    """The answer's step resumes the waiting task, whose next ``send_and_wait`` sends at
    once (``run_now``): no ``call_soon`` is made for the Sender (and then cancelled)."""
    client = LoopMockClient()
    scheduled: list[object] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        call_soon = loop.call_soon

        def counting(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
            if getattr(callback, "__name__", "") == "_scheduled_run":
                scheduled.append(callback)
            return call_soon(callback, *args, **kwargs)

        async with producer(client) as p:
            await p.send_and_wait("t", b"first")
            loop.call_soon = counting  # type: ignore[method-assign]
            for i in range(20):
                await p.send_and_wait("t", b"%d" % i)
            loop.call_soon = call_soon  # type: ignore[method-assign]

    run(main())
    assert len(scheduled) <= 1


def test_send_takes_aiokafkas_arguments_by_position_or_name_on_every_path() -> None:
    client = LoopMockClient(partitions=2)

    async def main() -> None:
        async with producer(client) as p:
            calls = [
                p.send("t", b"v0", b"k0", 1),  # by position: partition 1
                p.send("t", b"v1", key=b"k1", partition=0, timestamp_ms=1),
                p.send(topic="t", value=b"v2", partition=1, headers=[("h", b"x")]),
                p.send("t", b"v3", None, 0, 9, None),
            ]
            landed = [await (await c) for c in calls]
            assert [(m.partition, m.serialized_key_size) for m in landed] == [
                (1, 2),
                (0, 2),
                (1, -1),
                (0, -1),
            ]
            assert (landed[1].timestamp, landed[3].timestamp) == (1, 9)
            with pytest.raises(TypeError):
                p.send("t", b"v", colour="red")  # type: ignore[call-arg]
        with pytest.raises(IllegalStateError, match="stopped"):
            await p.send("t", b"after stop")

    run(main())
    records = client.records
    assert [(r.key, r.value) for r in records[("t", 1)]] == [(b"k0", b"v0"), (None, b"v2")]
    assert [(r.key, r.value) for r in records[("t", 0)]] == [(b"k1", b"v1"), (None, b"v3")]
    assert list(records[("t", 1)][1].headers) == [("h", b"x")]


@native
@pytest.mark.parametrize("return_exceptions", [True, False])
def test_gather_over_a_cancelled_record_future_behaves_as_over_asyncios(
    return_exceptions: bool,
) -> None:
    """gather reads a cancelled child's ``_cancel_message`` (or asks it for
    ``_make_cancelled_error()``): without them it failed in its callback and never finished."""

    async def main() -> None:
        step = Step()
        result = ProduceResult(TP)
        futures = await step.track(result, 3)
        gathered = asyncio.gather(*futures, return_exceptions=return_exceptions)
        futures[1].cancel("gave up")
        step.complete(result)
        if return_exceptions:
            done = await gathered
            assert [type(x) for x in done] == [
                RecordMetadata,
                asyncio.CancelledError,
                RecordMetadata,
            ]
            assert str(done[1]) == "gave up"
        else:
            with pytest.raises(asyncio.CancelledError):
                await gathered
        assert futures[1]._make_cancelled_error().args == ("gave up",)
        assert futures[0]._cancel_message is None and futures[1]._cancel_message == "gave up"

    run(main())


class _Topic(str):
    """A str subclass: its instances may hold a reference cycle (they can have attributes)."""


@native
def test_settled_futures_and_their_metadata_leave_the_garbage_collectors_walk() -> None:
    """A caller that keeps a batch's futures (``asyncio.gather`` adds a callback to each) does
    not have the garbage collector walk them at every full collection once they are settled
    with plain metadata: with 100,000 kept, those walks were 40% of ``await send()``'s CPU."""

    async def main() -> None:
        step = Step()
        ok, failed = ProduceResult(TP), ProduceResult(TP)
        futures = await step.track(ok, 3)
        (bad,) = await step.track(failed, 1)
        odd = ProduceResult(TopicPartition(_Topic("t"), 3))
        (subclassed,) = await step.track(odd, 1)
        gathered = asyncio.ensure_future(asyncio.gather(*futures))
        await asyncio.sleep(0)
        assert all(gc.is_tracked(f) for f in futures)  # a callback each: maybe in a cycle
        step.complete(ok)
        step.complete(failed, NotEnoughReplicasError("t-3"))
        step.complete(odd)
        metadata = await gathered
        assert [m.offset for m in metadata] == [40, 41, 42]
        assert not any(gc.is_tracked(f) for f in futures)
        assert not any(gc.is_tracked(m) for m in metadata)
        assert gc.is_tracked(bad)  # its exception (and traceback) may be in a cycle
        with pytest.raises(NotEnoughReplicasError):
            await bad
        # a topic of a str subclass may be in a cycle: its metadata stays walked
        assert gc.is_tracked(subclassed.result())
        ran: list[Any] = []
        futures[0].add_done_callback(ran.append)  # on a done future: run by the loop, not kept
        await asyncio.sleep(0)
        assert ran == [futures[0]]
        assert not gc.is_tracked(futures[0])

    run(main())
