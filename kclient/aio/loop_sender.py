"""The producer's Sender driven by an asyncio event loop: Java's ``Sender`` thread loop
(``Sender.run``), without the thread.

``LoopProducer`` is a ``KafkaProducer`` that starts no I/O thread: its ``NetworkClient``
reads readiness from the event loop (``LoopSelector``) and ``LoopSender`` runs
``Sender.run_once`` on the loop — at once when a socket is ready, soon (``call_soon``)
when the accumulator or a caller wakes it, and at the Sender's next deadline
(``loop.call_at``: linger, retry backoff, request and delivery timeouts, metadata
refreshes; the timeout the Sender polled with). ``run_once`` never blocks: ``select``
returns at once. Record callbacks therefore run on the loop, inside ``run_once``; the
callbacks waiting on ``kclient.aio``'s futures run right after it (``after_step``).

``aclose`` is ``KafkaProducer.close`` awaited: it drives the Sender until what was sent
is delivered (or the timeout), then fails the rest and closes the connections.

Owned by the event loop's thread: every method is called on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kclient.aio.loop_selector import LoopSelector
from kclient.aio.resolver import LoopResolver
from kclient.config import ProducerConfig
from kclient.errors import FatalTransactionError, IllegalStateError
from kclient.network import NetworkClient, NetworkClientConfig, parse_bootstrap_servers
from kclient.network.bootstrap_resolution import RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY
from kclient.network.kafka_client import KafkaClient
from kclient.producer import kafka_producer as producer_module
from kclient.producer.kafka_producer import KafkaProducer, _live_producers

log = logging.getLogger(__name__)

_MAX_WAIT_MS = 3_600_000
_CLOSED_EARLY = "the producer was closed before these records were delivered"


class LoopClient(KafkaClient, Protocol):
    """A scripted ``KafkaClient`` for ``LoopProducer`` (tests): its ``poll`` never blocks,
    and it calls ``on_ready`` (set by the producer) when a ``poll`` has news, as a socket
    becoming ready does."""

    on_ready: Callable[[], None]


class Steps(Protocol):
    """What ``LoopSender`` drives: the ``Sender``'s step, its network part, and its failure
    (a scripted one in tests)."""

    def run_once(self) -> int: ...

    def poll_network(self) -> int: ...

    def fail_on_error(self, exc: BaseException) -> None: ...


class ReadySelector(Protocol):
    """What ``LoopSender`` reads of its selector after a step (``LoopSelector``)."""

    @property
    def returned_events(self) -> bool: ...

    @property
    def requested_timeout_ms(self) -> int: ...


class LoopSender:
    """Runs ``sender.run_once`` on ``loop`` when there is something to do."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._time: Callable[[], float] = loop.time
        if type(loop).time is asyncio.BaseEventLoop.time:  # what it does, without its frame
            self._time = time.monotonic
        self.sender: Steps | None = None
        self.selector: ReadySelector | None = None
        self.scheduled = False
        self._handle: asyncio.Handle | None = None
        self.running = False
        """Whether a step is running (records completing now wait for ``after_step``)."""
        self.stopped = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._turns: list[asyncio.Future[None]] = []
        self.on_failure: Callable[[BaseException], None] = lambda exc: None
        self.pending: list[Any] = []
        """What ``after_step`` has to do (``BatchCompletions.pending``, the same list): it
        runs after a step only when this is not empty."""
        self.after_step: Callable[[], None] = lambda: None
        """Runs after each step that left ``pending`` not empty (``BatchCompletions``'s
        ``dispatch``: the callbacks of the records it completed). A task it resumes may queue
        a record and start a step (``run_now``, nested); a step it only asks for
        (``schedule``) is deferred to the end of the pass, so that ``run_now`` takes it
        without a ``call_soon`` to cancel."""
        self._dispatching = False
        self._steps = 0

    def schedule(self) -> None:
        """Run a step soon (after the current callback): the accumulator or a caller has
        work for the Sender."""
        if not self.scheduled and not self.stopped:
            self.scheduled = True
            if self._dispatching:  # asked of the loop once the pass is over (_after_step)
                self._handle = None
            else:
                self._handle = self._loop.call_soon(self._scheduled_run)

    def run_now(self) -> None:
        """Run a step now instead of soon (a caller about to wait for what it queued:
        its request goes out one loop iteration earlier)."""
        if self.scheduled and not self.running and not self.stopped:
            self.scheduled = False
            if self._handle is not None:
                self._handle.cancel()
            self.run()

    def on_ready(self) -> None:
        """A socket is ready: read and write what is ready now (``Sender.poll_network``);
        the full step follows (``schedule``), unless a task resumed by the answers runs
        it first (``run_now``). The answer's records complete one step sooner."""
        if self.running or self.stopped:
            return
        sender = self.sender
        assert sender is not None
        self.running = True
        try:
            sender.poll_network()
        except BaseException as exc:
            self._failed(sender, exc)
            raise
        steps = self._step_over()
        if self._steps == steps and not self.stopped:
            self.schedule()  # the full step (unless a resumed task ran one)

    def is_running(self) -> bool:
        """Whether a step is running (``BatchCompletions``' ``in_step``)."""
        return self.running

    def _scheduled_run(self) -> None:
        self.scheduled = False
        if not self.running and not self.stopped:
            self.run()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        if not self.running and not self.stopped:
            self.run()

    def run(self) -> None:
        """One ``Sender.run_once``, then a timer for its next deadline."""
        sender = self.sender
        assert sender is not None
        self.running = True
        try:
            timeout_ms = sender.run_once()
        except BaseException as exc:
            self._failed(sender, exc)
            raise
        selector = self.selector
        if selector is not None:
            # I/O done in this step (a response, a connection): go round again at once,
            # as the Sender thread's loop does when its poll returns early
            timeout_ms = 0 if selector.returned_events else selector.requested_timeout_ms
        steps = self._step_over()
        if self._steps != steps or self.stopped:
            return  # a task resumed after the step ran another: that one's schedule stands
        if timeout_ms <= 0:
            self.schedule()
            return
        at = self._time() + min(timeout_ms, _MAX_WAIT_MS) / 1000
        if at < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_at(at, self._on_timer)
            self._timer_at = at

    def _failed(self, sender: Steps, exc: BaseException) -> None:
        """A step raised: fail what is pending, stop, tell the producer."""
        try:
            sender.fail_on_error(exc)
            self.stop()
            self.on_failure(exc)
        finally:
            self.running = False
            self._after_step()

    def _step_over(self) -> int:
        """The step is over: its count (a task resumed by ``after_step`` may run another,
        which ``_steps`` then shows), the turns waiting for it ended, the pass after it (when
        it has something to do)."""
        self.running = False
        steps = self._steps = self._steps + 1
        if self._turns:
            self._end_turns()
        if self.pending or (self.scheduled and self._handle is None):
            self._after_step()
        return steps

    def _end_turns(self) -> None:
        turns, self._turns = self._turns, []
        for turn in turns:
            if not turn.done():
                turn.set_result(None)

    def _after_step(self) -> None:
        outer = self._dispatching
        self._dispatching = True
        try:
            if self.pending:
                self.after_step()
        finally:
            self._dispatching = outer
            if not outer and self.scheduled and self._handle is None and not self.stopped:
                self._handle = self._loop.call_soon(self._scheduled_run)

    async def turn(self, timeout_s: float | None = None) -> None:
        """Wait for the next step to have run (when I/O, a wakeup or the timer brings it:
        after every step one of them is due)."""
        future: asyncio.Future[None] = self._loop.create_future()
        self._turns.append(future)
        await asyncio.wait_for(future, timeout_s)

    def stop(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for turn in self._turns:
            if not turn.done():
                turn.set_result(None)
        self._turns = []


class LoopProducer(KafkaProducer):
    """``KafkaProducer`` whose Sender runs on ``loop`` (see the module docstring)."""

    def __init__(
        self,
        config: Mapping[str, object],
        loop: asyncio.AbstractEventLoop,
        kafka_client: LoopClient | None = None,
    ) -> None:
        driver = LoopSender(loop)
        self.driver = driver
        self.resolver: LoopResolver | None = None
        client: KafkaClient
        if kafka_client is None:
            cfg = ProducerConfig(config)
            #: the credentials the network client authenticates with (an OAUTHBEARER
            #: token source is started by ``AIOKafkaProducer.start``)
            self.network_sasl = cfg.sasl
            selector = LoopSelector(loop, driver.on_ready)
            self.resolver = LoopResolver(loop, driver.schedule)
            client = NetworkClient.create(
                cfg.bootstrap_servers,
                NetworkClientConfig.from_config(cfg),
                selector=selector,
                resolver=self.resolver,
                lookup=self.resolver.bootstrap_lookup(cfg.client_dns_lookup),
                resolve_bootstrap=False,  # by prime(), on the loop
            )
            driver.selector = selector
        else:  # a scripted client (tests): it calls on_ready when it has news
            kafka_client.on_ready = driver.on_ready
            client = kafka_client
        super().__init__(config, kafka_client=client)

    def _start_io(self) -> None:
        driver = self.driver
        driver.sender = self._sender
        driver.on_failure = self._sender_failed
        self._accumulator.wakeup = driver.schedule  # the first step: at the first wakeup

    def wakeup(self) -> None:
        self.driver.schedule()

    async def prime(self) -> None:
        """Resolve the bootstrap servers' names (the first connections need them); with
        ``bootstrap.resolve.timeout.ms`` 0 they are then the bootstrap nodes, and
        ``ConfigError`` is raised when none resolves."""
        if self.resolver is not None:
            canonical = self.config.client_dns_lookup == RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY
            await self.resolver.prime(
                parse_bootstrap_servers(self.config.bootstrap_servers), canonical=canonical
            )
            client = self._client
            if (
                isinstance(client, NetworkClient)
                and client.config.bootstrap_resolve_timeout_ms == 0
            ):
                client.resolve_bootstrap_now()

    def _sender_failed(self, exc: BaseException) -> None:
        self._set_fatal_error(FatalTransactionError(f"the producer's sender failed: {exc!r}"))

    async def await_flush(self, up_to_batch_id: int) -> None:
        """``flush``'s wait, awaited: until every batch up to ``up_to_batch_id`` (from
        ``accumulator.begin_flush``) completed, or the producer closed."""
        incomplete = self._accumulator.incomplete
        driver = self.driver
        while not driver.stopped and any(b.flush_id <= up_to_batch_id for b in incomplete.copy()):
            await driver.turn()

    async def aclose(self, timeout_s: float) -> None:
        """``close(timeout)`` awaited: deliver what was sent for up to ``timeout_s``, then
        fail what is left and close the connections. Calling it again does nothing."""
        if self._unusable == producer_module._CLOSED:
            return
        self._mark_closed()
        sender = self._sender
        driver = self.driver
        sender.initiate_close()
        driver.schedule()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while sender.has_pending_work() and loop.time() < deadline:
                with contextlib.suppress(asyncio.TimeoutError):  # not TimeoutError on 3.10
                    await driver.turn(deadline - loop.time())
            if sender.has_pending_work():
                log.warning("close timed out; failing the records not yet delivered")
            sender.begin_terminating_push()  # KIP-714's last push, within the same bound
            while sender.terminating_push_pending() and loop.time() < deadline:
                driver.schedule()
                with contextlib.suppress(asyncio.TimeoutError):
                    await driver.turn(deadline - loop.time())
            txn = sender._txn
            if txn is not None:  # an open transaction was aborted (awaited) before this
                txn.abort_on_close(lambda: True, sender.run_once)
            sender.abort_incomplete_batches(IllegalStateError(_CLOSED_EARLY))
        finally:
            driver.stop()
            if self.resolver is not None:
                self.resolver.close()
            sender.release_on_close()
            self._pool.close()
            self._metadata.close()
            _live_producers.discard(self)

    def close(self, timeout: float | None = None) -> None:
        """Without the loop (interpreter exit, a producer never stopped): fail what is
        left and close the connections, not waiting."""
        if self._unusable == producer_module._CLOSED:
            return
        self._mark_closed()
        self.driver.stop()
        if self.resolver is not None:
            self.resolver.close()
        self._sender.abort_incomplete_batches(IllegalStateError(_CLOSED_EARLY))
        self._sender.release_on_close()
        self._pool.close()
        self._metadata.close()
        _live_producers.discard(self)
