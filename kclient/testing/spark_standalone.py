"""A Spark standalone cluster on this machine for tests: a master and N workers started from
the installed pyspark's own classes, all on 127.0.0.1.

Corresponds to Spark's ``sbin/start-master.sh`` and ``start-worker.sh`` (which pyspark's
wheel does not ship): ``bin/spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``, each a JVM in a process group of its own, with its log and
work directory in a temporary folder deleted on ``close``. The executors a worker launches
are its child processes (``executor_pids``), so a test can kill one mid-job::

    with SparkStandalone(workers=2) as cluster:
        subprocess.run([cluster.spark_submit, "--master", cluster.master_url, "job.py"])
        os.kill(cluster.executor_pids(1)[0], signal.SIGKILL)

Everything is stopped by its process group (SIGTERM, SIGKILL after a bound). Needs Java 17+.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from kclient.testing.apache_kafka_node import LOOPBACK, free_ports
from kclient.testing.maven import require_java

__all__ = ["SparkStandalone", "SparkStandaloneError", "pyspark_bin"]

_DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_EXECUTOR_BACKEND = "CoarseGrainedExecutorBackend"


class SparkStandaloneError(RuntimeError):
    """The cluster did not start in time (the message has the end of its logs)."""


def pyspark_bin() -> Path:
    """The ``bin`` folder of the installed pyspark (``spark-class``, ``spark-submit``)."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin"


class SparkStandalone:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "1g",
        start_timeout_s: float = 90.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.folder: Path | None = None
        self.master_port = 0
        self.webui_port = 0
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: dict[int, subprocess.Popen[bytes]] = {}
        self._executors_seen: set[int] = set()

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    @property
    def spark_submit(self) -> str:
        return str(pyspark_bin() / "spark-submit")

    def env(self) -> dict[str, str]:
        """The environment of the daemons (and of a ``spark-submit`` of a test)."""
        require_java()  # one line saying what to install, if missing
        env = dict(os.environ)
        env.update(
            SPARK_LOCAL_IP=LOOPBACK,
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS=_DAEMON_JAVA_OPTIONS,
        )
        env.pop("SPARK_HOME", None)  # pyspark's own, found by its bin scripts
        return env

    def start(self) -> SparkStandalone:
        self.folder = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        try:
            self.master_port, self.webui_port, *worker_ui = free_ports(2 + self.workers)
            self._master = self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", LOOPBACK, "--port", str(self.master_port)],
                ["--webui-port", str(self.webui_port)],
            )
            for n in range(1, self.workers + 1):
                work = self.folder / f"worker-{n}"
                work.mkdir()
                self._workers[n] = self._spawn(
                    f"worker-{n}",
                    "org.apache.spark.deploy.worker.Worker",
                    ["--host", LOOPBACK, "--cores", str(self.cores), "--memory", self.memory],
                    ["--webui-port", str(worker_ui[n - 1]), "--work-dir", str(work)],
                    [self.master_url],
                )
            self._wait_workers()
        except BaseException:
            self.close()
            raise
        return self

    def _spawn(self, name: str, main_class: str, *args: list[str]) -> subprocess.Popen[bytes]:
        assert self.folder is not None
        command = [
            str(pyspark_bin() / "spark-class"),
            main_class,
            *(a for part in args for a in part),
        ]
        with (self.folder / f"{name}.log").open("wb") as log:
            return subprocess.Popen(
                command,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its executors too: stopped by the group
            )

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        url = f"http://{LOOPBACK}:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as answer:
            state: dict[str, Any] = json.load(answer)
        return state

    def _wait_workers(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return
            for proc in (self._master, *self._workers.values()):
                if proc is not None and proc.poll() is not None:
                    raise SparkStandaloneError(f"a daemon exited:\n{self.log_tail()}")
            time.sleep(0.2)
        raise SparkStandaloneError(
            f"{self.workers} workers not registered in {self.start_timeout_s} s:\n{self.log_tail()}"
        )

    def executor_pids(self, worker: int) -> list[int]:
        """The executor JVMs worker ``worker`` (1..N) runs now: its children."""
        parent = self._workers[worker].pid
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and _EXECUTOR_BACKEND.encode() in cmdline:
                found.append(int(entry.name))
        self._executors_seen.update(found)
        return sorted(found)

    def log_tail(self, lines: int = 30) -> str:
        if self.folder is None:
            return ""
        out = []
        for log in sorted(self.folder.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name} ---\n" + "\n".join(text))
        return "\n".join(out)

    def close(self) -> None:
        """Stop the workers (and their executors), then the master; delete the folder."""
        for worker in list(self._workers):
            with contextlib.suppress(OSError):
                self.executor_pids(worker)
        procs = [*self._workers.values(), *([self._master] if self._master else [])]
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(self.stop_timeout_s)
            _signal_group(proc, signal.SIGKILL)  # executors left in its group
        for pid in self._executors_seen:  # in case one left the group (and is still one)
            with contextlib.suppress(OSError):
                if _EXECUTOR_BACKEND.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
        self._workers.clear()
        self._master = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
