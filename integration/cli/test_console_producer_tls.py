"""kclient-console-producer over TLS: the ssl.* settings come in as --producer-property
strings, as from a shell or a .properties file."""

from __future__ import annotations

from pathlib import Path

from integration.cli.test_console_producer import console
from integration.producer.verify import consume_all
from kclient.broker import EmbeddedBroker
from kclient.testing.tls import write_test_certificates


def test_console_producer_speaks_tls_with_properties_from_a_file(tmp_path: Path) -> None:
    certs = write_test_certificates(tmp_path)
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"security.protocol=SSL\nssl.truststore.location={certs.ca_cert}\nssl.truststore.type=PEM\n"
    )
    with EmbeddedBroker(security_protocol="SSL", ssl_keystore_location=certs.server_keystore) as b:
        b.create_topic("console-tls", 1)
        result = console(
            b.bootstrap_servers,
            "console-tls",
            "--producer.config",
            str(properties),
            "--producer-property",
            "ssl.endpoint.identification.algorithm=https",
            stdin="one\ntwo\nthree\n",
        )
        assert result.returncode == 0, result.stderr
        assert "3 records sent, 0 failed" in result.stderr
        got = consume_all(
            b.bootstrap_servers,
            "console-tls",
            1,
            3,
            settings={"security.protocol": "SSL", "ssl.ca.location": certs.ca_cert},
        )
        assert [c.value for c in got] == [b"one", b"two", b"three"]
        wrong = console(
            b.bootstrap_servers,
            "console-tls",
            "--producer-property",
            f"ssl.truststore.location={certs.ca_cert}",
            stdin="x\n",
        )
        assert wrong.returncode != 0
        assert "set 'security.protocol' to SSL" in wrong.stderr
