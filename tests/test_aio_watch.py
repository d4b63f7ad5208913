"""A batch's group of ``kclient.aio`` futures (``completions.py``: ``track``,
``_BatchWatch``): every future gets its record's outcome once the batch completes, the
callbacks run in the order the records were sent, records with errors of their own or in a
split batch are settled on their own, and a bug while settling is logged, not raised into
the Sender's step.

No sockets: batches complete as the Sender completes them (``ProduceResult.set`` or
``supersede``, then the watchers), inside a pretend step or outside one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.aio.completions import BatchCompletions
from kclient.errors import NotEnoughReplicasError
from kclient.network.cluster import TopicPartition
from kclient.sender.future import FutureRecordMetadata, ProduceResult

TP = TopicPartition("t", 3)


class Step:
    """A pretend Sender step over completions."""

    def __init__(self) -> None:
        self.running = False
        loop = asyncio.get_running_loop()
        self.completions = BatchCompletions(loop, functools.partial(getattr, self, "running"))

    async def track(self, result: ProduceResult, count: int, first: int = 0) -> list[Any]:
        records = [FutureRecordMetadata(result, i, 1000 + i, -1, i) for i in range(count)]
        return [await self.completions.track(r) for r in records[first:]]

    def complete(
        self,
        result: ProduceResult,
        error: BaseException | None = None,
        *,
        base_offset: int = 40,
        append_ms: int = -1,
        record_errors: dict[int, BaseException] | None = None,
        in_step: bool = True,
    ) -> None:
        self.running = in_step
        for watcher in result.set(base_offset, append_ms, error, record_errors, finish=True):
            watcher._notify()
        self.running = False
        if in_step:  # the driver's pass after a step; outside one, settling runs them
            self.completions.dispatch()


def outcome(future: Any) -> object:
    if not future.done():
        return "pending"
    if future.cancelled():
        return "cancelled"
    error = future.exception()
    return repr(error) if error is not None else tuple(future.result())


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 6),
    cancelled=st.sets(st.integers(0, 5)),
    failed=st.booleans(),
    base_offset=st.sampled_from([-1, 0, 77]),
    append_ms=st.sampled_from([-1, 5_000]),
    in_step=st.booleans(),
)
def test_a_completed_batch_settles_every_future_and_runs_callbacks_in_send_order(  # noqa: PLR0917
    count: int,
    cancelled: set[int],
    failed: bool,
    base_offset: int,
    append_ms: int,
    in_step: bool,
) -> None:
    seen: list[tuple[int, object]] = []

    async def main() -> tuple[list[object], list[tuple[int, object]], int]:
        step = Step()
        result = ProduceResult(TP)
        futures = await step.track(result, count)
        for i, future in enumerate(futures):
            if i in cancelled:
                future.cancel()
            future.add_done_callback(lambda f, i=i: seen.append((i, outcome(f))))
        seen.clear()  # a cancel's callbacks run at once on the loop: not the subject
        await asyncio.sleep(0)
        seen.clear()
        error = NotEnoughReplicasError("t-3: not enough") if failed else None
        step.complete(result, error, base_offset=base_offset, append_ms=append_ms, in_step=in_step)
        await asyncio.sleep(0)
        return [outcome(f) for f in futures], list(seen), len(step.completions._groups)

    error = NotEnoughReplicasError("t-3: not enough") if failed else None
    expected: list[object] = []
    for i in range(count):
        if i in cancelled:
            expected.append("cancelled")
        elif failed:
            expected.append(repr(error))
        else:
            logged = append_ms >= 0
            offset = base_offset + i if base_offset >= 0 else -1
            expected.append(("t", 3, offset, append_ms if logged else 1000 + i, -1, i, int(logged)))
    callbacks = [(i, e) for i, e in enumerate(expected) if e != "cancelled"]
    assert run(main()) == (expected, callbacks, 0)


def test_records_with_errors_of_their_own_get_them() -> None:
    async def main() -> list[object]:
        step = Step()
        result = ProduceResult(TP)
        futures = await step.track(result, 3)
        step.complete(result, record_errors={1: NotEnoughReplicasError("record 1 refused")})
        await asyncio.sleep(0)
        return [outcome(f) for f in futures]

    got = run(main())
    assert got[0] == ("t", 3, 40, 1000, -1, 0, 0)
    assert "record 1 refused" in str(got[1])
    assert got[2] == ("t", 3, 42, 1002, -1, 2, 0)


def test_records_of_a_split_batch_follow_it_to_their_new_batches() -> None:
    async def main() -> list[object]:
        step = Step()
        old, first, second = ProduceResult(TP), ProduceResult(TP), ProduceResult(TP)
        futures = await step.track(old, 3)
        for watcher in old.supersede([(first, 0), (first, 1), (second, 0)]):
            watcher._watch()
        assert not any(f.done() for f in futures)
        step.complete(first, base_offset=100)
        step.complete(second, base_offset=200)
        await asyncio.sleep(0)
        return [outcome(f) for f in futures]

    assert [row[2] for row in run(main())] == [100, 101, 200]  # type: ignore[index]


def test_a_record_queued_after_its_batch_completed_still_settles() -> None:
    async def main() -> object:
        step = Step()
        result = ProduceResult(TP)
        step.complete(result, base_offset=9)
        [future] = await step.track(result, 1)
        await asyncio.sleep(0)
        return outcome(future)

    assert run(main()) == ("t", 3, 9, 1000, -1, 0, 0)


def test_a_batch_that_cannot_be_settled_is_logged_and_the_step_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        step = Step()
        result = ProduceResult(TP)
        await step.track(result, 2)
        step.completions._groups[result].append("not a row")  # a bug in the bookkeeping
        step.complete(result)

    with caplog.at_level(logging.ERROR, logger="kclient.aio.completions"):
        run(main())
    assert [r.getMessage() for r in caplog.records] == [
        "settling the futures of a batch for t-3 failed"
    ]
    assert caplog.records[0].exc_info is not None
