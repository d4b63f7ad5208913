"""Property: on any script of sends, readiness, polls, mutes and time, over sockets that take
writes in random pieces (or fail, or would block) and hand out frames cut anywhere (then
maybe close or reset), KSelector's C ``poll``/``send`` and the Python reference leave the
same trace: every result list, error message, interest change, select timeout, byte
written and idle timestamp, step by step."""

from __future__ import annotations

import functools
import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.network.selector_impls import (
    FAST,
    PY,
    READ,
    WRITE,
    Harness,
    Impl,
    Sock,
    outcome,
    snapshot,
)

NODES = (1, 2, 3)


@st.composite
def sockets(draw: st.DrawFn) -> dict[int, dict[str, Any]]:
    scripts = {}
    for node_id in NODES:
        payloads = draw(st.lists(st.binary(max_size=90), max_size=4))
        data = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
        cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=5)))
        chunks: list[Any] = [
            data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a
        ]
        chunks.append(draw(st.sampled_from(["eagain", "closed", "reset"])))
        takes = draw(
            st.lists(st.one_of(st.integers(0, 40), st.sampled_from(["eagain", "pipe"])), max_size=6)
        )
        scripts[node_id] = {
            "chunks": chunks,
            "takes": takes,
            "chunk_bytes": draw(st.sampled_from([None, 64])),
        }
    return scripts


OPS = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(NODES), st.integers(1, 120), st.booleans()),
    st.tuples(
        st.just("ready"),
        st.lists(
            st.tuples(st.sampled_from(NODES), st.sampled_from([READ, WRITE, READ | WRITE])),
            max_size=3,
        ),
    ),
    st.tuples(st.just("poll"), st.sampled_from([0, 30, 10**12])),
    st.tuples(st.just("advance"), st.integers(0, 80)),
    st.tuples(st.sampled_from(["mute", "unmute"]), st.sampled_from(NODES)),
)


def _error(name: str) -> BaseException:
    if name == "eagain":
        return BlockingIOError(11, "Resource temporarily unavailable")
    if name == "reset":
        return ConnectionResetError(104, "Connection reset by peer")
    return BrokenPipeError(32, "Broken pipe")


def apply(h: Harness, op: tuple[Any, ...]) -> None:
    if op[0] == "send":
        _, node_id, size, awaits = op
        h.send(node_id, bytes([node_id]) * size, awaits)
    elif op[0] == "ready":
        h.readiness.ready(*op[1])
    elif op[0] == "poll":
        h.sel.poll(op[1])
    elif op[0] == "advance":
        h.clock.advance(op[1])
    else:
        getattr(h.sel, op[0])(op[1])


def trace(impl: Impl, scripts: dict[int, dict[str, Any]], ops: list[Any]) -> list[Any]:
    h = Harness(impl, max_idle_ms=100, max_receive=200)
    try:
        for node_id, script in scripts.items():
            chunks = [
                c if isinstance(c, bytes) else (b"" if c == "closed" else _error(c))
                for c in script["chunks"]
            ]
            takes = [t if isinstance(t, int) else _error(t) for t in script["takes"]]
            h.add(node_id, Sock(chunks=chunks, takes=takes), chunk_bytes=script["chunk_bytes"])
        seen = []
        for op in ops:
            if op[0] in ("ready", "advance"):
                apply(h, op)
            else:
                seen.append(outcome(functools.partial(apply, h, op)))
            seen.append(snapshot(h))
        return seen
    finally:
        h.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts=sockets(), ops=st.lists(OPS, max_size=25), fast=st.sampled_from(FAST))
def test_c_poll_and_send_trace_the_python(
    scripts: dict[int, dict[str, Any]], ops: list[Any], fast: Impl
) -> None:
    assert trace(fast, scripts, ops) == trace(PY, scripts, ops)
