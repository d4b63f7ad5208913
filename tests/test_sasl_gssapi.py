"""SASL GSSAPI, client side, without a KDC: the RFC 4752 security-layer bytes, the rounds
of ``GssapiMechanism`` over a scripted GSS-API context, the exchange carried by the
NetworkClient (MockSelector) against the embedded broker's ``GssapiExchange`` over a
scripted acceptor, and the settings."""

from __future__ import annotations

import random
import sys
import threading
import types

import pytest

from kclient.broker.sasl_gssapi import GssapiExchange
from kclient.config import ProducerConfig
from kclient.errors import ConfigError, SaslAuthenticationError
from kclient.network.client import NetworkClient
from kclient.network.config import NetworkClientConfig
from kclient.network.connection_states import ConnectionState
from kclient.network.metadata import Metadata
from kclient.protocol import ApiKey
from kclient.sasl_gssapi import (
    GssapiCredentials,
    GssapiMechanism,
    KdcBound,
    explain,
    security_layer_answer,
    security_layer_offer,
)
from kclient.testing import MockClock, MockSelector, SentRequest, api_versions_body

REALM = "KCLIENT.TEST"


class FakeInitiator:
    """A GSS-API initiator: AP-REQ names the target; wrap prefixes b'W'."""

    def __init__(self, host: str, service: str = "kafka", fail: str | None = None) -> None:
        self.target = f"{service}/{host}"
        self.fail = fail
        self.complete = False

    def step(self, token: bytes | None) -> bytes | None:
        if self.fail is not None:
            raise SaslAuthenticationError(self.fail)
        if token is None:
            return b"AP-REQ:" + self.target.encode()
        assert token == b"AP-REP"
        self.complete = True
        return None

    def wrap(self, message: bytes) -> bytes:
        return b"W" + message

    def unwrap(self, message: bytes) -> bytes:
        if not message.startswith(b"W"):
            raise SaslAuthenticationError("GSSAPI: not a wrapped message")
        return message[1:]


class FakeAcceptor:
    """The broker's side of ``FakeInitiator``."""

    def __init__(self, initiator: str = f"alice@{REALM}") -> None:
        self._initiator = initiator
        self._target = ""
        self.complete = False

    def step(self, token: bytes) -> bytes | None:
        if not token.startswith(b"AP-REQ:"):
            raise ValueError("defective token")
        self._target = token[7:].decode() + "@" + REALM
        self.complete = True
        return b"AP-REP"

    def initiator(self) -> str:
        return self._initiator

    def target(self) -> str:
        return self._target

    def wrap(self, message: bytes) -> bytes:
        return b"W" + message

    def unwrap(self, message: bytes) -> bytes:
        if not message.startswith(b"W"):
            raise ValueError("bad wrap token")
        return message[1:]


# ---- RFC 4752 section 3.1 bytes ----------------------------------------------------------


def test_security_layer_offer_gives_the_brokers_max_size() -> None:
    assert security_layer_offer(b"\x01\x00\x10\x00") == 4096
    assert security_layer_offer(b"\x07\xff\xff\xff") == 0xFFFFFF  # none among others


def test_security_layer_offer_without_none_or_of_bad_length_is_refused() -> None:
    with pytest.raises(SaslAuthenticationError, match="requires a security layer"):
        security_layer_offer(b"\x06\x00\x10\x00")
    with pytest.raises(SaslAuthenticationError, match="offer is 3 bytes, not 4"):
        security_layer_offer(b"\x01\x00\x10")


def test_security_layer_answer_chooses_none_with_size_zero() -> None:
    assert security_layer_answer() == b"\x01\x00\x00\x00"
    assert security_layer_answer("alice@R") == b"\x01\x00\x00\x00alice@R"


# ---- the mechanism's rounds -------------------------------------------------------------


def test_mechanism_rounds() -> None:
    mechanism = GssapiMechanism(FakeInitiator("broker"))
    assert mechanism.initial_response() == b"AP-REQ:kafka/broker"
    assert mechanism.respond(b"AP-REP") == b""  # context complete: the empty token
    assert mechanism.respond(b"W\x01\x00\x80\x00") == b"W\x01\x00\x00\x00"
    assert mechanism.server_max_size == 0x8000
    assert mechanism.respond(b"") is None  # the broker's empty answer ends it


def test_mechanism_refuses_bytes_after_the_end_and_an_unwrapped_offer() -> None:
    mechanism = GssapiMechanism(FakeInitiator("broker"))
    mechanism.initial_response()
    mechanism.respond(b"AP-REP")
    with pytest.raises(SaslAuthenticationError, match="not a wrapped message"):
        mechanism.respond(b"\x01\x00\x80\x00")
    mechanism = GssapiMechanism(FakeInitiator("broker"))
    mechanism.initial_response()
    mechanism.respond(b"AP-REP")
    mechanism.respond(b"W\x01\x00\x80\x00")
    with pytest.raises(SaslAuthenticationError, match="3 unexpected bytes"):
        mechanism.respond(b"abc")


def test_mechanism_against_the_brokers_exchange() -> None:
    client = GssapiMechanism(FakeInitiator("localhost"))
    broker = GssapiExchange(FakeAcceptor(), "kafka", REALM, 524288)
    token: bytes | None = client.initial_response()
    rounds = 0
    while token is not None:
        token = client.respond(broker.evaluate(token))
        rounds += 1
    assert rounds == 3 and broker.complete and broker.username == "alice"
    assert client.server_max_size == 524288


# ---- the NetworkClient carries it -------------------------------------------------------


class FakeCredentials:
    mechanism = "GSSAPI"
    username = f"alice@{REALM}"
    settings_hint = "check 'sasl.kerberos.principal'"

    def __init__(self, fail: str | None = None) -> None:
        self.hosts: list[str] = []
        self.fail = fail

    def new_exchange(self, host: str = "") -> GssapiMechanism:
        self.hosts.append(host)
        return GssapiMechanism(FakeInitiator(host, fail=self.fail))


def client_with(credentials: FakeCredentials) -> tuple[MockClock, MockSelector, NetworkClient]:
    clock, selector = MockClock(), MockSelector()
    body = api_versions_body(None)
    selector.serve(ApiKey.API_VERSIONS, lambda request: body)
    metadata = Metadata()
    metadata.bootstrap([("kafka-1.example", 9092)])
    config = NetworkClientConfig(security_protocol="SASL_PLAINTEXT", sasl=credentials)
    client = NetworkClient(
        selector,
        metadata,
        config,
        clock=clock,
        rng=random.Random(1),
        resolver=lambda host, port: [(2, "127.0.0.1", port)],
    )
    return clock, selector, client


def test_network_client_runs_the_exchange_with_the_connections_host_name() -> None:
    credentials = FakeCredentials()
    clock, selector, client = client_with(credentials)
    exchange = GssapiExchange(FakeAcceptor(), "kafka", REALM, 65536)
    tokens: list[bytes] = []

    def authenticate(request: SentRequest) -> dict[str, object]:
        tokens.append(bytes(request.body["auth_bytes"]))
        answer = exchange.evaluate(tokens[-1])
        return {"error_code": 0, "error_message": None, "auth_bytes": answer}

    selector.serve(
        ApiKey.SASL_HANDSHAKE, lambda request: {"error_code": 0, "mechanisms": ["GSSAPI"]}
    )
    selector.serve(ApiKey.SASL_AUTHENTICATE, authenticate)
    for _ in range(10):
        client.poll(0, clock.monotonic_ms())
    assert credentials.hosts == ["kafka-1.example"]  # the host, not the address
    assert tokens == [b"AP-REQ:kafka/kafka-1.example", b"", b"W\x01\x00\x00\x00"]
    assert exchange.complete
    assert client.connection_states.state(-1) is ConnectionState.READY


def test_a_kerberos_failure_fails_the_connection_with_its_words() -> None:
    credentials = FakeCredentials(fail="GSSAPI: the Kerberos KDC cannot be reached (x)")
    clock, selector, client = client_with(credentials)
    selector.serve(
        ApiKey.SASL_HANDSHAKE, lambda request: {"error_code": 0, "mechanisms": ["GSSAPI"]}
    )
    for _ in range(6):
        client.poll(0, clock.monotonic_ms())  # no exception out of poll
    assert client.connection_states.state(-1) is ConnectionState.AUTHENTICATION_FAILED
    assert "the Kerberos KDC cannot be reached" in str(client.failures.snapshot())
    assert selector.requests(-1, ApiKey.SASL_AUTHENTICATE) == []


# ---- settings --------------------------------------------------------------------------

SASL = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT"}


@pytest.fixture
def gssapi_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings are checked without the gssapi extra (these tests run without it too):
    an empty stand-in module is importable as ``gssapi``."""
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))


@pytest.mark.usefixtures("gssapi_module")
def test_gssapi_settings_and_their_defaults(tmp_path: pytest.TempPathFactory) -> None:
    keytab = tmp_path / "alice.keytab"  # type: ignore[operator]
    keytab.write_bytes(b"\x05\x02")
    config = ProducerConfig(
        SASL,
        **{
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.principal": "alice@R",
            "sasl.kerberos.keytab": str(keytab),
        },
    )
    assert isinstance(config.sasl, GssapiCredentials)
    assert (config.sasl.service_name, config.sasl.principal) == ("kafka", "alice@R")
    assert config.sasl.keytab == str(keytab)
    # Java's default mechanism with no user: GSSAPI from the ticket cache
    default = ProducerConfig(SASL)
    assert isinstance(default.sasl, GssapiCredentials)
    assert (default.sasl.principal, default.sasl.keytab) == (None, None)


@pytest.mark.usefixtures("gssapi_module")
def test_java_krb5_login_module(tmp_path: pytest.TempPathFactory) -> None:
    keytab = tmp_path / "k.keytab"  # type: ignore[operator]
    keytab.write_bytes(b"\x05\x02")
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{keytab}" principal="bob@R" serviceName="kafka2";'
    )
    config = ProducerConfig(SASL, **{"sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas})
    assert isinstance(config.sasl, GssapiCredentials)
    assert (config.sasl.principal, config.sasl.keytab, config.sasl.service_name) == (
        "bob@R",
        str(keytab),
        "kafka2",
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"sasl.mechanism": "PLAIN", "sasl.kerberos.principal": "a"},
            r"'sasl\.kerberos\.principal' given, but 'sasl\.mechanism' is PLAIN",
        ),
        (
            {"sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka/host"},
            r"'sasl\.kerberos\.service\.name' must be a plain name",
        ),
        (
            {"sasl.mechanism": "GSSAPI", "sasl.kerberos.keytab": "/no/such.keytab"},
            r"'sasl\.kerberos\.keytab' '/no/such\.keytab' does not exist",
        ),
        (
            {"sasl.username": "u", "sasl.password": "p"},
            r"GSSAPI is Java's default; set 'sasl\.mechanism'",
        ),
        (
            {"sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.kerberos.principal": "u"},
            r"'sasl\.username' given, but 'sasl\.mechanism' is GSSAPI",
        ),
        (
            {
                "sasl.mechanism": "GSSAPI",
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required username="u" password="p";',
            },
            r"PlainLoginModule, which does not go with 'sasl\.mechanism' GSSAPI",
        ),
    ],
)
@pytest.mark.usefixtures("gssapi_module")
def test_bad_gssapi_settings_name_the_setting(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ProducerConfig(SASL, **settings)


def test_without_the_extra_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'kclient-kafka\[gssapi\]'"):
        ProducerConfig(SASL, **{"sasl.mechanism": "GSSAPI"})
    # GSSAPI only as Java's default: the error says that too
    with pytest.raises(ConfigError, match=r"'sasl\.mechanism' is not set: GSSAPI is Java's"):
        ProducerConfig(SASL)


def test_kerberos_failures_in_words() -> None:
    target, who = "kafka/h", "alice@R"
    kdc = explain(
        Exception("Major (1): x, Minor (2): Cannot contact any KDC for realm 'R'"), target, who
    )
    assert kdc.startswith("GSSAPI: the Kerberos KDC cannot be reached (Cannot contact any KDC")
    service = explain(
        Exception("Minor (3): Server kafka/h@R not found in Kerberos database"), target, who
    )
    assert "does not know the service kafka/h" in service
    assert "'sasl.kerberos.service.name'" in service
    creds = explain(
        Exception("Minor (4): Client 'x@R' not found in Kerberos database"), target, who
    )
    assert "the KDC does not know the principal alice@R" in creds
    assert "'sasl.kerberos.principal'" in creds
    keytab = explain(Exception("Minor (5): No key table entry found for x@R"), target, who)
    assert "no Kerberos credentials for alice@R" in keytab and "'sasl.kerberos.keytab'" in keytab


def test_librdkafkas_kinit_settings_say_what_kclient_does_instead() -> None:
    with pytest.raises(ConfigError, match="kclient runs no kinit"):
        ProducerConfig(SASL, **{"sasl.kerberos.kinit.cmd": "kinit -kt x y"})
    with pytest.raises(ConfigError, match="gets a new ticket from 'sasl.kerberos.keytab'"):
        ProducerConfig(SASL, **{"sasl.kerberos.min.time.before.relogin": 60000})


def test_kdc_bound_fails_in_time_and_does_not_pile_up_workers() -> None:
    release = threading.Event()
    bound = KdcBound(timeout_ms=0)
    with pytest.raises(SaslAuthenticationError, match="did not answer within 0 ms"):
        bound.run(lambda: release.wait(30))
    # the first worker still waits for the KDC: the next attempt fails at once, naming the
    # setting as the first did
    with pytest.raises(SaslAuthenticationError, match=r"within 0 ms .* still silent after"):
        bound.run(lambda: True)
    release.set()
    assert bound._worker is not None
    bound._worker.join(30)
    bound.timeout_ms = 30_000
    assert bound.run(lambda: "token") == "token"
    with pytest.raises(ZeroDivisionError):  # the call's own error comes through
        bound.run(lambda: 1 // 0)
