"""kclient.testing.kdc without running a KDC: the message when MIT Kerberos is missing, and
what the Apache Kafka harness's GSSAPI listener is made of."""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient.testing import kdc
from kclient.testing.apache_kafka import ApacheKafka
from kclient.testing.kdc import KdcUnavailable, KerberosSetup, LocalKdc


def test_missing_programs_name_the_debian_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kdc, "_which", lambda program: None)
    assert kdc.missing_programs() == (
        "a local Kerberos KDC needs MIT Kerberos: apt-get install krb5-admin-server krb5-kdc "
        "(Debian/Ubuntu)"
    )
    with (
        pytest.raises(KdcUnavailable, match="apt-get install krb5-admin-server krb5-kdc"),
        kdc.local_kdc(),
    ):
        pass


def setup(tmp_path: Path) -> KerberosSetup:
    local = LocalKdc("KCLIENT.TEST", 88, tmp_path, tmp_path / "krb5.conf", tmp_path / "kdc.conf")
    return KerberosSetup(local, tmp_path / "b.keytab", tmp_path / "c.keytab", "alice@KCLIENT.TEST")


def test_apache_kafka_gssapi_listener(tmp_path: Path) -> None:
    kerberos = setup(tmp_path)
    with pytest.raises(ValueError, match="GSSAPI listener needs kerberos="):
        ApacheKafka(listeners=("GSSAPI",))
    kafka = ApacheKafka(listeners=("GSSAPI",), kerberos=kerberos)
    assert f"-Djava.security.krb5.conf={tmp_path / 'krb5.conf'}" in kafka.jvm_options
    props = kerberos.kafka_listener_properties("gssapi")
    assert props["listener.name.gssapi.sasl.enabled.mechanisms"] == "GSSAPI"
    jaas = props["listener.name.gssapi.gssapi.sasl.jaas.config"]
    assert jaas.startswith("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true")
    assert 'principal="kafka/127.0.0.1@KCLIENT.TEST"' in jaas
    assert kerberos.client_config()["sasl.kerberos.principal"] == "alice@KCLIENT.TEST"
