"""What ``send_batch`` costs in memory beyond the records themselves.

    .venv/bin/python benchmarks/send_batch_memory.py [--rows 10000000] [--size 100]

For each case (keyless rows, keyed rows) a fresh Python process builds ``--rows`` values
of ``--size`` bytes (and 14-byte keys), notes its RSS, creates a producer (defaults:
``buffer.memory`` 32 MiB, ``batch.size`` 16384) against the embedded broker
(``python -m kclient.broker``, in-memory logs, its own process), hands every row over in
one ``send_batch`` call, flushes and checks the result. It reports the process's peak RSS
(``VmHWM``) above the RSS it had with the records built: the producer's buffers (at most
``buffer.memory``) plus what ``send_batch`` keeps per row until the result is read (the
row's batch, its offset delta, its timestamp; keyed rows also their partition and their
place in the rows grouped by partition, two int64 arrays). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient.testing.broker_process import broker_process  # noqa: E402


def status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def worker(bootstrap: str, rows: int, size: int, keyed: bool) -> None:
    from kclient import KafkaProducer

    pad = b"v" * max(size - 10, 0)
    values = [b"%010d" % i + pad for i in range(rows)]
    keys = [b"key-%010d" % i for i in range(rows)] if keyed else None
    before_kb = status_kb("VmRSS")
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    start = time.perf_counter()
    result = producer.send_batch("bench", values, keys=keys)
    producer.flush()
    failed = len(result.exceptions(0))
    seconds = time.perf_counter() - start
    peak_kb = status_kb("VmHWM")
    producer.close()
    print(
        json.dumps(
            {"extra_mb": (peak_kb - before_kb) / 1024, "seconds": seconds, "failed": failed}
        ),
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--worker", choices=["keyless", "keyed"], help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.bootstrap, args.rows, args.size, args.worker == "keyed")
        return 0
    rows_out = []
    with broker_process("--num-partitions", "4") as broker:
        for case in ("keyless", "keyed"):
            command = [
                sys.executable,
                __file__,
                "--worker",
                case,
                "--bootstrap",
                broker.bootstrap_servers,
                "--rows",
                str(args.rows),
                "--size",
                str(args.size),
            ]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            rows_out.append((case, result))
    print(
        f"\n{args.rows:,} rows x {args.size} B in one send_batch call, embedded broker, "
        "producer defaults (buffer.memory 32 MiB)\n"
    )
    print("| rows | peak RSS above the records, MB | bytes per row | failed |")
    print("|---|---:|---:|---:|")
    for case, r in rows_out:
        per_row = r["extra_mb"] * 1024 * 1024 / args.rows
        print(f"| {case} | {r['extra_mb']:,.0f} | {per_row:.1f} | {r['failed']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
