"""Where one kclient.aio ``send_and_wait`` round trip spends its time, on tansu.

    .venv/bin/python benchmarks/aio_round_trip.py [--waits 3000]
    .venv/bin/python benchmarks/aio_round_trip.py --opcodes [--waits 300] [--top 40] [--by-phase]
    .venv/bin/python benchmarks/aio_round_trip.py --after-write [--waits 3000]

acks=all, no idempotence, linger 0, 100 B values, one partition, every record awaited
before the next (``benchmarks/aio_producer.py`` compares the clients; this one looks
inside kclient's).

- Default: the **timeline**. Timestamps at the call, the request's write and the answer's
  read (the socket's methods wrapped), the answer's readability (the event loop's reader
  callback wrapped) and the caller's return (each wrapper costs about 0.5 µs), and the
  median µs between consecutive ones, over the round trips that took the most common path.
  The steps in between are C, not marked one by one. What delays the caller: the time
  from the call to the write, from the answer's readability to the caller resuming, and
  the work after the write too when the broker runs on this CPU (see ``--after-write``).
  The floor row repeats the split for one pre-encoded request sent again and again on a
  plain socket read by the event loop.
- ``--opcodes``: the **Python opcodes** executed per round trip, by function (a
  ``sys.settrace`` opcode count: deterministic, unlike times on a shared machine; a
  change that saves opcodes on the path saves time, in proportion roughly). The total is
  split as the timeline is: up to the request's write, after it, and from
  the answer's readability to the caller resuming (the first and the last are the latency).
"""

from __future__ import annotations

import _socket
import argparse
import asyncio
import collections
import contextlib
import os
import re
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.aio_producer import RawProduce  # noqa: E402
from integration.peers import run_tansu  # noqa: E402
from kclient.aio import AIOKafkaProducer, loop_selector  # noqa: E402

VALUE = b"x" * 100
WARM_UP = 50
_STDLIB = re.compile(r"^.*/lib/python3\.\d+/")
_clock = time.perf_counter
_marks: list[tuple[str, float]] = []
# --opcodes splits the round trip where the timeline does: the call up to the request's
# write (KSelector.send returning), the write up to the answer's readability, and the
# answer up to the caller resuming (only the first and the last delay the caller)
_TO_WRITE, _AFTER_WRITE, _AFTER_READABLE = "call to write", "overlapping", "readable to return"
_PHASES = (_TO_WRITE, _AFTER_WRITE, _AFTER_READABLE)

# The marks: the request's write and the answer's read are the socket's own methods, wrapped
# on socket.socket (the network code, C or Python, calls them by name), and the answer's
# readability is the loop selector's reader callback. The steps between them are C now (the
# accelerator replaces the methods on their classes), so they are not marked one by one.
_send, _sendmsg, _recv_into = _socket.socket.send, _socket.socket.sendmsg, _socket.socket.recv_into
_readable = loop_selector.LoopSelector._readable


def _marked_send(sock: socket.socket, *args: Any) -> Any:
    _marks.append(("write", _clock()))
    try:
        return _send(sock, *args)
    finally:
        _marks.append(("write returns", _clock()))


def _marked_sendmsg(sock: socket.socket, *args: Any) -> Any:
    _marks.append(("write", _clock()))
    try:
        return _sendmsg(sock, *args)
    finally:
        _marks.append(("write returns", _clock()))


def _marked_recv_into(sock: socket.socket, *args: Any) -> Any:
    _marks.append(("read", _clock()))
    try:
        return _recv_into(sock, *args)
    finally:
        _marks.append(("read returns", _clock()))


def _marked_readable(selector: Any, fd: int) -> None:
    _marks.append(("readable", _clock()))
    _readable(selector, fd)


_WRITES = (_marked_send.__code__, _marked_sendmsg.__code__)


@contextlib.contextmanager
def _marking() -> Iterator[None]:
    """The wrappers in place (socket.socket's methods, the reader callback), then removed."""
    socket.socket.send = _marked_send  # type: ignore[method-assign,assignment]
    socket.socket.sendmsg = _marked_sendmsg  # type: ignore[method-assign,assignment]
    socket.socket.recv_into = _marked_recv_into  # type: ignore[method-assign,assignment]
    loop_selector.LoopSelector._readable = _marked_readable  # type: ignore[method-assign]
    try:
        yield
    finally:
        del socket.socket.send, socket.socket.sendmsg, socket.socket.recv_into
        loop_selector.LoopSelector._readable = _readable  # type: ignore[method-assign]


def _producer(bootstrap: str) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=0
    )


async def timeline(bootstrap: str, topic: str, floor_topic: str, waits: int) -> None:
    runs: list[list[tuple[str, float]]] = []
    with _marking():  # before the producer exists: the selector keeps its bound callback
        producer = _producer(bootstrap)
        await producer.start()
        for _ in range(WARM_UP):
            await producer.send_and_wait(topic, VALUE)
        for _ in range(waits):
            _marks.clear()
            _marks.append(("send_and_wait", _clock()))
            await producer.send_and_wait(topic, VALUE)
            _marks.append(("returns", _clock()))
            runs.append(list(_marks))
        await producer.stop()
    paths = collections.Counter(tuple(label for label, _ in run) for run in runs)
    path, _ = paths.most_common(1)[0]
    same = [run for run in runs if tuple(label for label, _ in run) == path]
    print(f"kclient.aio: {len(same)} of {waits} round trips took this path; median µs\n")
    print("| from | to | µs |")
    print("|---|---|---:|")
    for i in range(1, len(path)):
        gap = statistics.median(run[i][1] - run[i - 1][1] for run in same) * 1e6
        print(f"| {path[i - 1]} | {path[i]} | {gap:.1f} |")
    write, readable = path.index("write"), path.index("readable")
    before = statistics.median(run[write][1] - run[0][1] for run in same) * 1e6
    after = statistics.median(run[-1][1] - run[readable][1] for run in same) * 1e6
    total = statistics.median(run[-1][1] - run[0][1] for run in same) * 1e6
    print(f"\ncall to write {before:.1f} µs, readable to return {after:.1f} µs, total {total:.1f}")
    await _floor(bootstrap, floor_topic, waits)


async def _floor(bootstrap: str, topic: str, waits: int) -> None:
    loop = asyncio.get_running_loop()
    raw = RawProduce(bootstrap, topic)
    readable_at = [0.0]
    read = raw._readable

    def readable() -> None:
        readable_at[0] = _clock()
        read()

    raw._readable = readable  # type: ignore[method-assign]
    raw.start_async(loop)
    rows = []
    for i in range(WARM_UP + waits):
        t0 = _clock()
        await raw.async_round_trip(loop)
        t1 = _clock()
        if i >= WARM_UP:
            rows.append((readable_at[0] - t0, t1 - readable_at[0], t1 - t0))
    raw.close(loop)
    split = [statistics.median(row[i] for row in rows) * 1e6 for i in range(3)]
    print(
        f"floor (asyncio, raw socket): call to readable {split[0]:.1f} µs, readable to "
        f"return {split[1]:.1f} µs, total {split[2]:.1f}"
    )


async def opcodes(bootstrap: str, topic: str, waits: int, top: int, by_phase: bool) -> None:
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    phases: collections.Counter[str] = collections.Counter()
    phase = [_TO_WRITE]
    root = str(ROOT) + "/"
    readable_code = _marked_readable.__code__

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., Any]:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code
        if event == "opcode":
            if code.co_filename == __file__:
                return trace  # this script's own (the loop, the marks' wrappers)
            where = _STDLIB.sub("", code.co_filename.removeprefix(root))
            if by_phase:
                where = f"{phase[0]}: {where}"
            counts[where, code.co_name] += 1
            phases[phase[0]] += 1
        elif code is readable_code and event == "call":
            phase[0] = _AFTER_READABLE
        elif code in _WRITES and event == "return":
            phase[0] = _AFTER_WRITE
        return trace

    with _marking():
        producer = _producer(bootstrap)
        await producer.start()
        for _ in range(WARM_UP):
            await producer.send_and_wait(topic, VALUE)
        sys.settrace(trace)
        try:
            for _ in range(waits):
                phase[0] = _TO_WRITE
                await producer.send_and_wait(topic, VALUE)
        finally:
            sys.settrace(None)
        await producer.stop()
    print(f"Python opcodes per round trip: {sum(counts.values()) / waits:,.0f}")
    split = ", ".join(f"{name} {phases[name] / waits:,.0f}" for name in _PHASES)
    print(f"({split})\n")
    print("| opcodes | function |")
    print("|---:|---|")
    for (where, name), count in counts.most_common(top):
        print(f"| {count / waits:,.0f} | {where}:{name} |")


async def after_write(bootstrap: str, topic: str, waits: int, pid: int) -> None:
    """The floor's round trip with the CPU kept busy for a while after the write, as a
    client's bookkeeping keeps it: does that work overlap the broker's? Then the same with
    the broker's threads held on another CPU than this process's (when there is one)."""
    loop = asyncio.get_running_loop()
    raw = RawProduce(bootstrap, topic)
    raw.start_async(loop)
    spins = (0, 10, 20, 30, 60)
    cpus = sorted(os.sched_getaffinity(0))
    tansu_threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    print("| busy after the write, µs | round trip p50 µs | broker on another CPU: p50 µs |")
    print("|---:|---:|---:|")
    rows: dict[int, list[float]] = {}
    for pinned in (False, True):
        if pinned:
            if len(cpus) < 2:
                break
            for thread in tansu_threads:
                os.sched_setaffinity(thread, {cpus[1]})
            os.sched_setaffinity(0, {cpus[0]})
        try:
            times: dict[int, list[float]] = {spin: [] for spin in spins}
            for _ in range(waits // 50):
                for spin in spins:
                    for _ in range(50):
                        t0 = _clock()
                        raw.answered = loop.create_future()
                        raw.sock.send(raw.frame)
                        while _clock() - t0 < spin / 1e6:
                            pass
                        await raw.answered
                        times[spin].append(_clock() - t0)
        finally:
            if pinned:
                for thread in tansu_threads:
                    os.sched_setaffinity(thread, cpus)
                os.sched_setaffinity(0, cpus)
        for spin in spins:
            rows.setdefault(spin, []).append(statistics.median(times[spin]) * 1e6)
    raw.close(loop)
    for spin, p50s in rows.items():
        pinned_text = f"{p50s[1]:.0f}" if len(p50s) > 1 else "-"
        print(f"| {spin} | {p50s[0]:.0f} | {pinned_text} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, default=None, help="round trips measured")
    parser.add_argument("--opcodes", action="store_true", help="count opcodes instead")
    parser.add_argument("--top", type=int, default=40, help="functions listed (--opcodes)")
    parser.add_argument(
        "--by-phase", action="store_true", help="list functions per phase (--opcodes)"
    )
    parser.add_argument(
        "--after-write",
        action="store_true",
        help="the floor with the CPU kept busy after the write (does it overlap the broker?)",
    )
    args = parser.parse_args()
    waits = args.waits or (300 if args.opcodes else 3000)
    if waits < 1 or args.top < 0:
        parser.error("--waits must be at least 1 and --top at least 0")
    with run_tansu() as tansu:
        tansu.create_topic("round-trip", 1)
        tansu.create_topic("round-trip-floor", 1)
        if args.after_write:
            asyncio.run(
                after_write(tansu.bootstrap_servers, "round-trip-floor", waits, tansu.proc.pid)
            )
        elif args.opcodes:
            asyncio.run(
                opcodes(tansu.bootstrap_servers, "round-trip", waits, args.top, args.by_phase)
            )
        else:
            asyncio.run(timeline(tansu.bootstrap_servers, "round-trip", "round-trip-floor", waits))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
