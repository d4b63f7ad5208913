"""No secret ever shows: a recognisable password is fed through every path that takes one
(producer settings, properties files and ``k=v`` arguments of the CLI tools, Java's
``sasl.jaas.config``, the Spark sink's check on the driver, the broker's settings), and
must not appear in the error, its ``repr``, its ``__cause__``/``__context__`` chain, its
pickle, or any log line (captured at DEBUG)."""

from __future__ import annotations

import copy
import io
import logging
import pickle
from collections.abc import Callable
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from kclient import KafkaProducer
from kclient.broker.__main__ import main as broker_main
from kclient.broker.config import BrokerConfig
from kclient.cli import producer_perf
from kclient.cli.console_producer import main as console_producer_main
from kclient.cli.properties import load_properties, parse_pairs
from kclient.config import ProducerConfig
from kclient.network.kafka_client import ClientRequest
from kclient.protocol import ApiKey
from kclient.sasl import SaslCredentials
from kclient.testing import MockClient, MockClock

SECRET = "Zq8secretVALUE3141"
NUMERIC_SECRET = 31415926
BOOT = {"bootstrap.servers": "127.0.0.1:9092"}
SASL = {**BOOT, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
TLS = {**BOOT, "security.protocol": "SSL"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"


def texts_of(exc: BaseException) -> list[str]:
    """Everything an exception can show: str, repr, its cause/context chain, its pickle."""
    out: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        out += [str(current), repr(current), repr(current.args)]
        try:
            out.append(repr(pickle.dumps(current)))
        except Exception as failure:  # an unpicklable error still must not say it
            out.append(repr(failure))
        current = current.__cause__ or current.__context__
    return out


def assert_hidden(texts: list[str], *secrets: str) -> None:
    for text in texts:
        for secret in secrets or (SECRET, str(NUMERIC_SECRET)):
            assert secret not in text, text


def raises_without_secret(action: Callable[[], object], caplog: pytest.LogCaptureFixture) -> str:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as info:
        action()
    assert_hidden(texts_of(info.value) + [r.getMessage() for r in caplog.records])
    return str(info.value)


# ---- producer settings -------------------------------------------------------------------

BAD_SETTINGS = {
    "sasl.password as an int": {**SASL, "sasl.username": "u", "sasl.password": NUMERIC_SECRET},
    "sasl.password as bytes": {**SASL, "sasl.username": "u", "sasl.password": SECRET.encode()},
    "sasl_password in a list": {**SASL, "sasl_username": "u", "sasl_password": [SECRET]},
    "ssl.key.password as bytes": {**TLS, "ssl.key.password": SECRET.encode()},
    "ssl.key.password without a keystore": {**TLS, "ssl.key.password": SECRET},
    "ssl.keystore.key as bytes": {**TLS, "ssl.keystore.key": SECRET.encode()},
    "ssl.keystore.key that is no PEM": {
        **TLS,
        "ssl.keystore.key": f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n-----END PRIVATE KEY-----",
        "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\nx\n",
    },
    "ssl.keystore.password (JKS)": {**TLS, "ssl.keystore.password": SECRET},
    "ssl.truststore.password (JKS)": {**TLS, "ssl_truststore_password": SECRET},
    "sasl.jaas.config as bytes": {**SASL, "sasl.jaas.config": SECRET.encode()},
    "sasl.jaas.config that is only a password": {**SASL, "sasl.jaas.config": SECRET},
    "sasl.jaas.config whose module is a password": {
        **SASL,
        "sasl.jaas.config": f"{SECRET} required;",
    },
    "sasl.jaas.config without a username": {
        **SASL,
        "sasl.jaas.config": f'{JAAS} required password="{SECRET}";',
    },
    "sasl.jaas.config with sasl.password": {
        **SASL,
        "sasl.jaas.config": f'{JAAS} required username="u" password="{SECRET}";',
        "sasl.password": SECRET,
    },
    "sasl.password on a PLAINTEXT listener": {**BOOT, "sasl.password": SECRET},
    "a misspelt sasl.pasword": {**SASL, "sasl.username": "u", "sasl.pasword": SECRET},
}


@pytest.mark.parametrize("settings", BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_a_wrong_setting_is_reported_without_the_secret(
    settings: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    message = raises_without_secret(lambda: ProducerConfig(settings), caplog)
    assert "'" in message  # it still names the setting


def test_the_type_error_still_names_the_setting_and_the_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    message = raises_without_secret(
        lambda: ProducerConfig(SASL, sasl_username="u", sasl_password=NUMERIC_SECRET), caplog
    )
    assert "'sasl.password' must be a string" in message
    assert "int" in message


def test_the_spark_sink_checks_the_settings_on_the_driver_without_showing_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kclient.spark import KafkaSink

    raises_without_secret(
        lambda: KafkaSink(
            "t",
            bootstrap_servers="127.0.0.1:9092",
            security_protocol="SASL_SSL",
            sasl_mechanism="PLAIN",
            sasl_username="u",
            sasl_password=NUMERIC_SECRET,
        ),
        caplog,
    )


def test_configs_producers_credentials_and_requests_never_show_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    jaas = f'{JAAS} required username="alice" password="{SECRET}";'
    config = ProducerConfig(SASL, **{"sasl.jaas.config": jaas})
    assert config.sasl == SaslCredentials("PLAIN", "alice", SECRET)
    exchange = config.sasl.new_exchange()
    token_request = ClientRequest(
        0, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": exchange.initial_response()}, 0
    )
    producer = KafkaProducer(
        {**SASL, "sasl.jaas.config": jaas}, kafka_client=MockClient(MockClock())
    )
    try:
        shown = [repr(config), str(config), repr(config.sasl), str(config.sasl)]
        shown += [repr(exchange), str(exchange), repr(token_request), repr(producer)]
    finally:
        producer.close()
    assert_hidden(shown + [r.getMessage() for r in caplog.records])
    assert "[hidden]" in repr(config)


@pytest.mark.parametrize("what", ["config", "credentials", "exchange"])
def test_objects_holding_a_password_are_not_pickled(what: str) -> None:
    config = ProducerConfig(SASL, sasl_username="u", sasl_password=SECRET)
    assert config.sasl is not None
    holder = {
        "config": config,
        "credentials": config.sasl,
        "exchange": config.sasl.new_exchange(),
    }[what]
    with pytest.raises(TypeError) as info:
        pickle.dumps(holder)
    assert "not pickled" in str(info.value)
    assert_hidden(texts_of(info.value))
    if what != "exchange":
        assert copy.deepcopy(holder) is holder  # immutable: copying is still fine


# ---- properties files and k=v arguments (console producer, perf tool) --------------------


def test_a_properties_file_reads_java_separators_escapes_and_continued_lines(
    tmp_path: Path,
) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\n"
        "  ! another\n"
        f"sasl.password {SECRET}\n"
        "sasl.mechanism:PLAIN\n"
        f"sasl.jaas.config = {JAAS} required \\\n"
        '    username="alice" \\\n'
        f'    password="{SECRET}";\n'
        "client.id=a\\u0062c\\=d\n"
        "empty.value\n",
        encoding="utf-8",
    )
    assert load_properties(str(path)) == {
        "sasl.password": SECRET,
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{JAAS} required username="alice" password="{SECRET}";',
        "client.id": "abc=d",
        "empty.value": "",
    }


def test_a_malformed_properties_line_is_reported_by_file_and_line_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"client.id=a\nsasl.password={SECRET}\\u12\n", encoding="utf-8")
    message = raises_without_secret(lambda: load_properties(str(path)), caplog)
    assert f"{path}:2" in message


@pytest.mark.parametrize("argument", [SECRET, f"sasl.password {SECRET}", f"={SECRET}"])
def test_a_malformed_k_v_argument_is_reported_by_option_and_position_only(
    argument: str, caplog: pytest.LogCaptureFixture
) -> None:
    message = raises_without_secret(
        lambda: parse_pairs(["acks=all", argument], "--producer-property"), caplog
    )
    assert "--producer-property expects key=value (its argument number 2)" in message


def _console_producer(*args: str) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        code = console_producer_main(["--bootstrap-server", "127.0.0.1:9", "--topic", "t", *args])
    assert code == 2
    return err.getvalue()


def _perf_tool(*args: str) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        code = producer_perf.main(
            [
                "--topic",
                "t",
                "--num-records",
                "1",
                "--record-size",
                "1",
                "--throughput",
                "-1",
                *args,
            ]
        )
    assert code == 2
    return err.getvalue()


CLI_CASES = {
    "console producer, --producer-property without =": lambda tmp: _console_producer(
        "--producer-property", f"sasl.password {SECRET}"
    ),
    "console producer, a password of the wrong type": lambda tmp: _console_producer(
        "--producer-property",
        "security.protocol=SSL",
        "--producer-property",
        f"ssl.keystore.password={SECRET}",
    ),
    "console producer, --producer.config with a bad escape": lambda tmp: _console_producer(
        "--producer.config", _properties(tmp, f"sasl.password={SECRET}\\uZZZZ\n")
    ),
    "console producer, --producer.config with a bad jaas line": lambda tmp: _console_producer(
        "--producer.config",
        _properties(
            tmp,
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={JAAS} required password="{SECRET}";\n',
        ),
    ),
    "perf tool, --producer-props without =": lambda tmp: _perf_tool(
        "--producer-props", "bootstrap.servers=127.0.0.1:9", SECRET
    ),
    "perf tool, --producer.config with a bad escape": lambda tmp: _perf_tool(
        "--producer.config", _properties(tmp, f"sasl.password={SECRET}\\u1\n")
    ),
}


def _broker(*args: str) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        code = broker_main(["--security-protocol", "SASL_PLAINTEXT", *args])
    assert code == 2
    return err.getvalue()


CLI_CASES.update(
    {
        "broker, --sasl-user without a colon": lambda tmp: _broker("--sasl-user", SECRET),
        "broker, --sasl-user with no name": lambda tmp: _broker("--sasl-user", f":{SECRET}"),
        "broker, a malformed --sasl-users-file line": lambda tmp: _broker(
            "--sasl-users-file", _properties(tmp, f"alice:a\n{SECRET}\n")
        ),
        "broker, --ssl-key-password without TLS": lambda tmp: _broker(
            "--sasl-user", "alice:a", "--ssl-key-password", SECRET
        ),
    }
)


def _properties(directory: Path, text: str) -> str:
    path = directory / "producer.properties"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("case", CLI_CASES.values(), ids=CLI_CASES.keys())
def test_the_cli_tools_report_bad_settings_without_the_secret(
    case: Callable[[Path], str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    output = case(tmp_path)
    assert output.strip()  # it said something (and exited 2)
    assert_hidden([output] + [r.getMessage() for r in caplog.records])


# ---- the broker's settings ---------------------------------------------------------------

BROKER_CASES = {
    "a password that is no string": {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_users": {"alice": NUMERIC_SECRET},
    },
    "a password with NUL": {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_users": {"alice": f"{SECRET}\0"},
    },
    "users on a PLAINTEXT listener": {"sasl_users": {"alice": SECRET}},
    "ssl.key.password on a PLAINTEXT listener": {"ssl_key_password": SECRET},
    "ssl.key.password that is no string": {
        "security_protocol": "SSL",
        "ssl_keystore_location": "/nonexistent.pem",
        "ssl_key_password": NUMERIC_SECRET,
    },
}


@pytest.mark.parametrize("settings", BROKER_CASES.values(), ids=BROKER_CASES.keys())
def test_broker_settings_are_reported_without_the_secret(
    settings: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    raises_without_secret(lambda: BrokerConfig(**settings).ssl_context(), caplog)  # type: ignore[arg-type]


def test_the_broker_config_and_its_sasl_server_never_show_passwords() -> None:
    config = BrokerConfig(security_protocol="SASL_PLAINTEXT", sasl_users={"alice": SECRET})
    server = config.sasl_server()
    assert_hidden([repr(config), str(config), repr(server), str(server)])
    assert "alice" in repr(server)
