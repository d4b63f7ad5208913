"""A batch's group of ``kclient.aio`` futures made and settled in C (``_watch.c``:
``new_group``, ``BatchWatch``) against the Python it replaces (``completions.py``:
``_new_group``, ``_BatchWatch``): the same outcome for every future, the same callbacks in
the same order, the same log line when settling fails.

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

from kclient.aio import completions as completions_module
from kclient.aio.completions import NATIVE, BatchCompletions
from kclient.errors import NotEnoughReplicasError
from kclient.network.cluster import TopicPartition
from kclient.sender.future import FutureRecordMetadata, ProduceResult

pytestmark = pytest.mark.skipif(
    not NATIVE, reason="asyncio futures here (extension not built, or KCLIENT_PURE_PYTHON set)"
)
IMPLEMENTATIONS = ["c", "python"]
TP = TopicPartition("t", 3)


class Step:
    """A pretend Sender step over completions whose groups are made by ``how``."""

    def __init__(self, how: str) -> None:
        self.running = False
        loop = asyncio.get_running_loop()
        self.completions = BatchCompletions(loop, functools.partial(getattr, self, "running"))
        if how == "python":  # the same futures, the Python group and watch
            c = self.completions
            c.track = functools.partial(
                completions_module._native.track, c._groups, loop, c._new_group
            )

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


def test_the_c_path_is_the_one_in_use() -> None:
    async def main() -> None:
        step = Step("c")
        result = ProduceResult(TP)
        await step.track(result, 1)
        [watch] = result._watchers or []
        assert type(watch).__name__ == "BatchWatch"
        assert type(watch).__module__ == "kclient.aio._future"

    run(main())


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 6),
    cancelled=st.sets(st.integers(0, 5)),
    failed=st.booleans(),
    base_offset=st.sampled_from([-1, 0, 77]),
    append_ms=st.sampled_from([-1, 5_000]),
    in_step=st.booleans(),
)
def test_a_completed_batch_settles_the_same_in_c_and_python(  # noqa: PLR0917 -- given's
    count: int,
    cancelled: set[int],
    failed: bool,
    base_offset: int,
    append_ms: int,
    in_step: bool,
) -> None:
    def once(how: str) -> tuple[list[object], list[tuple[int, object]], int]:
        seen: list[tuple[int, object]] = []

        async def main() -> tuple[list[object], list[tuple[int, object]], int]:
            step = Step(how)
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
            step.complete(
                result, error, base_offset=base_offset, append_ms=append_ms, in_step=in_step
            )
            await asyncio.sleep(0)
            return [outcome(f) for f in futures], list(seen), len(step.completions._groups)

        return run(main())  # type: ignore[no-any-return]

    assert once("c") == once("python")


@pytest.mark.parametrize("how", IMPLEMENTATIONS)
def test_records_with_errors_of_their_own_get_them(how: str) -> None:
    async def main() -> list[object]:
        step = Step(how)
        result = ProduceResult(TP)
        futures = await step.track(result, 3)
        step.complete(result, record_errors={1: NotEnoughReplicasError("record 1 refused")})
        await asyncio.sleep(0)
        return [outcome(f) for f in futures]

    got = run(main())
    assert got[0] == ("t", 3, 40, 1000, -1, 0, 0)
    assert "record 1 refused" in str(got[1])
    assert got[2] == ("t", 3, 42, 1002, -1, 2, 0)


@pytest.mark.parametrize("how", IMPLEMENTATIONS)
def test_records_of_a_split_batch_follow_it_to_their_new_batches(how: str) -> None:
    async def main() -> list[object]:
        step = Step(how)
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


@pytest.mark.parametrize("how", IMPLEMENTATIONS)
def test_a_record_queued_after_its_batch_completed_still_settles(how: str) -> None:
    async def main() -> object:
        step = Step(how)
        result = ProduceResult(TP)
        step.complete(result, base_offset=9)
        [future] = await step.track(result, 1)
        await asyncio.sleep(0)
        return outcome(future)

    assert run(main()) == ("t", 3, 9, 1000, -1, 0, 0)


@pytest.mark.parametrize("how", IMPLEMENTATIONS)
def test_a_batch_that_cannot_be_settled_is_logged_and_the_step_goes_on(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        step = Step(how)
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
