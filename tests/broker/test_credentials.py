"""kclient-broker's secrets off the command line: ``--sasl-users-file``,
``KCLIENT_BROKER_SASL_USERS``, ``--ssl-key-password-file`` and
``KCLIENT_BROKER_SSL_KEY_PASSWORD``; a warning for the flags that put them where ``ps``
shows them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kclient.broker.__main__ import main
from kclient.broker.credentials import (
    SASL_USERS_ENV,
    SSL_KEY_PASSWORD_ENV,
    load_sasl_users,
    load_ssl_key_password,
)
from kclient.errors import ConfigError

SECRET = "Zq8secretVALUE3141"


def private_file(directory: Path, text: str, name: str = "users") -> str:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    os.chmod(path, 0o600)
    return str(path)


def test_users_come_from_files_and_the_environment_without_a_warning(tmp_path: Path) -> None:
    users_file = private_file(
        tmp_path,
        "# the team\n\n  alice:pw:with:colons  \nbob: spaced out \n",
    )
    warnings: list[str] = []
    users = load_sasl_users(
        [], [users_file], {SASL_USERS_ENV: "carol:c1\n# more\ndave:d1"}, warnings.append
    )
    assert users == {
        "alice": "pw:with:colons",
        "bob": " spaced out",
        "carol": "c1",
        "dave": "d1",
    }
    assert warnings == []


def test_a_user_on_the_command_line_works_but_warns_once() -> None:
    warnings: list[str] = []
    users = load_sasl_users(["a:1", "b:2"], [], {}, warnings.append)
    assert users == {"a": "1", "b": "2"}
    assert len(warnings) == 1
    assert "--sasl-user puts passwords on the command line" in warnings[0]
    assert "--sasl-users-file" in warnings[0] and SASL_USERS_ENV in warnings[0]


@pytest.mark.parametrize("line", [SECRET, f":{SECRET}", "alice:", f"  {SECRET} "])
def test_a_malformed_line_names_the_file_and_line_but_not_its_text(
    tmp_path: Path, line: str
) -> None:
    users_file = private_file(tmp_path, f"alice:a\n# note\n{line}\n")
    with pytest.raises(ConfigError) as failed:
        load_sasl_users([], [users_file], {}, lambda message: None)
    assert f"{users_file} line 3: expected NAME:PASSWORD" in str(failed.value)
    assert SECRET not in str(failed.value)


def test_a_malformed_environment_line_names_the_variable_and_line() -> None:
    with pytest.raises(ConfigError) as failed:
        load_sasl_users([], [], {SASL_USERS_ENV: f"alice:a\n{SECRET}"}, lambda m: None)
    assert f"{SASL_USERS_ENV} line 2: expected NAME:PASSWORD" in str(failed.value)
    assert SECRET not in str(failed.value)


def test_a_user_given_twice_names_both_places(tmp_path: Path) -> None:
    users_file = private_file(tmp_path, f"alice:{SECRET}\n")
    with pytest.raises(ConfigError) as failed:
        load_sasl_users([f"alice:{SECRET}"], [users_file], {}, lambda m: None)
    assert str(failed.value) == (
        f"SASL user 'alice' is given twice: in {users_file} line 1 and in --sasl-user number 1"
    )


def test_a_file_others_can_read_earns_a_warning_and_a_missing_one_an_error(
    tmp_path: Path,
) -> None:
    users_file = private_file(tmp_path, "alice:a\n")
    os.chmod(users_file, 0o644)
    warnings: list[str] = []
    load_sasl_users([], [users_file], {}, warnings.append)
    assert warnings == [
        f"--sasl-users-file {users_file} is readable by other users of this machine: "
        f"chmod 600 {users_file}"
    ]
    with pytest.raises(ConfigError, match="--sasl-users-file /nonexistent: cannot read it"):
        load_sasl_users([], ["/nonexistent"], {}, warnings.append)


def test_the_key_password_comes_from_one_place(tmp_path: Path) -> None:
    warnings: list[str] = []
    password_file = private_file(tmp_path, f"{SECRET}\nignored\n", "key-password")
    assert load_ssl_key_password(None, password_file, {}, warnings.append) == SECRET
    assert load_ssl_key_password(None, None, {SSL_KEY_PASSWORD_ENV: "e"}, warnings.append) == "e"
    assert load_ssl_key_password(None, None, {}, warnings.append) is None
    assert warnings == []
    assert load_ssl_key_password("c", None, {}, warnings.append) == "c"
    assert len(warnings) == 1 and "--ssl-key-password-file" in warnings[0]
    with pytest.raises(ConfigError) as failed:
        load_ssl_key_password(SECRET, password_file, {SSL_KEY_PASSWORD_ENV: SECRET}, print)
    assert str(failed.value) == (
        "the TLS key password is given by --ssl-key-password and --ssl-key-password-file and "
        f"{SSL_KEY_PASSWORD_ENV}: give one"
    )


def test_the_cli_exits_2_naming_the_line_and_warns_about_sasl_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sasl = ["--security-protocol", "SASL_PLAINTEXT"]
    users_file = private_file(tmp_path, f"alice:a\n{SECRET}\n")
    assert main([*sasl, "--sasl-users-file", users_file]) == 2
    err = capsys.readouterr().err
    assert f"{users_file} line 2: expected NAME:PASSWORD" in err and SECRET not in err
    monkeypatch.setenv(SASL_USERS_ENV, f"bob{SECRET}")
    assert main(sasl) == 2
    err = capsys.readouterr().err
    assert f"{SASL_USERS_ENV} line 1" in err and SECRET not in err
    monkeypatch.delenv(SASL_USERS_ENV)
    # the warning comes before the (here: failing) start
    assert main(["--sasl-user", f"alice:{SECRET}"]) == 2
    err = capsys.readouterr().err
    assert "kclient-broker: WARNING: --sasl-user puts passwords on the command line" in err
    assert SECRET not in err
