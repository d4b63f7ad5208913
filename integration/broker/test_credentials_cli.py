"""kclient-broker takes its SASL users from a file and from the environment (kept off the
command line, where ``ps`` shows them); ``--sasl-user`` still works, with a warning.
A real broker process on 127.0.0.1 and kclient producers authenticating against it."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.peers import stop_process
from kclient import KafkaProducer
from kclient.broker.credentials import SASL_USERS_ENV
from kclient.errors import SaslAuthenticationError

SECRET = "Zq8secretVALUE3141"


@contextlib.contextmanager
def broker(
    args: list[str], env: dict[str, str], stderr_path: Path
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``kclient-broker ARGS`` with extra environment variables; stderr to a file."""
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kclient.broker", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, **env},
        )
        try:
            assert proc.stdout is not None
            ready = select.select([proc.stdout], [], [], 30)[0]
            line = proc.stdout.readline() if ready else ""
            assert "bootstrap.servers=" in line, stderr_path.read_text()
            yield line.strip().split("bootstrap.servers=", 1)[1], proc
        finally:
            stop_process(proc)  # type: ignore[arg-type]
            if proc.stdout is not None:
                proc.stdout.close()


def acked(bootstrap: str, user: str, password: str) -> int:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username=user,
        sasl_password=password,
        max_block_ms=10_000,
    )
    try:
        return producer.send("creds", b"v").get(timeout=20).offset
    finally:
        producer.close()


def test_users_from_a_file_and_the_environment_authenticate_without_a_warning(
    tmp_path: Path,
) -> None:
    users = tmp_path / "users"
    users.write_text("# the team\nalice:pw:with:colons\n", encoding="utf-8")
    users.chmod(0o600)
    stderr = tmp_path / "stderr"
    args = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-users-file", str(users)]
    with broker(args, {SASL_USERS_ENV: f"bob:{SECRET}"}, stderr) as (bootstrap, _proc):
        assert acked(bootstrap, "alice", "pw:with:colons") == 0
        assert acked(bootstrap, "bob", SECRET) == 1
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_username="bob",
            sasl_password="wrong",
            max_block_ms=3_000,
        )
        try:
            with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
                producer.send("creds", b"v").get(timeout=20)
        finally:
            producer.close()
    log = stderr.read_text()
    assert "WARNING: --sasl" not in log
    assert SECRET not in log


def test_a_user_on_the_command_line_still_works_with_a_one_line_warning(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr"
    args = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-user", f"alice:{SECRET}"]
    with broker(args, {}, stderr) as (bootstrap, _proc):
        assert acked(bootstrap, "alice", SECRET) == 0
    warnings = [line for line in stderr.read_text().splitlines() if "WARNING" in line]
    assert len(warnings) == 1
    assert "other users of this machine can read them (ps)" in warnings[0]
    assert SECRET not in stderr.read_text()


def test_a_malformed_users_file_stops_the_broker_naming_the_line(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text(f"alice:a\n\n{SECRET}\n", encoding="utf-8")
    users.chmod(0o600)
    args = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-users-file", str(users)]
    result = subprocess.run(
        [sys.executable, "-m", "kclient.broker", "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert f"{users} line 3: expected NAME:PASSWORD" in result.stderr
    assert SECRET not in result.stderr + result.stdout
