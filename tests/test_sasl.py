"""SASL client mechanisms against the RFC test vectors and a server written from the RFC."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kclient.errors import ConfigError, SaslAuthenticationError
from kclient.sasl import PlainMechanism, SaslCredentials, ScramMechanism, parse_jaas_config


def test_plain_sends_one_message_and_expects_nothing_more() -> None:
    mechanism = PlainMechanism("alice", "pässword")
    assert mechanism.initial_response() == b"\x00alice\x00p\xc3\xa4ssword"
    assert mechanism.respond(b"") is None


def test_scram_sha_256_matches_rfc_7677() -> None:
    # RFC 7677, section 3: user "user", password "pencil".
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert scram.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert scram.respond(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert scram.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None


def _server(hash_name: str, password: bytes, salt: bytes, iterations: int):  # type: ignore[no-untyped-def]
    """The server side of RFC 5802, for SCRAM-SHA-512 (the RFC has no vector for it)."""
    salted = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
    stored_key = hashlib.new(hash_name, hmac.digest(salted, b"Client Key", hash_name)).digest()
    server_key = hmac.digest(salted, b"Server Key", hash_name)

    def first(client_first: bytes) -> tuple[bytes, str]:
        bare = client_first.decode()[3:]
        nonce = dict(p.split("=", 1) for p in bare.split(","))["r"] + "srv"
        msg = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return msg.encode(), bare + "," + msg

    def final(client_final: bytes, so_far: str) -> bytes:
        without_proof, _, proof = client_final.decode().rpartition(",p=")
        auth = f"{so_far},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth, hash_name)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
        if hashlib.new(hash_name, client_key).digest() != stored_key:
            return b"e=invalid-proof"
        return b"v=" + base64.b64encode(hmac.digest(server_key, auth, hash_name))

    return first, final


def test_scram_sha_512_authenticates_against_an_rfc_5802_server() -> None:
    first, final = _server("sha512", b"s3cret", b"salty-salt", 4096)
    scram = ScramMechanism("SCRAM-SHA-512", "al=ice,x", "s3cret")
    client_first = scram.initial_response()
    assert client_first.startswith(b"n,,n=al=3Dice=2Cx,r=")  # '=' and ',' escaped
    server_first, so_far = first(client_first)
    client_final = scram.respond(server_first)
    assert client_final is not None
    server_final = final(client_final, so_far)
    assert server_final.startswith(b"v=")
    assert scram.respond(server_final) is None


def test_scram_with_the_wrong_password_is_refused_and_a_fake_server_is_caught() -> None:
    first, final = _server("sha512", b"right", b"salt", 4096)
    scram = ScramMechanism("SCRAM-SHA-512", "alice", "wrong")
    server_first, so_far = first(scram.initial_response())
    refusal = final(scram.respond(server_first) or b"", so_far)
    with pytest.raises(SaslAuthenticationError, match="the broker refused: invalid-proof"):
        scram.respond(refusal)
    # A server that does not know the password cannot produce the right signature.
    honest = ScramMechanism("SCRAM-SHA-512", "alice", "right")
    server_first, so_far = first(honest.initial_response())
    honest.respond(server_first)
    with pytest.raises(SaslAuthenticationError, match="signature is wrong"):
        honest.respond(b"v=" + base64.b64encode(b"\x00" * 64))


def test_scram_refuses_a_nonce_it_did_not_start_and_too_few_iterations() -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "u", "p", nonce="abc")
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        scram.respond(b"r=xyz,s=c2FsdA==,i=4096")
    scram = ScramMechanism("SCRAM-SHA-256", "u", "p", nonce="abc")
    with pytest.raises(SaslAuthenticationError, match="iterations"):
        scram.respond(b"r=abcdef,s=c2FsdA==,i=1")


def test_jaas_config_is_read_like_java() -> None:
    module, options = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="p\\"w;";'
    )
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options == {"username": "alice", "password": 'p"w;'}


def test_credentials_come_from_either_style_and_mistakes_name_the_setting() -> None:
    plain = SaslCredentials.from_settings("PLAIN", "alice", "pw", None)
    assert (plain.username, plain.password) == ("alice", "pw")
    assert "pw" not in repr(plain)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="pw2";'
    )
    scram = SaslCredentials.from_settings("SCRAM-SHA-256", None, None, jaas)
    assert (scram.username, scram.password) == ("bob", "pw2")
    with pytest.raises(ConfigError, match="does not go with 'sasl.mechanism' PLAIN"):
        SaslCredentials.from_settings("PLAIN", None, None, jaas)
    with pytest.raises(ConfigError, match="GSSAPI is Java's default"):
        SaslCredentials.from_settings("GSSAPI", "a", "b", None)
    with pytest.raises(ConfigError, match="needs 'sasl.username' and 'sasl.password'"):
        SaslCredentials.from_settings("PLAIN", "alice", None, None)
    with pytest.raises(ConfigError, match="not both"):
        SaslCredentials.from_settings("PLAIN", "alice", "pw", jaas)


def test_producer_settings_build_the_credentials_and_hide_the_password() -> None:
    from kclient.config import ProducerConfig

    config = ProducerConfig(
        {
            "bootstrap.servers": "b:9092",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": "top-secret",
        }
    )
    assert config.sasl == SaslCredentials("SCRAM-SHA-512", "alice", "top-secret")
    assert config.ssl_context is None  # SASL_PLAINTEXT: no TLS
    assert "top-secret" not in repr(config)
    with pytest.raises(ConfigError, match="set it to SASL_SSL"):
        ProducerConfig({"bootstrap.servers": "b:9092", "sasl.username": "alice"})
    tls = ProducerConfig(
        {
            "bootstrap.servers": "b:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u" password="p";',
        }
    )
    assert tls.ssl_context is not None and tls.sasl is not None
    assert 'password="p"' not in repr(tls)
