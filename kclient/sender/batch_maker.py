"""New batches for the accumulator: ``ProducerBatch(tp, new_builder(size), created_ms, size,
batch_id)``, made by copying templates when the C accelerator is built.

At linger 0 every request opens a batch: a record builder, a ``ProducerBatch`` and its
``ProduceResult``, whose three ``__init__``\\ s are most of the Python run to open it. With
the accelerator, ``make_batch_maker`` builds one of each with their own ``__init__``\\ s
and ``kclient.record._speedups.SlotTemplate`` copies them for each new batch: the members
that differ per batch are given, the fresh lists and lock made new, the rest (immutable
initial values) shared. ``SlotTemplate`` refuses a member it is not told about that holds
something mutable, so a member added to one of these classes later makes this fall back to
the constructors rather than share state (``tests/sender/test_batch_maker.py`` checks the
copies match). No Java counterpart. Any thread (the caller's, under the topic's lock).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kclient.network.cluster import TopicPartition
from kclient.record import _accel
from kclient.sender.batch import BatchBuilder, ProducerBatch
from kclient.sender.future import ProduceResult
from kclient.slot_copies import template

BatchMaker = Callable[[TopicPartition, int, int, int], ProducerBatch]
"""``make(tp, size, created_ms, batch_id)``: a new, empty batch reserving ``size`` bytes."""

_SAMPLE_TP = TopicPartition("", 0)
BATCH_VARIABLE = (
    "tp",
    "builder",
    "_append",
    "result",
    "created_ms",
    "reserved_bytes",
    "flush_id",
    "order",
)
"""The ``ProducerBatch`` members set per batch, in the order the copy takes them."""
RESULT_LISTS = ("split_map", "_watchers")
RESULT_LOCKS = ("_lock",)


def make_batch_maker(
    new_builder: Callable[[int], BatchBuilder], *, python_copy: bool = False
) -> BatchMaker:
    """The fastest way to make batches whose builders ``new_builder(size)`` makes: the
    templates copied in C (``copy_batch``), or in Python with ``python_copy`` (tests)."""

    def construct(tp: TopicPartition, size: int, created_ms: int, batch_id: int) -> ProducerBatch:
        return ProducerBatch(tp, new_builder(size), created_ms, size, batch_id)

    if not _accel.ACCELERATED:
        return construct
    from kclient.record._speedups import RecordsWriter

    sample_builder = new_builder(0)
    if not isinstance(sample_builder, RecordsWriter):  # _start is the C writer's
        return construct
    builders = template(sample_builder, ())
    results = template(ProduceResult(_SAMPLE_TP), ("tp",), RESULT_LISTS, RESULT_LOCKS)
    batches = template(ProducerBatch(_SAMPLE_TP, sample_builder, 0, 0, 0), BATCH_VARIABLE)
    if builders is None or results is None or batches is None:  # a member they do not know
        return construct

    def copy(tp: TopicPartition, size: int, created_ms: int, batch_id: int) -> ProducerBatch:
        """What ``copy_batch`` (C) does; the reference its test compares with."""
        builder = builders()
        builder._start(size)
        batch: ProducerBatch = batches(
            tp, builder, builder.append, results(tp), created_ms, size, batch_id, (batch_id,)
        )
        return batch

    if python_copy:
        return copy
    from kclient.record._speedups import copy_batch

    return functools.partial(copy_batch, builders, results, batches)
