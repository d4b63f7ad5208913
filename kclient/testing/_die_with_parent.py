"""A test peer dies with the process that started it, even one killed without cleaning up.

The harnesses stop what they start by its handle; but a test run killed by a signal (a CI
time limit, Ctrl-C twice, ``kill``) runs no teardown, and its brokers would live on. On
Linux, util-linux's ``setpriv --pdeathsig KILL`` (in Debian's essential set) sets the
parent-death signal and then executes the command in its own place (same pid), so the
kernel kills the peer when the thread that started it ends. Without ``setpriv`` the
command runs as it is. No ``preexec_fn``: nothing runs in the child between fork and exec.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence


def die_with_parent(command: Sequence[str]) -> list[str]:
    """``command``, run so that it is killed when the thread starting it ends (Linux)."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is None:
        return list(command)
    return [setpriv, "--pdeathsig", "KILL", "--", *command]


def stop_process(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout_s: float = 10
) -> None:
    """Stop a peer by its handle: SIGTERM, then SIGKILL if it is still there after
    ``timeout_s``; waits (bounded) for it to be gone either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
