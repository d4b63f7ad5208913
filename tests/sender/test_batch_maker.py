"""``kclient.sender.batch_maker``: new batches copied from templates (C ``SlotTemplate``)
are the batches the constructors make, and share nothing mutable."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest

from kclient.network.cluster import TopicPartition
from kclient.record import CompressionType, RecordBatch, RecordBatchBuilder, _accel
from kclient.record.builder import PyRecordBatchBuilder
from kclient.sender.batch import ProducerBatch
from kclient.sender.batch_maker import make_batch_maker
from kclient.sender.future import new_lock

needs_c = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="the C accelerator is not built (or KCLIENT_PURE_PYTHON)"
)
TP = TopicPartition("t", 3)
LOCK_TYPES = (type(threading.Lock()), type(new_lock()))


def _builder(size: int) -> RecordBatchBuilder:
    return RecordBatchBuilder(CompressionType.LZ4, size, None, is_transactional=True)


def _slots(obj: object) -> dict[str, Any]:
    names = [n for cls in type(obj).__mro__ for n in cls.__dict__.get("__slots__", ())]
    return {n: getattr(obj, n) for n in names if n != "__weakref__" and hasattr(obj, n)}


def _same(copied: object, made: object, *, skip: tuple[str, ...] = ()) -> None:
    ours, theirs = _slots(copied), _slots(made)
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        if name in skip:
            continue
        if isinstance(value, LOCK_TYPES):  # a fresh lock of the constructor's kind
            assert type(ours[name]) is type(value) and not ours[name].locked(), name
        else:
            assert ours[name] == value, name


@needs_c
def test_the_batches_are_copied_in_c() -> None:
    from kclient.record._speedups import copy_batch

    make = make_batch_maker(_builder)
    assert isinstance(make, functools.partial) and make.func is copy_batch
    assert make_batch_maker(_builder, python_copy=True).__name__ == "copy"


@needs_c
@pytest.mark.parametrize("python_copy", [False, True])
def test_a_copied_batch_is_what_the_constructor_makes(python_copy: bool) -> None:
    make = make_batch_maker(_builder, python_copy=python_copy)
    copied = make(TP, 5000, 1234, 17)
    made = ProducerBatch(TP, _builder(5000), 1234, 5000, 17)
    _same(copied, made, skip=("builder", "_append", "result"))
    _same(copied.result, made.result)
    _same(copied.builder, made.builder)
    assert type(copied.builder) is type(made.builder)
    assert copied.order == (17,) and copied.flush_id == 17 and copied.reserved_bytes == 5000
    for batch in (copied, made):  # the same records give the same bytes
        for i in range(40):
            assert batch.try_append(1_700_000_000_000 + i, b"k%d" % i, b"v" * 90, (), None)
        assert batch.try_append(1, None, b"x" * 5000, (), None) is None  # full at 5000
        batch.set_producer_state(7, 1, 0)  # transactional: built with a producer id
        batch.close()
    assert copied.records == made.records
    assert RecordBatch(copied.records or b"").record_count == 40


@needs_c
@pytest.mark.parametrize("python_copy", [False, True])
def test_copied_batches_share_no_mutable_state(python_copy: bool) -> None:
    make = make_batch_maker(_builder, python_copy=python_copy)
    first, second = make(TP, 100, 0, 1), make(TopicPartition("u", 0), 100, 0, 2)
    assert first.builder is not second.builder and first.result is not second.result
    assert first._append.__self__ is first.builder  # type: ignore[attr-defined]
    for name in ("split_map", "_watchers", "_lock"):
        assert getattr(first.result, name) is not getattr(second.result, name), name
    first.result.split_map.append((second.result, 0))
    assert second.result.split_map == [] and second.result.tp == ("u", 0)
    first.try_append(1, None, b"v", (), None)
    assert first.record_count == 1 and second.record_count == 0


def test_a_builder_without_the_c_writer_gets_the_constructors() -> None:
    make = make_batch_maker(lambda size: PyRecordBatchBuilder(CompressionType.NONE, size))
    assert make.__name__ == "construct"
    batch = make(TP, 300, 5, 9)
    assert isinstance(batch.builder, PyRecordBatchBuilder) and batch.order == (9,)


@needs_c
def test_slot_template_refuses_what_copies_could_share_by_accident() -> None:
    from kclient.record._speedups import SlotTemplate

    class Two:
        __slots__ = ("items", "n")

        def __init__(self) -> None:
            self.items: list[int] = []
            self.n = 1

    with pytest.raises(TypeError, match=r"Two\.items holds list"):
        SlotTemplate(Two(), ())
    with pytest.raises(TypeError, match="not a __slots__ member"):
        SlotTemplate(Two(), ("n", "nope"), ("items",))

    class Loose:
        def __init__(self) -> None:
            self.n = 1

    with pytest.raises(TypeError, match="__dict__"):
        SlotTemplate(Loose(), ())
    copies = SlotTemplate(Two(), ("n",), ("items",))
    one, other = copies(5), copies(6)
    assert (one.n, other.n, one.items, one.items is other.items) == (5, 6, [], False)
    with pytest.raises(TypeError, match="takes 1 positional"):
        copies()
    with pytest.raises(TypeError, match="takes 1 positional"):
        copies(n=1)
