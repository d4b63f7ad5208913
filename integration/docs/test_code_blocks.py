"""Every Python and shell block of the README and the docs runs as written.

Each block runs in a fresh process (``python`` / ``bash -euo pipefail``) with a timeout,
from a temporary directory, with this Python's ``bin`` first on PATH (so ``kclient-broker``
and the other commands are the ones under test), ``PYSPARK_PYTHON`` set to this Python and
the Spark driver JVM given the test harness's quick-start flags (``PYSPARK_SUBMIT_ARGS``:
the JIT's first tier, as ``integration/spark/session.py``; a block that starts Spark took
21 s with the full JIT on a loaded machine).
Blocks run in document order against one ``kclient-broker`` per document (started by the
document's ``<!-- server -->`` block, or by the test); blocks marked ``<!-- fragment -->``
are only compiled. See ``integration/docs/blocks.py`` for the conventions.
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.docs.blocks import Block, all_blocks, with_address
from integration.spark.session import DRIVER_JAVA_OPTIONS

BLOCKS = all_blocks()
_READY = re.compile(r"bootstrap\.servers=(\S+)")
_DEFAULT_TIMEOUT_S = 120.0
_SPARK_TIMEOUT_S = 420.0
_BROKER_START_S = 60.0


class DocumentBroker:
    """The broker a document's blocks talk to: ``kclient-broker`` in a child process."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        argv = shlex.split(command.strip())
        if argv[:1] != ["kclient-broker"]:
            raise AssertionError(f"a <!-- server --> block must run kclient-broker: {command!r}")
        if "--listen" not in argv:
            argv += ["--listen", "127.0.0.1:0"]
        argv = [a.replace("127.0.0.1:9092", "127.0.0.1:0") for a in argv]
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.bootstrap_servers = self._wait_ready()

    def _wait_ready(self) -> str:
        assert self.proc.stdout is not None
        seen: list[str] = []
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            end = time.monotonic() + _BROKER_START_S
            while time.monotonic() < end:
                if not sel.select(timeout=max(0.0, end - time.monotonic())):
                    break
                line = self.proc.stdout.readline()
                if not line:
                    break
                seen.append(line)
                m = _READY.search(line)
                if m:
                    return m.group(1)
        self.stop()
        raise AssertionError(f"kclient-broker did not become ready: {''.join(seen)!r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_SUBMIT_ARGS"] = f'--driver-java-options "{DRIVER_JAVA_OPTIONS}" pyspark-shell'
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["KCLIENT_DOCS_TEST"] = "1"
    return env


@pytest.fixture(scope="module")
def brokers(environment: dict[str, str]) -> Iterator[dict[str, DocumentBroker]]:
    started: dict[str, DocumentBroker] = {}
    try:
        yield started
    finally:
        for broker in started.values():
            broker.stop()


def broker_for(block: Block, brokers: dict[str, DocumentBroker], env: dict[str, str]) -> str:
    broker = brokers.get(block.document)
    if broker is None:
        server = next(
            (b for b in BLOCKS if b.document == block.document and b.marker == "server"), None
        )
        broker = DocumentBroker(server.code if server else "kclient-broker", env)
        brokers[block.document] = broker
    return broker.bootstrap_servers


def _run(argv: list[str], block: Block, env: dict[str, str], cwd: Path) -> None:
    timeout = _SPARK_TIMEOUT_S if "pyspark" in block.code else _DEFAULT_TIMEOUT_S
    try:
        result = subprocess.run(
            argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{block.name} did not end within {timeout:.0f} s") from exc
    assert result.returncode == 0, (
        f"{block.name} exited {result.returncode}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_code_block(
    block: Block,
    brokers: dict[str, DocumentBroker],
    environment: dict[str, str],
    tmp_path: Path,
) -> None:
    if block.marker == "fragment":
        if block.language == "python":
            compile(block.code, block.name, "exec")
        else:
            _run(["bash", "-n", "-c", block.code], block, environment, tmp_path)
        return
    bootstrap = broker_for(block, brokers, environment)
    if block.marker == "server":
        return  # started above: the document's broker is this block
    code = with_address(block.code, bootstrap)
    if block.language == "python":
        script = tmp_path / (re.sub(r"\W", "_", block.name) + ".py")
        script.write_text(code)
        _run([sys.executable, str(script)], block, environment, tmp_path)
    else:
        _run(["bash", "-euo", "pipefail", "-c", code], block, environment, tmp_path)


def test_every_document_has_its_blocks_found() -> None:
    # the README's five-minute start: a server, Python, and shell commands
    readme = [b for b in BLOCKS if b.document == "README.md"]
    assert [b.marker for b in readme].count("server") == 1
    assert sum(b.language == "python" and b.marker is None for b in readme) >= 6
    assert any("kclient-console-consumer" in b.code for b in readme if b.marker is None)
    assert any("kclient topics create" in b.code for b in readme if b.marker is None)
