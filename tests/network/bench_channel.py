"""timeit of the network channel's per-request work, C (kclient.network._channel) against the
Python reference, in the same run, on a local socketpair (non-blocking):

    .venv/bin/python tests/network/bench_channel.py [--number 20000] [--repeat 7]

- send: ``NetworkSend(node, [header, records])`` + ``write_to`` (a 60 B header and a 170 B
  record batch as a memoryview, as a one-partition ProduceRequest), the peer draining it;
- read: a 100 B response frame written by the peer, then ``KafkaChannel.read`` (one
  ``recv_into`` and the frame cut into a ``NetworkReceive``);
- floor: the same socket calls without the channel (``sendmsg`` + ``recv_into``; ``send`` +
  ``recv_into``), what neither implementation can save.
Best of ``repeat`` interleaved runs, µs per operation.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.network.channel_impls import IMPLS  # noqa: E402

HEADER = bytes(60)
RECORDS = memoryview(bytes(range(170)))
RESPONSE = struct.pack(">i", 100) + bytes(100)


def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    a, b = pair()
    sink = bytearray(1 << 16)
    buffers = [HEADER, RECORDS]

    def floor_send() -> None:
        a.sendmsg(buffers)
        b.recv_into(sink)

    def floor_read() -> None:
        b.send(RESPONSE)
        a.recv_into(sink)

    cases: dict[tuple[str, str], Any] = {
        ("send", "floor"): floor_send,
        ("read", "floor"): floor_read,
    }
    for impl in IMPLS:

        def send_once(send_type: Any = impl.send) -> None:
            send_type(1, buffers).write_to(a)
            b.recv_into(sink)

        ch = impl.channel(1, a, "127.0.0.1:9092", 1 << 20)
        ch.connected = True
        completed: list[Any] = []

        def read_once(ch: Any = ch, completed: list[Any] = completed) -> None:
            b.send(RESPONSE)
            ch.read(completed)
            completed.clear()

        cases["send", impl.name] = send_once
        cases["read", impl.name] = read_once
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.repeat):  # interleaved: a noisy moment hits every case alike
        for key, fn in cases.items():
            best[key] = min(best[key], timeit.timeit(fn, number=args.number) / args.number * 1e6)
    a.close()
    b.close()
    print(f"µs per operation, best of {args.repeat} interleaved runs of {args.number}")
    print("| operation | Python | C | C saves | the socket calls alone |")
    print("|---|---:|---:|---:|---:|")
    labels = {
        "send": "NetworkSend(...) + write_to",
        "read": "KafkaChannel.read (one frame)",
    }
    for op, label in labels.items():
        py, c, floor = best[op, "python"], best[op, "c"], best[op, "floor"]
        print(f"| {label} | {py:.2f} | {c:.2f} | {py - c:.2f} ({py / c:.2f}x) | {floor:.2f} |")


if __name__ == "__main__":
    main()
