"""kill -9 soak of ``kclient-broker --brokers 3 --log-dir``: nothing acknowledged is lost.

    .venv/bin/python benchmarks/kill9_soak.py [--rounds 5] [--kills 10] [--seed N]

Each round starts a fresh log dir and runs ``integration.broker.chaos.run_chaos``: a
kclient and a confluent-kafka idempotent producer write to a 3-partition topic as fast as
they can while the broker process is SIGKILLed ``--kills`` times at seeded random moments
(0.3-1.5 s apart, restarted after 0-0.5 s), and after every restart a new kclient
producer writes 20 records (it must get a producer id no one had). Then every record is
read back with confluent-kafka and every acknowledgement checked: the value its
producer was told is at that partition and offset, and no value is stored twice.

Prints one Markdown row per round and a total; "restart" is from process start to
"ready" (Python start-up, log recovery, listening), p50 and max.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from integration.broker.chaos import ChaosResult, run_chaos  # noqa: E402


def row(label: str, r: list[ChaosResult]) -> str:
    restarts = [s for x in r for s in x.restart_s]
    return (
        f"| {label} | {sum(x.kills for x in r)} | {sum(x.acked for x in r):,} | "
        f"{sum(len(x.lost) for x in r)} | {sum(len(x.duplicated) for x in r)} | "
        f"{sum(len(x.replaced) for x in r)} | {sum(len(x.failed) for x in r)} | "
        f"{statistics.median(restarts):.2f} s / {max(restarts):.2f} s |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kills", type=int, default=10, help="kills per round")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first round")
    args = parser.parse_args()
    first = args.seed if args.seed is not None else random.randrange(1 << 30)
    print("| round (seed) | kills | acknowledged records | lost | duplicated | replaced "
          "| producer errors | restart p50 / max |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="kill9-") as tmp:
            result = run_chaos(Path(tmp), seed=first + i, kills=args.kills)
        results.append(result)
        print(row(f"{i + 1} ({result.seed})", [result]), flush=True)
        if not result.ok:
            print(result.summary(), file=sys.stderr)
    print(row("**all**", results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
