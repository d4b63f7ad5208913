"""The harness itself: ``python -m kclient.testing.apache_kafka fetch`` on a machine
without Java says what to install in one line and fails (it never skips)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_fetch_without_java_says_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no java, no mvn
    done = subprocess.run(
        [sys.executable, "-m", "kclient.testing.apache_kafka", "fetch"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "'java' is not on PATH" in line and "install" in line
