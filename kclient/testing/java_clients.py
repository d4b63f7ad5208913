"""The Java clients (Apache Kafka's ``kafka-clients``) as a test peer: producer, consumer, Admin.

Not part of the producer: integration tests judge the embedded broker by the strictest
Kafka clients there are. ``KafkaJavaPeer.java`` (beside this module, in ``java/``, with
``PeerAdmin.java`` and ``Json.java``) runs a
list of steps against one bootstrap address in one JVM and prints one JSON line per step;
:func:`run_steps` compiles it once (``javac`` against the jars :mod:`kclient.testing.maven`
fetches, into that cache), runs it as a subprocess with a timeout and returns the parsed
lines. A step is ``"name key=value ..."``, e.g.::

    run_steps(bootstrap, ["produce topic=t count=100 idempotent=true",
                          "consume topic=t group=g expect=100 isolation=read_committed"])

Steps: ``produce``, ``txn`` (``plan=commit:5,abort:5``), ``consume``, and the Admin
calls ``create_topics``, ``list_topics``, ``describe_topics``, ``describe_configs``,
``alter_config``, ``list_groups``, ``describe_groups``, ``list_offsets``,
``describe_producers``, ``list_transactions``, ``describe_transactions``,
``describe_cluster``, ``delete_topics``. A failed step has an ``"error"`` key
(``"ExceptionClass: message"``); the run goes on.

``python -m kclient.testing.java_clients fetch`` fetches the jars and compiles the peer
(what a CI machine runs once, before the tests). A machine without Java or Maven gets
:class:`~kclient.testing.maven.JavaToolMissing` naming what to install.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kclient.testing._die_with_parent import die_with_parent
from kclient.testing.maven import classpath, compile_java, require_java

__all__ = ["ARTIFACTS", "JavaPeerError", "compile_peer", "run_steps"]

#: The Java clients and a logger binding (their warnings go to stderr).
ARTIFACTS = ("org.apache.kafka:kafka-clients:4.4.0", "org.slf4j:slf4j-simple:1.7.36")
_SOURCES = Path(__file__).with_name("java")
_MAIN = "KafkaJavaPeer"


class JavaPeerError(RuntimeError):
    """The Java peer could not be compiled, timed out, or printed something unreadable."""


def compile_peer() -> str:
    """The class path (jars and compiled peer) to run ``KafkaJavaPeer`` with; compiles it
    on first use, into the jars' cache folder, keyed by the source's hash."""
    require_java()
    libs = classpath(list(ARTIFACTS))
    sources = sorted(_SOURCES.glob("*.java"))
    classes = compile_java({f.name: f.read_text() for f in sources}, libs)
    jars = f"{libs}/*"
    return f"{classes}:{jars}"


def run_steps(
    bootstrap_servers: str,
    steps: Sequence[str],
    *,
    timeout_s: float = 60.0,
    log_level: str = "warn",
) -> list[dict[str, Any]]:
    """Run ``steps`` in one JVM against ``bootstrap_servers``; one dict per step, in order.

    Raises JavaPeerError when the JVM does not finish within ``timeout_s`` (it is killed)
    or prints fewer answers than steps (with its stderr).
    """
    cp = compile_peer()
    java = require_java()
    command = [
        java,
        "-Xshare:auto",
        "-XX:TieredStopAtLevel=1",
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
        "-cp",
        cp,
        _MAIN,
        bootstrap_servers,
        *steps,
    ]
    proc = subprocess.Popen(
        die_with_parent(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise JavaPeerError(
            f"the Java peer did not finish {len(steps)} steps within {timeout_s:.0f} s; "
            f"output {out[-2000:]!r}; stderr {err[-3000:]!r}"
        ) from None
    results = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                results.append(json.loads(line))
            except ValueError as exc:
                raise JavaPeerError(f"unreadable line from the Java peer: {line!r}") from exc
    if len(results) != len(steps):
        raise JavaPeerError(
            f"the Java peer answered {len(results)} of {len(steps)} steps "
            f"(exit code {proc.returncode}); stderr {err[-3000:]!r}"
        )
    return results


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["fetch"]:
        print("usage: python -m kclient.testing.java_clients fetch", file=sys.stderr)
        return 2
    print(compile_peer())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
