"""Record futures of ``kclient.aio`` settled one pass per produced batch.

Java's counterpart is ``ProducerBatch.completeFutureAndFireCallbacks``: a batch's outcome
is one ``ProduceRequestResult`` and its records' futures read it. Here each record
``send`` queued gets a future; the records are grouped by the batch they went into (its
``ProduceResult``), and the group watches the batch (``_BatchWatch``). When the batch
completes, one call settles every future of the group: no callback, partial or record
future is kept per record (a group holds a row per record: the future and four ints).

With the C extension (``kclient/aio/_future.c``) the futures are ``RecordFuture``\\ s:
asyncio-compatible (``await``, ``gather``, ``wait``, ``wait_for``, ``shield``, Tasks),
but settling a batch marks all of them done first and puts their waiting callbacks on
``pending``; the driver (``LoopSender``) runs those in one pass after its step
(``dispatch``), each in its own context, instead of a ``loop.call_soon`` per callback. A
Task awaiting a record is resumed in that pass, not one loop iteration later. Inside a
running Task (a Task cannot be entered from another) and outside a Sender step they go
through ``call_soon``. Without the extension (or with ``KCLIENT_PURE_PYTHON=1``) they
are asyncio futures, settled the same way, their callbacks scheduled by asyncio.

``send`` returns ``track``'s answer: an awaitable whose ``await`` gives the future at
once (``Ready``), with no coroutine frame.

A record that moved to another batch (the batch was split after ``MESSAGE_TOO_LARGE``)
or has an error of its own is settled on its own, when its new batch completes.

Owned by the event loop's thread: records complete inside the Sender's step, on the loop
(``loop_sender``); every method runs there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from kclient._compiled import pure_python
from kclient.sender.future import (
    FutureRecordMetadata,
    ProduceResult,
    RecordMetadata,
    record_error,
    record_metadata,
)

if TYPE_CHECKING:
    from kclient.aio._future import RecordFuture

Future: TypeAlias = "RecordFuture | asyncio.Future[RecordMetadata]"
"""What ``await send(...)`` gives: ``await`` it for the record's ``RecordMetadata``."""

_native: Any = None
if not pure_python():
    try:
        from kclient.aio import _future as _native
    except ImportError:  # not built: asyncio futures
        _native = None

NATIVE = _native is not None
"""Whether ``send``'s futures are ``RecordFuture``\\ s (the C extension), not asyncio's."""

log = logging.getLogger(__name__)
_new_metadata = tuple.__new__
_InvalidStateError = asyncio.InvalidStateError
_current_task: Callable[[asyncio.AbstractEventLoop], object] = asyncio.current_task
if sys.version_info < (3, 12):  # asyncio.current_task(loop) is _current_tasks.get(loop) there,
    _current_task = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined] # in Python
_T = TypeVar("_T")


class PyReady(Generic[_T]):
    """``Ready`` without the extension: ``await`` gives ``value`` at once. A coroutine to
    ``asyncio.create_task`` (``send``/``throw``/``close``), as ``send`` was."""

    __slots__ = ("_value",)

    def __init__(self, value: _T) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, _T]:
        return self._value
        yield  # a generator: the await finishes at once

    def send(self, _value: object) -> None:
        raise StopIteration(self._value)

    def throw(self, error: BaseException, *_: object) -> None:
        raise error

    def close(self) -> None:
        pass


class _BatchWatch:
    """A group's watch over its batch (a ``kclient.sender.future.Watcher``): the group is
    settled when the batch completed (``_notify``) or was split (``_watch``: then each
    record follows its new batch on its own). No done callback on a record future."""

    __slots__ = ("_result", "_settle")

    def __init__(self, settle: Callable[[ProduceResult], None], result: ProduceResult) -> None:
        self._settle = settle
        self._result = result

    def _notify(self) -> None:
        try:
            self._settle(self._result)
        except Exception:  # a bug here must not take the Sender's step down
            log.exception("settling the futures of a batch for %s failed", self._result.tp)

    def _watch(self) -> None:
        self._notify()


class BatchCompletions:
    """The futures of records still in flight, grouped by batch.

    ``in_step()`` says whether the Sender's step is running: settled then, callbacks wait
    for ``dispatch`` (the driver calls it after the step); otherwise they go to the loop
    at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, in_step: Callable[[], bool]) -> None:
        self._loop = loop
        self._in_step = in_step
        self._groups: dict[ProduceResult, list[Any]] = {}
        """Per batch: (future, offset delta, timestamp ms, key size, value size) per record,
        flat (no tuple per record: less for the garbage collector to walk)."""
        self.pending: list[Any] = []
        """(future, callback, context) flat: callbacks of settled futures not run yet. Always
        this list (the driver holds it too: ``LoopSender.pending``), emptied as it is run."""
        self._new_future: Callable[[], Any] = loop.create_future
        """A pending future of ``loop``: a ``RecordFuture`` with the extension."""
        self._ready: Callable[[Any], Any] = PyReady
        """The awaitable ``track`` returns: ``Ready`` with the extension."""
        self._add_row: Callable[[list[Any], asyncio.AbstractEventLoop, int, int, int, int], Any]
        self._add_row = self._py_add_row
        """A new future's row appended to its group; the future's ``Ready``."""
        self.after_step: Callable[[], None] = self.dispatch
        """``dispatch`` (the extension's ``dispatch`` when built: the same, no frame)."""
        if NATIVE:
            self._new_future = functools.partial(_native.RecordFuture, loop)
            self._ready = _native.Ready
            self._add_row = _native.add_row
            self.after_step = functools.partial(_native.dispatch, self.pending, loop, _current_task)
        elif type(loop).create_future is asyncio.BaseEventLoop.create_future:
            # what it does, without its Python frame
            self._new_future = functools.partial(asyncio.Future, loop=loop)

    def track(self, record: FutureRecordMetadata) -> Any:
        """The awaitable of a new future for ``record`` (just queued by ``send``): its row
        goes to its batch's group; the first record of a batch makes the group and watches
        the batch."""
        result = record.produce_result
        rows = self._groups.get(result)
        if rows is None:
            if result.done or result.superseded:  # not expected: completions come later
                future = self._new_future()
                record.add_done_callback(functools.partial(self._settle_one, future))
                return self._ready(future)
            rows = self._groups[result] = []
            result.watch(_BatchWatch(self._settle, result))
        return self._add_row(
            rows,
            self._loop,
            record.offset_delta,
            record.timestamp_ms,
            record.key_size,
            record.value_size,
        )

    def _py_add_row(  # noqa: PLR0917 -- the extension's add_row
        self,
        rows: list[Any],
        loop: asyncio.AbstractEventLoop,
        offset_delta: int,
        timestamp_ms: int,
        key_size: int,
        value_size: int,
    ) -> PyReady[asyncio.Future[RecordMetadata]]:
        """``add_row`` without the extension: an asyncio future of ``loop``."""
        future: asyncio.Future[RecordMetadata] = self._new_future()
        rows.extend((future, offset_delta, timestamp_ms, key_size, value_size))
        return PyReady(future)

    def dispatch(self) -> None:
        """Run the callbacks of the futures settled so far: directly, unless inside a
        running Task (then ``call_soon``). The driver calls it after each step."""
        pending = self.pending
        if pending:
            loop = self._loop
            _native.run_callbacks(pending, loop, _current_task(loop) is None)

    def _settled(self) -> None:
        if self.pending and not self._in_step():  # not in a Sender step: the loop's way
            _native.run_callbacks(self.pending, self._loop, False)

    def _settle(self, result: ProduceResult) -> None:
        """``result``'s batch completed (or was split): settle its records' futures."""
        rows = self._groups.pop(result)
        each = iter(rows)
        if result.superseded or result.record_errors is not None:
            for future, delta, timestamp_ms, key_size, value_size in zip(
                each, each, each, each, each, strict=True
            ):
                record = FutureRecordMetadata(result, delta, timestamp_ms, key_size, value_size)
                record.add_done_callback(functools.partial(self._settle_one, future))
            return
        error = result.error
        tp = result.tp
        if NATIVE:
            if error is not None:
                _native.settle_error(rows, error, self.pending)
            else:
                _native.settle_ok(
                    rows,
                    tp.topic,
                    tp.partition,
                    result.base_offset,
                    result.log_append_time_ms,
                    self.pending,
                )
            self._settled()
            return
        if error is not None:
            for future, *_ in zip(each, each, each, each, each, strict=True):
                if not future.done():  # not cancelled by its caller
                    future.set_exception(error)
            return
        topic, partition = tp.topic, tp.partition
        base_offset = result.base_offset
        log_append_time_ms = result.log_append_time_ms
        for future, delta, timestamp_ms, key_size, value_size in zip(
            each, each, each, each, each, strict=True
        ):
            metadata = _new_metadata(
                RecordMetadata,
                (
                    topic,
                    partition,
                    base_offset + delta if base_offset >= 0 else -1,
                    log_append_time_ms if log_append_time_ms >= 0 else timestamp_ms,
                    key_size,
                    value_size,
                    1 if log_append_time_ms >= 0 else 0,  # timestamp_type: LogAppendTime
                ),
            )
            try:
                future.set_result(metadata)
            except _InvalidStateError:  # cancelled by its caller
                pass

    def _settle_one(self, future: Any, record: FutureRecordMetadata) -> None:
        """One record's future, from its own (done) record future."""
        if future.done():
            return
        result = record._follow()
        error = record_error(result, record.offset_delta)
        metadata = None
        if error is None:
            metadata = record_metadata(
                result,
                record.offset_delta,
                record.timestamp_ms,
                record.key_size,
                record.value_size,
            )
        if NATIVE:
            _native.settle_one(future, metadata, error, self.pending)
            self._settled()
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(metadata)
