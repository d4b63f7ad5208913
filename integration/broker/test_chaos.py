"""Seeded kill -9 chaos against ``kclient-broker --brokers 3 --log-dir`` (see ``chaos.py``):
nothing a producer was told is stored is lost, duplicated or replaced."""

from __future__ import annotations

import os
import random
from pathlib import Path

from integration.broker.chaos import run_chaos


def test_sigkill_and_restart_under_idempotent_producers_keeps_every_acknowledgement(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("KCLIENT_CHAOS_SEED", random.randrange(1 << 30)))
    result = run_chaos(tmp_path, seed=seed, kills=4)
    assert result.acked > 1000, result.summary()
    assert result.ok, result.summary()
