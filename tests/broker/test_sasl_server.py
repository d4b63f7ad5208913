"""The broker's SASL server without sockets: SCRAM against RFC 7677's test vector, SCRAM
against kclient's own (independent) client, PLAIN, bad tokens, the per-connection
session, and the settings (BrokerConfig, the CLI), whose errors name what to fix."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
from typing import Any

import pytest

from kclient import errors
from kclient.broker import EmbeddedCluster
from kclient.broker.__main__ import main
from kclient.broker.config import BrokerConfig
from kclient.broker.sasl_server import (
    PLAIN_REFUSED,
    SaslFailure,
    SaslServer,
    ScramExchange,
    scram_credential,
)
from kclient.broker.sasl_session import SaslSession
from kclient.errors import ConfigError
from kclient.sasl import ScramMechanism

# ---- RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil" -------------------

RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()
RFC_SERVER_FIRST = (
    f"r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
)
RFC_CLIENT_FINAL = (
    f"c=biws,r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
).encode()
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(password: str = "pencil", user: str = "user") -> SaslServer:
    return SaslServer(
        ["SCRAM-SHA-256"],
        {user: password},
        salt=lambda mechanism, name: RFC_SALT,
        server_nonce=lambda: RFC_SERVER_NONCE,
    )


def test_scram_sha_256_matches_the_rfc_7677_exchange() -> None:
    exchange = rfc_server().new_exchange("SCRAM-SHA-256")
    assert exchange.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not exchange.complete and exchange.username == "user"
    assert exchange.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert exchange.complete


def test_the_rfc_exchange_with_a_credential_built_directly() -> None:
    credential = scram_credential("SCRAM-SHA-256", "pencil", salt=RFC_SALT)
    assert credential.iterations == 4096
    exchange = ScramExchange(
        "SCRAM-SHA-256",
        {"user": credential}.get,
        unknown_user=lambda name: pytest.fail("the user exists"),
        server_nonce=lambda: RFC_SERVER_NONCE,
    )
    assert exchange.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert exchange.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert "stored_key" not in repr(credential) and "server_key" not in repr(credential)


def test_the_rfc_client_final_with_another_password_is_refused() -> None:
    exchange = rfc_server(password="pencil2").new_exchange("SCRAM-SHA-256")
    assert exchange.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST  # same salt and nonce
    with pytest.raises(SaslFailure) as failure:
        exchange.evaluate(RFC_CLIENT_FINAL)
    assert "wrong password" in failure.value.reason
    assert "invalid credentials" in failure.value.client_message
    assert "SCRAM-SHA-256" in failure.value.client_message
    assert not exchange.complete


def test_a_replayed_client_final_is_refused() -> None:
    exchange = rfc_server().new_exchange("SCRAM-SHA-256")
    exchange.evaluate(RFC_CLIENT_FIRST)
    exchange.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(SaslFailure, match="ended"):  # again on the same exchange
        exchange.evaluate(RFC_CLIENT_FINAL)
    # a new exchange (a new connection) has a fresh server nonce: the old proof is useless
    fresh = SaslServer(["SCRAM-SHA-256"], {"user": "pencil"}, salt=lambda m, u: RFC_SALT)
    other = fresh.new_exchange("SCRAM-SHA-256")
    other.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslFailure) as failure:
        other.evaluate(RFC_CLIENT_FINAL)
    assert "nonce" in failure.value.reason


def client_final_with_nonce(server_first: bytes, nonce: str) -> bytes:
    """The RFC 7677 client's final message with ``r=nonce``, the proof computed over the
    message as sent (what librdkafka does)."""
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", RFC_SALT, 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = f"c=biws,r={nonce}"
    auth = f"n=user,r={RFC_CLIENT_NONCE},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_the_client_nonce_repeated_as_old_librdkafka_does_is_accepted_and_nothing_else() -> None:
    # librdkafka < 2.6.1 sends r=<client nonce><client nonce + server nonce>
    # (confluentinc/librdkafka#4895): accepted; any other nonce, even one ending with the
    # right one, is refused
    full = RFC_CLIENT_NONCE + RFC_SERVER_NONCE

    def attempt(nonce: str) -> bool:
        exchange = rfc_server().new_exchange("SCRAM-SHA-256")
        server_first = exchange.evaluate(RFC_CLIENT_FIRST)
        try:
            exchange.evaluate(client_final_with_nonce(server_first, nonce))
        except SaslFailure as failure:
            assert "nonce" in failure.reason
            return False
        return exchange.complete

    assert client_final_with_nonce(RFC_SERVER_FIRST, full) == RFC_CLIENT_FINAL
    assert attempt(full)
    assert attempt(RFC_CLIENT_NONCE + full)
    assert not attempt(RFC_CLIENT_NONCE * 2 + full)
    assert not attempt("x" + full)
    assert not attempt(RFC_CLIENT_NONCE)
    assert not attempt(full + "x")


def test_the_salt_is_random_and_derived_once_per_user_and_mechanism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = hashlib.pbkdf2_hmac

    def counting(name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
        calls.append(name)
        assert iterations == 4096
        return real(name, password, salt, iterations)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counting)
    server = SaslServer(MECHS, {"alice": "a", "bob": "b"})
    assert sorted(calls) == ["sha256", "sha256", "sha512", "sha512"]
    calls.clear()
    monkeypatch.setattr(hashlib, "pbkdf2_hmac", real)  # the client derives its own key
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        for _ in range(3):
            scram_round_trip(server, mechanism, "alice", "a")
    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counting)
    server.new_exchange("SCRAM-SHA-512").evaluate(b"n,,n=bob,r=abc")
    assert calls == []  # nothing derived per connection
    salts = {
        server.new_exchange(m).evaluate(f"n,,n={u},r=x".encode()).split(b",")[1]
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        for u in ("alice", "bob")
    }
    assert len(salts) == 4


def test_a_cluster_derives_the_credentials_once_for_all_its_brokers() -> None:
    cluster = EmbeddedCluster(
        3, security_protocol="SASL_PLAINTEXT", sasl_users={"alice": "secret"}
    )  # not started: no sockets
    servers = {id(b.sasl_server) for b in cluster.brokers.values()}
    assert servers == {id(cluster.sasl_server)} and cluster.sasl_server is not None
    cluster.close()


# ---- SCRAM against kclient's client (an independent implementation) --------------------

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def scram_round_trip(server: SaslServer, mechanism: str, user: str, password: str) -> bool:
    """Authenticate with kclient's client; True if the server accepted (the client then
    also checked the server's signature)."""
    client = ScramMechanism(mechanism, user, password)
    exchange = server.new_exchange(mechanism)
    try:
        server_first = exchange.evaluate(client.initial_response())
        client_final = client.respond(server_first)
        assert client_final is not None
        server_final = exchange.evaluate(client_final)
    except SaslFailure:
        return False
    assert client.respond(server_final) is None  # raises if the signature is wrong
    return exchange.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["alice", "a,b=c", "=2C", "\u00e9l\u00e8ve", "x" * 200])
def test_kclients_scram_client_authenticates(mechanism: str, user: str) -> None:
    server = SaslServer(MECHS, {user: "p\u00e4ss:w,o=rd", "other": "x"})
    assert scram_round_trip(server, mechanism, user, "p\u00e4ss:w,o=rd")
    assert not scram_round_trip(server, mechanism, user, "p\u00e4ss:w,o=rd ")
    assert not scram_round_trip(server, mechanism, "other", "p\u00e4ss:w,o=rd")


def test_an_unknown_scram_user_gets_a_stable_made_up_salt_and_fails_at_the_proof() -> None:
    server = SaslServer(["SCRAM-SHA-256"], {"alice": "a"})

    def server_first(user: str) -> bytes:
        return server.new_exchange("SCRAM-SHA-256").evaluate(f"n,,n={user},r=abc".encode())

    salt = server_first("mallory").split(b",")[1]
    assert server_first("mallory").split(b",")[1] == salt  # nothing tells it is made up
    assert server_first("trudy").split(b",")[1] != salt
    client = ScramMechanism("SCRAM-SHA-256", "mallory", "a")
    exchange = server.new_exchange("SCRAM-SHA-256")
    final = client.respond(exchange.evaluate(client.initial_response()))
    assert final is not None
    with pytest.raises(SaslFailure) as failure:
        exchange.evaluate(final)
    assert failure.value.reason == "unknown user"
    assert "invalid credentials" in failure.value.client_message  # same as a wrong password


def test_an_authorization_id_must_be_the_user() -> None:
    server = rfc_server()
    same = server.new_exchange("SCRAM-SHA-256")
    assert same.evaluate(b"n,a=user,n=user,r=abc").startswith(b"r=abc")
    with pytest.raises(SaslFailure, match="authorization id"):
        server.new_exchange("SCRAM-SHA-256").evaluate(b"n,a=admin,n=user,r=abc")


def good_client_final(server: SaslServer) -> tuple[Any, bytes]:
    """An exchange after a good client-first, and the client-final kclient would send."""
    client = ScramMechanism("SCRAM-SHA-256", "user", "pencil")
    exchange = server.new_exchange("SCRAM-SHA-256")
    final = client.respond(exchange.evaluate(client.initial_response()))
    assert final is not None
    return exchange, final


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (b"", "no GS2 header"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"n,,", "no n=username"),
        (b"n,,n=user", "no n=username"),
        (b"n,,r=abc,n=user", "no n=username"),
        (b"n,,n=user,x=abc", "no r=nonce"),
        (b"n,,n=user,r=", "bad nonce"),
        (b"n,,n=user,r=a\x7fb", "bad nonce"),
        (b"n,,n=us=er,r=abc", "bad username"),
        (b"n,,n=,r=abc", "bad username"),
        (b"q,,n=user,r=abc", "channel binding flag"),
        (b"p=tls-unique,,n=user,r=abc", "channel binding"),
        (b"n,,m=ext,n=user,r=abc", "mandatory extension"),
        (b"n,x,n=user,r=abc", "authorization id"),
        (b"\x00user\x00pencil", "no GS2 header"),  # a PLAIN token sent to SCRAM
    ],
)
def test_a_bad_client_first_fails_cleanly(token: bytes, reason: str) -> None:
    exchange = rfc_server().new_exchange("SCRAM-SHA-256")
    with pytest.raises(SaslFailure) as failure:
        exchange.evaluate(token)
    assert reason in failure.value.reason
    with pytest.raises(SaslFailure):  # a failed exchange stays failed
        exchange.evaluate(RFC_CLIENT_FIRST)


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda final: final[: len(final) // 2], "no p=proof"),  # truncated
        (lambda final: final[:-4], "proof of"),  # proof cut short (still base64)
        (lambda final: final[:-1], "not base64"),
        (lambda final: final + b",x=1", "not base64"),
        (lambda final: b"\xff" + final, "not UTF-8"),
        (lambda final: final.replace(b"c=biws", b"c=eSws"), "channel binding"),
        (lambda final: final.replace(b"c=biws,", b""), "no c=channel-binding"),
        (lambda final: final.replace(b",r=", b",r=x"), "nonce"),
        (lambda final: final.replace(b",r=", b",s="), "no r=nonce"),
        (
            lambda final: final.rpartition(b",p=")[0] + b",p=" + base64.b64encode(bytes(32)),
            "wrong password",
        ),
    ],
)
def test_a_bad_client_final_fails_cleanly(mangle: Any, reason: str) -> None:
    exchange, final = good_client_final(rfc_server())
    with pytest.raises(SaslFailure) as failure:
        exchange.evaluate(mangle(final))
    assert reason in failure.value.reason
    assert not exchange.complete


@pytest.mark.parametrize("mechanism", MECHS)
def test_random_tokens_only_ever_fail_as_sasl_failures(mechanism: str) -> None:
    rng = random.Random(1234)
    server = SaslServer(MECHS, {"user": "pencil"})
    alphabet = b"n,=rpcsia\x00\xffbiws" + bytes(range(32, 127))
    for _ in range(400):
        exchange = server.new_exchange(mechanism)
        for _ in range(rng.randint(1, 3)):
            token = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
            if rng.random() < 0.3:
                token = b"n,,n=user,r=" + token
            try:
                exchange.evaluate(token)
            except SaslFailure:
                break
        assert not exchange.complete


# ---- PLAIN -------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [b"\x00alice\x00s3cret", b"alice\x00alice\x00s3cret"])
def test_plain_accepts_the_right_password(token: bytes) -> None:
    exchange = SaslServer(["PLAIN"], {"alice": "s3cret"}).new_exchange("PLAIN")
    assert exchange.evaluate(token) == b""
    assert exchange.complete and exchange.username == "alice"
    with pytest.raises(SaslFailure):
        exchange.evaluate(token)  # nothing after completion


def test_plain_passwords_are_utf8_bytes() -> None:
    exchange = SaslServer(["PLAIN"], {"j\u00fcrgen": "gr\u00fc\u00dfe"}).new_exchange("PLAIN")
    assert exchange.evaluate("\x00j\u00fcrgen\x00gr\u00fc\u00dfe".encode()) == b""


@pytest.mark.parametrize(
    ("token", "reason", "client_message"),
    [
        (b"\x00alice\x00wrong", "wrong password", PLAIN_REFUSED),
        (b"\x00alice\x00", "wrong password", PLAIN_REFUSED),
        (b"\x00mallory\x00s3cret", "unknown user", PLAIN_REFUSED),
        (b"\x00\x00s3cret", "empty PLAIN username", PLAIN_REFUSED),
        (b"bob\x00alice\x00s3cret", "authorization id", "different from username"),
        (b"\x00alice", "2 NUL-separated fields", "malformed"),
        (b"\x00alice\x00s3cret\x00", "4 NUL-separated fields", "malformed"),
        (b"", "1 NUL-separated fields", "malformed"),
        (b"\x00\xffalice\x00s3cret", "not UTF-8", "malformed"),
    ],
)
def test_plain_refuses(token: bytes, reason: str, client_message: str) -> None:
    exchange = SaslServer(["PLAIN"], {"alice": "s3cret"}).new_exchange("PLAIN")
    with pytest.raises(SaslFailure) as failure:
        exchange.evaluate(token)
    assert reason in failure.value.reason
    assert client_message in failure.value.client_message
    assert "s3cret" not in failure.value.reason and "wrong" not in failure.value.client_message
    assert not exchange.complete


# ---- one connection: SaslHandshake, then SaslAuthenticate --------------------------------


def session(mechanisms: tuple[str, ...] = MECHS) -> SaslSession:
    return SaslSession(SaslServer(mechanisms, {"alice": "s3cret"}))


def test_a_plain_session_authenticates() -> None:
    s = session()
    assert s.accepts_api_versions and not s.in_progress
    reply = s.handshake(1, "PLAIN")
    assert reply.body == {"error_code": 0, "mechanisms": list(MECHS)}
    assert not reply.close and reply.failure is None
    assert not s.accepts_api_versions and s.in_progress
    reply = s.authenticate(b"\x00alice\x00s3cret", 0)
    assert reply.authenticated and not reply.close
    assert reply.body["error_code"] == 0 and reply.body["auth_bytes"] == b""
    assert s.username == "alice" and s.mechanism == "PLAIN"


def test_a_scram_session_takes_two_rounds() -> None:
    s = session()
    s.handshake(1, "SCRAM-SHA-512")
    client = ScramMechanism("SCRAM-SHA-512", "alice", "s3cret")
    first = s.authenticate(client.initial_response(), 0)
    assert first.body["error_code"] == 0 and not first.authenticated
    final = client.respond(first.body["auth_bytes"])
    assert final is not None
    last = s.authenticate(final, 0)
    assert last.authenticated
    assert client.respond(last.body["auth_bytes"]) is None


def test_a_wrong_password_fails_the_session_and_closes() -> None:
    s = session()
    s.handshake(1, "PLAIN")
    reply = s.authenticate(b"\x00alice\x00nope", 0)
    assert reply.close and reply.failure == "wrong password" and not reply.authenticated
    assert reply.body["error_code"] == errors.SaslAuthenticationFailedError.code
    assert reply.body["error_message"] == "Authentication failed: Invalid username or password"
    assert s.failed and not s.in_progress


def test_a_mechanism_not_enabled_is_refused_with_the_enabled_list() -> None:
    s = session(("SCRAM-SHA-512",))
    reply = s.handshake(1, "PLAIN")
    assert reply.body == {
        "error_code": errors.UnsupportedSaslMechanismError.code,
        "mechanisms": ["SCRAM-SHA-512"],
    }
    assert reply.close and reply.failure is not None and "'PLAIN' is not enabled" in reply.failure


def test_sasl_handshake_v0_is_refused_with_a_clear_reason() -> None:
    reply = session().handshake(0, "PLAIN")
    assert reply.body["error_code"] == errors.UnsupportedVersionError.code
    assert reply.close and reply.failure is not None and "v0" in reply.failure


def test_out_of_order_requests_are_illegal_sasl_state() -> None:
    early = session().authenticate(b"\x00alice\x00s3cret", 0)
    assert early.body["error_code"] == errors.IllegalSaslStateError.code and early.close
    twice = session()
    twice.handshake(1, "PLAIN")
    again = twice.handshake(1, "PLAIN")
    assert again.body["error_code"] == errors.IllegalSaslStateError.code and again.close


def test_long_user_names_are_cut_in_what_is_logged() -> None:
    s = session()
    s.handshake(1, "PLAIN")
    s.authenticate(b"\x00" + b"u" * 100_000 + b"\x00pw", 0)
    assert s.username is not None and len(s.username) < 100


def test_names_from_the_client_cannot_forge_log_lines() -> None:
    s = session()
    reply = s.handshake(1, "PLAIN\nWARNING forged")
    assert s.mechanism is not None and "\n" not in s.mechanism
    assert reply.failure is not None and "\n" not in reply.failure
    t = session()
    t.handshake(1, "PLAIN")
    t.authenticate(b"\x00al\nice\x00pw", 0)
    assert t.username is not None and "\n" not in t.username


# ---- settings ------------------------------------------------------------------------------


def test_sasl_listeners_are_configured_with_users() -> None:
    config = BrokerConfig(
        security_protocol="sasl_plaintext",
        sasl_users={"alice": "s3cret"},
        sasl_enabled_mechanisms="scram-sha-256, PLAIN",
    )
    assert config.security_protocol == "SASL_PLAINTEXT" and config.sasl and not config.tls
    assert config.sasl_enabled_mechanisms == ("SCRAM-SHA-256", "PLAIN")
    assert "s3cret" not in repr(config) and "alice" not in repr(config)
    assert hash(config) == hash(config.replace())
    server = config.sasl_server()
    assert server is not None and server.mechanisms == ("SCRAM-SHA-256", "PLAIN")
    assert server.max_receive_size == 524288  # Kafka's sasl.server.max.receive.size
    assert "s3cret" not in repr(server)
    assert BrokerConfig().sasl_server() is None


def test_the_users_cannot_be_changed_afterwards() -> None:
    users = {"alice": "s3cret"}
    config = BrokerConfig(security_protocol="SASL_PLAINTEXT", sasl_users=users)
    users["mallory"] = "x"
    assert list(config.sasl_users) == ["alice"]
    with pytest.raises(TypeError):
        config.sasl_users["eve"] = "x"  # type: ignore[index]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"sasl_enabled_mechanisms": ("PLAIN", "DIGEST-MD5")},
            r"'sasl\.enabled\.mechanisms' lists DIGEST-MD5, which the embedded broker does not "
            "serve",
        ),
        (
            {"sasl_enabled_mechanisms": ("PLAIN", "GSSAPI")},
            r"'sasl\.enabled\.mechanisms' GSSAPI needs 'sasl\.kerberos\.keytab'",
        ),
        ({"sasl_enabled_mechanisms": ()}, r"'sasl\.enabled\.mechanisms' is empty"),
        ({"sasl_enabled_mechanisms": " , "}, r"'sasl\.enabled\.mechanisms' is empty"),
        ({"sasl_enabled_mechanisms": 5}, r"'sasl\.enabled\.mechanisms' must be a list"),
        ({"sasl_users": {}}, r"SASL_PLAINTEXT needs at least one user in 'sasl\.users'"),
        ({"sasl_users": {"": "pw"}}, r"'sasl\.users' has a bad user name"),
        ({"sasl_users": {"a\0b": "pw"}}, r"'sasl\.users' has a bad user name"),
        ({"sasl_users": {"alice": ""}}, r"'sasl\.users': the password of 'alice'"),
        ({"sasl_users": [("alice", "pw")]}, r"'sasl\.users' must map user names"),
        ({"sasl_server_max_receive_size": 0}, r"'sasl\.server\.max\.receive\.size' must be"),
        (
            {"ssl_truststore_location": "ca.pem"},
            r"'ssl\.truststore\.location' is set but 'security\.protocol' is SASL_PLAINTEXT: "
            r"set security\.protocol=SASL_SSL",
        ),
    ],
)
def test_bad_sasl_settings_name_the_setting(settings: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"security_protocol": "SASL_PLAINTEXT", "sasl_users": {"a": "pw"}}
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(**{**base, **settings})


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"sasl_users": {"alice": "pw"}}, "sasl.users"),
        ({"sasl_enabled_mechanisms": ("PLAIN",)}, "sasl.enabled.mechanisms"),
        ({"sasl_server_max_receive_size": 1024}, "sasl.server.max.receive.size"),
    ],
)
def test_sasl_settings_on_a_listener_without_sasl_are_refused(
    protocol: str, settings: dict[str, Any], name: str
) -> None:
    tls = {"ssl_keystore_location": "k.pem"} if protocol == "SSL" else {}
    suggestion = "SASL_SSL" if protocol == "SSL" else "SASL_PLAINTEXT"
    with pytest.raises(
        ConfigError,
        match=rf"'{name}' is set but 'security\.protocol' is {protocol}: "
        rf"set security\.protocol={suggestion}",
    ):
        BrokerConfig(security_protocol=protocol, **tls, **settings)


def test_cli_sasl_errors_exit_2_and_name_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    sasl = ["--security-protocol", "SASL_PLAINTEXT"]
    assert main(sasl) == 2
    assert "needs at least one user in 'sasl.users'" in capsys.readouterr().err
    assert main([*sasl, "--sasl-user", "alice"]) == 2
    assert "--sasl-user expects NAME:PASSWORD" in capsys.readouterr().err
    assert main([*sasl, "--sasl-user", ":hunter2"]) == 2
    err = capsys.readouterr().err
    assert "--sasl-user expects NAME:PASSWORD" in err and "hunter2" not in err
    assert main([*sasl, "--sasl-user", "a:1", "--sasl-user", "a:2"]) == 2
    assert (
        "SASL user 'a' is given twice: in --sasl-user number 1 and in --sasl-user number 2"
        in capsys.readouterr().err
    )
    assert main([*sasl, "--sasl-user", "a:1", "--sasl-enabled-mechanisms", "PLAIN,GSSAPI"]) == 2
    assert (
        "'sasl.enabled.mechanisms' GSSAPI needs 'sasl.kerberos.keytab'" in capsys.readouterr().err
    )
    assert main(["--sasl-user", "a:1"]) == 2
    assert "'sasl.users' is set but 'security.protocol' is PLAINTEXT" in capsys.readouterr().err
