"""The embedded broker's GSSAPI exchange over a scripted GSS-API acceptor (no KDC): the
rounds and their bytes, what it refuses, the principal's short name, and the settings."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from kclient.broker import BrokerConfig
from kclient.broker.sasl_gssapi import GssapiExchange, short_name
from kclient.broker.sasl_server import SaslFailure
from kclient.errors import ConfigError
from tests.test_sasl_gssapi import REALM, FakeAcceptor

APREQ = b"AP-REQ:kafka/localhost"


def exchange(initiator: str = f"alice@{REALM}", service: str = "kafka") -> GssapiExchange:
    return GssapiExchange(FakeAcceptor(initiator), service, REALM, 524288)


def test_rounds_ap_rep_then_offer_then_done() -> None:
    ex = exchange()
    assert ex.evaluate(APREQ) == b"AP-REP"
    assert ex.username == "alice" and not ex.complete
    # the offer: no security layer, the largest message (524288 = 0x080000)
    assert ex.evaluate(b"") == b"W\x01\x08\x00\x00"
    assert ex.evaluate(b"W\x01\x00\x00\x00") == b""
    assert ex.complete


def test_an_authorization_id_must_be_the_principal() -> None:
    ex = exchange()
    ex.evaluate(APREQ)
    ex.evaluate(b"")
    assert ex.evaluate(b"W\x01\x00\x00\x00alice@" + REALM.encode()) == b""
    ex = exchange()
    ex.evaluate(APREQ)
    ex.evaluate(b"")
    with pytest.raises(SaslFailure, match="authorization id 'root' differs") as info:
        ex.evaluate(b"W\x01\x00\x00\x00root")
    assert "invalid credentials with SASL mechanism GSSAPI" in info.value.client_message


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"W\x04\x00\x10\x00", "chose security layer 0x04"),
        (b"W\x01\x00", "answer of 2 bytes"),
        (b"\x01\x00\x00\x00", "bad wrap token"),
    ],
)
def test_bad_security_layer_answers_fail(answer: bytes, reason: str) -> None:
    ex = exchange()
    ex.evaluate(APREQ)
    ex.evaluate(b"")
    with pytest.raises(SaslFailure, match=reason):
        ex.evaluate(answer)
    with pytest.raises(SaslFailure, match="after the GSSAPI exchange ended"):
        ex.evaluate(b"W\x01\x00\x00\x00")


def test_garbage_and_empty_first_tokens_fail_without_raising_anything_else() -> None:
    with pytest.raises(SaslFailure, match="defective token"):
        exchange().evaluate(b"\x60\x82garbage")
    with pytest.raises(SaslFailure, match="empty GSSAPI token"):
        exchange().evaluate(b"")


def test_a_ticket_for_another_service_fails() -> None:
    ex = exchange(service="kafka")
    with pytest.raises(SaslFailure, match=r"asked for service other/localhost@KCLIENT\.TEST"):
        ex.evaluate(b"AP-REQ:other/localhost")


def test_short_names_as_kafkas_default_rule() -> None:
    assert short_name(f"alice@{REALM}", REALM) == "alice"
    assert short_name(f"svc/host.example@{REALM}", REALM) == "svc"
    assert short_name("alice@OTHER.REALM", REALM) == "alice@OTHER.REALM"
    ex = exchange(initiator=f"etl/worker-1@{REALM}")
    ex.evaluate(APREQ)
    assert ex.username == "etl"


def test_gssapi_needs_a_keytab_and_a_keytab_needs_gssapi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))  # without the extra
    with pytest.raises(ConfigError, match=r"GSSAPI needs 'sasl\.kerberos\.keytab'"):
        BrokerConfig(security_protocol="SASL_PLAINTEXT", sasl_enabled_mechanisms="GSSAPI")
    with pytest.raises(ConfigError, match=r"'sasl\.kerberos\.keytab' is set but"):
        BrokerConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_users={"a": "b"},
            sasl_kerberos_keytab=str(tmp_path / "k"),
        )
    # GSSAPI alone needs no users
    config = BrokerConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms="GSSAPI",
        sasl_kerberos_keytab=str(tmp_path / "k"),
    )
    assert config.sasl_enabled_mechanisms == ("GSSAPI",)
    with pytest.raises(ConfigError, match=r"'sasl\.kerberos\.keytab' '.*k' is not a readable"):
        config.sasl_server()


def test_without_the_extra_gssapi_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    config = BrokerConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms="GSSAPI",
        sasl_kerberos_keytab=str(tmp_path / "k"),
    )
    with pytest.raises(ConfigError, match=r"pip install 'kclient-kafka\[gssapi\]'"):
        config.sasl_server()
