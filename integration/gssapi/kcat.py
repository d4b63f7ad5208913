"""Debian's kcat (librdkafka 2.0.2 with Cyrus SASL) as the librdkafka peer of the GSSAPI
tests: confluent-kafka's wheels are built without GSSAPI."""

from __future__ import annotations

import shutil

#: kcat's GSSAPI goes through Cyrus SASL, whose Kerberos plugin is a package of its own.
KCAT_PACKAGES = "apt-get install kcat krb5-user libsasl2-modules-gssapi-mit"


def kcat_binary() -> str:
    binary = shutil.which("kcat")
    assert binary is not None, f"kcat is not installed ({KCAT_PACKAGES})"
    return binary
