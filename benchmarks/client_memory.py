"""The producer's memory against a broken or hostile broker.

    .venv/bin/python benchmarks/client_memory.py [--baseline REF] [--partitions 300000]

Tiny fake brokers (``kclient.testing.fake_broker``, threads of this process, on
127.0.0.1) serve answers a well-behaved cluster would not give; for each case a fresh
process runs a producer against them for a few seconds and reports its peak RSS
(``VmHWM``) and its RSS at the end (``VmRSS``, after a ``gc.collect()``):

- **honest**: one partition, for scale (what an idle producer costs);
- **unused topics**: the producer asks for its topic; the Metadata answer also holds
  ``--partitions`` partitions of a topic it never asked for (7.8 MB for 300,000);
- **used topic**: the producer's own topic has ``--partitions`` partitions (it sends to
  partition 0, so that only the metadata grows; the "per partition" line divides the
  growth over *honest* by the partition count);
- **10 x 100 MiB announced**: the Metadata answer names ten more brokers, each leading a
  partition; each answers ApiVersions with a size prefix of 100 MiB, sends 64 KiB and
  stalls;
- **10 x 90 MB announced, 1 MB sent**: the same with 90 MB (under the receive limit),
  of which 1 MB is sent.

Then one MetadataResponse of ``--partitions`` partitions (of the producer's topic, or of
one it did not ask for) goes through a ``NetworkClient`` alone, with a ``MockSelector``
(no accumulator): tracemalloc's peak while it is handled, and what stays, per partition.

With ``--baseline REF`` every case also runs against the ``kclient`` package of git
revision REF (extracted to a temporary directory, without its C accelerator), for a
before/after table. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient.protocol import ApiKey  # noqa: E402
from kclient.protocol.frame import RequestHeader  # noqa: E402
from kclient.testing.fake_broker import FakeBroker, metadata_body  # noqa: E402

# The producer, in a child process: settings and what to send come from argv.
CHILD = r"""
import gc, json, sys, time
from kclient import KafkaProducer
bootstrap, topic, records, run_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
spread = int(sys.argv[5])  # records go round-robin to partitions 0 .. spread-1
def status_kb(field):  # VmHWM: peak RSS of this process image (ru_maxrss keeps the
    for line in open("/proc/self/status"):  # parent's across fork + exec)
        if line.startswith(field + ":"):
            return int(line.split()[1])
started = time.monotonic()
outcome = "ok"
producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_block_ms=int(run_s * 1000),
                         request_timeout_ms=2000, delivery_timeout_ms=3000)
try:
    futures = [producer.send(topic, b"v" * 100, partition=i % spread) for i in range(records)]
    for future in futures:
        try:
            future.get(timeout=run_s + 10)
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"
while time.monotonic() - started < run_s:  # hostile brokers: let reconnects happen
    time.sleep(0.1)
gc.collect()
end_kb = status_kb("VmRSS")
producer.close(timeout=5)
peak_kb = status_kb("VmHWM")
print(json.dumps({"peak_kb": peak_kb, "end_kb": end_kb, "outcome": outcome}))
"""

# The network client alone (no accumulator), in a child process: what one MetadataResponse
# costs the producer's metadata, traced by tracemalloc (peak while handling it, and what
# is kept once it is handled), per partition. argv: partitions, "used" or "unused".
METADATA_CHILD = r"""
import gc, json, sys, tracemalloc
from kclient.network.client import NetworkClient
from kclient.network.metadata import Metadata
from kclient.protocol import ApiKey
from kclient.testing import MockClock, MockSelector, api_versions_body
from kclient.testing.client import metadata_update_with
from kclient.testing.selector import response_payload
partitions, case = int(sys.argv[1]), sys.argv[2]
topics = {"t": partitions} if case == "used" else {"t": 1, "noise": partitions}
body = metadata_update_with(1, topics)
encoded = {}
def answer(request):  # encoded once (not traced); only the correlation id is patched
    key = request.api_version
    if key not in encoded:
        encoded[key] = bytes(response_payload(request, body))
    frame = bytearray(encoded[key])
    frame[0:4] = request.header.correlation_id.to_bytes(4, "big")
    return frame
clock, selector = MockClock(), MockSelector()
selector.serve(ApiKey.API_VERSIONS, lambda request: api_versions_body())
selector.serve(ApiKey.METADATA, answer)
metadata = Metadata()
metadata.bootstrap([("broker", 9092)])
client = NetworkClient(selector, metadata, clock=clock,
                       resolver=lambda host, port: [(2, "127.0.0.1", port)])
for version in range(12, 14):  # encode before tracing
    answer(type("R", (), {"api_version": version, "header": type("H", (), {
        "correlation_id": 0, "api_key": 3, "api_version": version})()})())
del body
gc.collect()
tracemalloc.start()
metadata.add("t", clock.monotonic_ms())
for _ in range(20):
    client.poll(0, clock.monotonic_ms())
    if metadata.fetch().partition_count_for_topic("t"):
        break
client.poll(0, clock.monotonic_ms())  # the selector lets go of the response's bytes
gc.collect()
kept, peak = tracemalloc.get_traced_memory()
assert metadata.fetch().partition_count_for_topic("t") == topics["t"]
print(json.dumps({"kept": kept / partitions, "peak": peak / partitions}))
"""

ANNOUNCED_100MIB = 100 * 1024 * 1024


@dataclass
class Case:
    name: str
    brokers: Callable[[ExitStack], str]  # starts the fake brokers; returns bootstrap servers
    records: int
    run_s: float
    spread: int = 1  # partitions the records go to, round-robin
    partitions: int = 0  # of the producer's own topic, for the per-partition figures


def honest(stack: ExitStack, partitions: int, noise: int = 0) -> str:
    answers: dict[int, Any] = {}
    fake = stack.enter_context(FakeBroker(answers))
    topics = {"t": partitions}
    if noise:
        topics["noise"] = noise
    body = metadata_body([fake], topics)
    fake.prepare(ApiKey.METADATA, range(12, 14), body)
    answers[ApiKey.METADATA] = lambda header, request: body
    return fake.bootstrap_servers


def announcing(stack: ExitStack, announced: int, sent: int) -> str:
    def announce(header: RequestHeader, body: dict[str, Any]) -> bytes:
        return struct.pack(">ii", announced, header.correlation_id) + bytes(sent)

    hostile = [
        stack.enter_context(FakeBroker({ApiKey.API_VERSIONS: announce}, node_id=i))
        for i in range(1, 11)
    ]
    answers: dict[int, Any] = {}
    bootstrap = stack.enter_context(FakeBroker(answers, node_id=0))
    body = metadata_body([bootstrap, *hostile], {"t": 10}, leaders=lambda topic, p: p + 1)
    answers[ApiKey.METADATA] = lambda header, request: body
    return bootstrap.bootstrap_servers


def cases(partitions: int) -> list[Case]:
    return [
        Case("honest, 1 partition", lambda s: honest(s, 1), 1000, 3.0),
        Case(
            f"unused topics: {partitions:,} partitions not asked for",
            lambda s: honest(s, 1, noise=partitions),
            1000,
            6.0,
        ),
        Case(
            f"used topic: {partitions:,} partitions",
            lambda s: honest(s, partitions),
            1000,
            6.0,
            partitions=partitions,
        ),
        Case(
            "10 brokers x 100 MiB announced",
            lambda s: announcing(s, ANNOUNCED_100MIB, 65_536),
            10,
            6.0,
            spread=10,
        ),
        Case(
            "10 brokers x 90 MB announced, 1 MB sent",
            lambda s: announcing(s, 90_000_000, 1_000_000),
            10,
            6.0,
            spread=10,
        ),
    ]


def run_metadata_child(partitions: int, case: str, pythonpath: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", METADATA_CHILD, str(partitions), case],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath},
        cwd=pythonpath,
        timeout=600,
        check=True,
    )
    loaded: dict[str, float] = json.loads(result.stdout.splitlines()[-1])
    return loaded


def run_child(case: Case, bootstrap: str, pythonpath: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    argv = [bootstrap, "t", str(case.records), str(case.run_s), str(case.spread)]
    result = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=pythonpath,  # python -c puts the working directory first on sys.path
        timeout=case.run_s + 120,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        return {"peak_kb": 0, "end_kb": 0, "outcome": f"exit {result.returncode}"}
    loaded: dict[str, Any] = json.loads(lines[-1])
    return loaded


@contextmanager
def baseline_tree(ref: str) -> Iterator[str]:
    """The ``kclient`` package of git revision ``ref``, in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="kclient-baseline-") as directory:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "kclient"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", directory], input=archive.stdout, check=True)
        yield directory


def mb(kb: int) -> str:
    return f"{kb / 1024:,.0f}"


def short(outcome: str) -> str:
    if outcome == "ok":
        return "ok"
    for marker in ("receive.message.max.bytes", "timed out", "TimeoutError", "no broker"):
        if marker in outcome:
            return {
                "receive.message.max.bytes": "refused: over receive.message.max.bytes",
                "timed out": "timed out",
                "TimeoutError": "timed out",
                "no broker": "no broker reachable",
            }[marker]
    return outcome[:60]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REF", help="also run git revision REF")
    parser.add_argument("--partitions", type=int, default=300_000)
    args = parser.parse_args()
    with ExitStack() as outer:
        trees = {"this tree": str(ROOT)}
        if args.baseline:
            trees = {args.baseline: outer.enter_context(baseline_tree(args.baseline)), **trees}
        results: dict[str, dict[str, dict[str, Any]]] = {}
        for case in cases(args.partitions):
            with ExitStack() as stack:
                bootstrap = case.brokers(stack)
                for label, path in trees.items():
                    results.setdefault(case.name, {})[label] = run_child(case, bootstrap, path)
                    print(f"  {case.name} / {label}: {results[case.name][label]}", file=sys.stderr)
        metadata_rows: list[list[str]] = []
        for case_name, name in (("used", "the producer's own"), ("unused", "not asked for")):
            row = [f"{args.partitions:,} partitions, {name}"]
            for path in trees.values():
                got = run_metadata_child(args.partitions, case_name, path)
                row += [f"{got['peak']:,.0f}", f"{got['kept']:,.0f}"]
            metadata_rows.append(row)
    print_tables(args.partitions, list(trees), results, metadata_rows)


def print_tables(
    partitions: int,
    labels: list[str],
    results: dict[str, dict[str, dict[str, Any]]],
    metadata_rows: list[list[str]],
) -> None:
    header = "| case | " + " | ".join(
        f"{label}: peak RSS MB | {label}: RSS at end MB | {label}: outcome" for label in labels
    )
    print(header + " |")
    print("|---|" + "---:|---:|---|" * len(labels))
    for case in cases(partitions):
        row = [case.name]
        for label in labels:
            got = results[case.name][label]
            row += [mb(got["peak_kb"]), mb(got["end_kb"]), short(got["outcome"])]
        print("| " + " | ".join(row) + " |")
    base = cases(partitions)[0].name
    for case in cases(partitions):
        if not case.partitions:
            continue
        per = []
        for label in labels:
            got, idle = results[case.name][label], results[base][label]
            peak = (got["peak_kb"] - idle["peak_kb"]) * 1024 / case.partitions
            end = (got["end_kb"] - idle["end_kb"]) * 1024 / case.partitions
            per.append(f"{label}: {peak:,.0f} B peak, {end:,.0f} B kept")
        print(f"\nPer partition of the used topic (over *{base}*): " + "; ".join(per))
    print(
        "\nOne MetadataResponse through the network client alone (no accumulator), "
        "tracemalloc, bytes per partition:\n"
    )
    print("| topic | " + " | ".join(f"{label}: peak | {label}: kept" for label in labels) + " |")
    print("|---|" + "---:|---:|" * len(labels))
    for row in metadata_rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
