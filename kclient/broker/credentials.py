"""Where ``kclient-broker`` takes its secrets from: the SASL users (Kafka's JAAS
``user_NAME="PASSWORD"`` entries) and the TLS key password, kept off the command line.

Used once, by the main thread of ``kclient-broker`` before the broker starts.

Sources, combined: ``--sasl-users-file FILE`` and the environment variable
``KCLIENT_BROKER_SASL_USERS`` hold one ``NAME:PASSWORD`` per line (the password is
everything after the first colon; blanks around the line are dropped; empty lines and
lines starting with ``#`` are skipped). ``--sasl-user NAME:PASSWORD`` still works, but
``ps`` shows it to every user of the machine, so it earns a warning. The key password:
``--ssl-key-password-file FILE`` (its first line) or ``KCLIENT_BROKER_SSL_KEY_PASSWORD``.

Errors name the source and the line, never what the line holds.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kclient.errors import ConfigError

__all__ = [
    "SASL_USERS_ENV",
    "SSL_KEY_PASSWORD_ENV",
    "load_sasl_users",
    "load_ssl_key_password",
    "parse_user_lines",
]

SASL_USERS_ENV = "KCLIENT_BROKER_SASL_USERS"
SSL_KEY_PASSWORD_ENV = "KCLIENT_BROKER_SSL_KEY_PASSWORD"

Warn = Callable[[str], None]


def parse_user_lines(text: str, source: str, users: dict[str, str], origin: dict[str, str]) -> None:
    """Add the ``NAME:PASSWORD`` lines of ``text`` to ``users``; ``origin`` remembers
    where each name came from, to name both places when one is given twice."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition(":")
        name = name.strip()
        where = f"{source} line {number}"
        if not sep or not name or not password:
            raise ConfigError(
                f"{where}: expected NAME:PASSWORD (with a non-empty name and password); "
                "the line is not shown, as it may hold a password"
            )
        _add(users, origin, name, password, where)


def _add(
    users: dict[str, str], origin: dict[str, str], name: str, password: str, where: str
) -> None:
    if name in users:
        raise ConfigError(f"SASL user {name!r} is given twice: in {origin[name]} and in {where}")
    users[name] = password
    origin[name] = where


def load_sasl_users(
    command_line: Sequence[str],
    files: Sequence[str],
    environ: Mapping[str, str],
    warn: Warn,
) -> dict[str, str]:
    """Every SASL user from ``--sasl-user`` values, ``--sasl-users-file`` files and
    ``KCLIENT_BROKER_SASL_USERS``; a name given twice anywhere is a ``ConfigError``."""
    users: dict[str, str] = {}
    origin: dict[str, str] = {}
    for path in files:
        parse_user_lines(_read_secret_file(path, "--sasl-users-file", warn), path, users, origin)
    text = environ.get(SASL_USERS_ENV)
    if text:
        parse_user_lines(text, SASL_USERS_ENV, users, origin)
    for position, value in enumerate(command_line, start=1):
        name, sep, password = value.partition(":")
        where = f"--sasl-user number {position}"
        if not sep or not name or not password:
            raise ConfigError(
                f"--sasl-user expects NAME:PASSWORD, with a non-empty name and password (not "
                f"so {where}, which is not shown, as it may hold a password)"
            )
        _add(users, origin, name, password, where)
    if command_line:
        warn(
            "--sasl-user puts passwords on the command line, where other users of this "
            f"machine can read them (ps); use --sasl-users-file FILE or {SASL_USERS_ENV}"
        )
    return users


def load_ssl_key_password(
    command_line: str | None, file: str | None, environ: Mapping[str, str], warn: Warn
) -> str | None:
    """The TLS key password from ``--ssl-key-password``, ``--ssl-key-password-file`` (its
    first line) or ``KCLIENT_BROKER_SSL_KEY_PASSWORD``: at most one of them."""
    given = [
        name
        for name, value in (
            ("--ssl-key-password", command_line),
            ("--ssl-key-password-file", file),
            (SSL_KEY_PASSWORD_ENV, environ.get(SSL_KEY_PASSWORD_ENV)),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"the TLS key password is given by {' and '.join(given)}: give one")
    if command_line is not None:
        warn(
            "--ssl-key-password puts the password on the command line, where other users of "
            f"this machine can read it (ps); use --ssl-key-password-file FILE or "
            f"{SSL_KEY_PASSWORD_ENV}"
        )
        return command_line
    if file is not None:
        lines = _read_secret_file(file, "--ssl-key-password-file", warn).splitlines()
        if not lines or not lines[0]:
            raise ConfigError(f"--ssl-key-password-file {file}: its first line is empty")
        return lines[0]
    return environ.get(SSL_KEY_PASSWORD_ENV)


def _read_secret_file(path: str, option: str, warn: Warn) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{option} {path}: not UTF-8 text") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warn(f"{option} {path} is readable by other users of this machine: chmod 600 {path}")
    return text
