"""The Sender's driver on the event loop (``LoopSender``): wakeups, readiness, scheduled
steps, timers, steps that fail and passes that resume a task which sends again ask the loop
for what they need and no more.

No sockets, no real loop: a scripted loop records ``call_soon``/``call_at``/``cancel`` and
a scripted Sender returns the poll timeouts (or raises) it is told to.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.aio.loop_sender import LoopSender


class Handle:
    def __init__(self, log: list[object], name: str, callback: Any) -> None:
        self.log, self.name, self.callback = log, name, callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.log.append(("cancel", self.name))


class Loop:
    def __init__(self, log: list[object]) -> None:
        self.log = log
        self.now = 100.0
        self.soon: list[Handle] = []
        self.timers: list[Handle] = []

    def time(self) -> float:
        return self.now

    def call_soon(self, callback: Any) -> Handle:
        handle = Handle(self.log, f"soon{len(self.soon)}", callback)
        self.soon.append(handle)
        self.log.append(("call_soon", callback.__name__))
        return handle

    def call_at(self, when: float, callback: Any) -> Handle:
        handle = Handle(self.log, f"timer{len(self.timers)}", callback)
        self.timers.append(handle)
        self.log.append(("call_at", when, callback.__name__))
        return handle


class StepFailed(Exception):
    pass


class Sender:
    """Answers each run_once with the next scripted timeout (an exception: raises it)."""

    def __init__(self, log: list[object], timeouts: list[object]) -> None:
        self.log, self.timeouts = log, timeouts
        self.in_step: Any = None

    def run_once(self) -> object:
        self.log.append(("run_once", self.in_step()))
        timeout = self.timeouts.pop(0) if self.timeouts else 7
        if isinstance(timeout, Exception):
            raise timeout
        return timeout

    def poll_network(self) -> int:
        self.log.append("poll_network")
        if self.timeouts and isinstance(self.timeouts[0], Exception):
            raise self.timeouts.pop(0)
        return 0

    def fail_on_error(self, exc: BaseException) -> None:
        self.log.append(("fail_on_error", repr(exc)))


class Selector:
    def __init__(self) -> None:
        self.returned_events = False
        self.requested_timeout_ms = 250


OPS = st.sampled_from(
    ["schedule", "run_now", "on_ready", "soon", "timer", "settle", "resume", "advance", "stop"]
)
TIMEOUTS = st.one_of(st.sampled_from([0, -1, 3, 250, 10**7]), st.just(StepFailed("step failed")))


def drive(
    ops: list[str], timeouts: list[object], selector: bool, events: list[bool]
) -> tuple[list[object], tuple[object, ...]]:
    log: list[object] = []
    loop = Loop(log)
    driver = LoopSender(loop)  # type: ignore[arg-type]
    driver.sender = Sender(log, list(timeouts))
    driver.sender.in_step = driver.is_running
    if selector:
        driver.selector = Selector()
    driver.on_failure = lambda exc: log.append(("on_failure", repr(exc)))
    events = list(events)

    def after_step() -> None:  # the pass: a resumed task may send again (run_now, nested)
        taken = list(driver.pending)
        driver.pending.clear()
        log.append(("after_step", taken))
        if "resume" in taken:
            driver.schedule()
            guarded(driver.run_now)

    def guarded(call: Any) -> None:
        try:
            call()
        except StepFailed as exc:
            log.append(("raised", repr(exc)))

    driver.after_step = after_step
    for op in ops:
        if driver.selector is not None and events:
            driver.selector.returned_events = events.pop(0)
        if op in ("schedule", "run_now", "on_ready"):
            guarded(getattr(driver, op))
        elif op == "soon" and loop.soon and not loop.soon[-1].cancelled:
            handle = loop.soon.pop()
            log.append(("runs", handle.name))
            guarded(handle.callback)
        elif op == "timer" and loop.timers and not loop.timers[-1].cancelled:
            handle = loop.timers.pop()
            log.append(("runs", handle.name))
            guarded(handle.callback)
        elif op in ("settle", "resume"):
            driver.pending.append(op)
        elif op == "advance":
            loop.now += 1.5
        elif op == "stop":
            driver.stop()
    state = (
        driver.scheduled,
        driver.running,
        driver.stopped,
        driver._steps,
        driver._timer_at,
        driver._dispatching,
        driver._handle is None,
        list(driver.pending),
    )
    return log, state


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(OPS, max_size=25),
    timeouts=st.lists(TIMEOUTS, max_size=12),
    selector=st.booleans(),
    events=st.lists(st.booleans(), max_size=25),
)
def test_every_step_runs_as_a_step_and_at_most_one_soon_call_is_live(
    ops: list[str], timeouts: list[object], selector: bool, events: list[bool]
) -> None:
    log, state = drive(ops, timeouts, selector, events)
    assert ("run_once", False) not in log  # in_step() (completions wait for the pass)
    assert state[1] is False  # not running once every call returned
    live: set[str] = set()
    for entry in log:
        if entry[0] == "call_soon":
            assert not live, log  # a second step asked for while one is still asked for
            live.add("soon")
        elif (entry[0] == "runs" and str(entry[1]).startswith("soon")) or entry[0] == "cancel":
            live.clear()


def test_wakeups_before_a_step_ask_the_loop_once_and_the_step_sets_its_timer() -> None:
    log, state = drive(["schedule", "schedule", "soon"], [250], False, [])
    assert log == [
        ("call_soon", "_scheduled_run"),
        ("runs", "soon0"),
        ("run_once", True),
        ("call_at", 100.25, "_on_timer"),
    ]
    assert state[0] is False  # nothing scheduled any more


def test_run_now_takes_the_scheduled_step_at_once() -> None:
    log, _ = drive(["schedule", "run_now"], [3], False, [])
    assert log == [
        ("call_soon", "_scheduled_run"),
        ("cancel", "soon0"),
        ("run_once", True),
        ("call_at", 100.003, "_on_timer"),
    ]


def test_a_ready_socket_is_read_then_the_full_step_follows() -> None:
    log, _ = drive(["on_ready", "soon"], [0], True, [False, False])
    assert log[:3] == ["poll_network", ("call_soon", "_scheduled_run"), ("runs", "soon0")]
    assert log[3] == ("run_once", True)


def test_a_task_resumed_after_the_step_sends_again_without_a_loop_iteration() -> None:
    log, _ = drive(["resume", "schedule", "soon"], [250, 250], False, [])
    runs = [entry for entry in log if entry[0] == "run_once"]
    assert len(runs) == 2  # the step, then the resumed task's run_now inside the pass
    assert log.count(("call_soon", "_scheduled_run")) == 1


def test_a_failing_step_fails_the_producer_and_stops_the_driver() -> None:
    log, state = drive(["schedule", "soon", "schedule"], [StepFailed("boom")], True, [])
    assert ("fail_on_error", "StepFailed('boom')") in log
    assert ("on_failure", "StepFailed('boom')") in log
    assert ("raised", "StepFailed('boom')") in log
    assert state[2] is True  # stopped: the later schedule asks the loop for nothing
    assert log.count(("call_soon", "_scheduled_run")) == 1
