"""The ``kerberos_kdc`` pytest fixture (through kclient's pytest plugin): a local MIT KDC
(:mod:`kclient.testing.kdc`) for the session. Without MIT Kerberos a test using it fails
with one line naming the Debian packages to install: never a silent skip. Not a Kafka
component."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kclient.testing.kdc import KerberosSetup, kerberos_setup, missing_programs

__all__ = ["kerberos_kdc"]


@pytest.fixture(scope="session")
def kerberos_kdc() -> Iterator[KerberosSetup]:
    """A running KDC (realm ``KCLIENT.TEST``) with keytabs for a broker (``kafka/127.0.0.1``,
    ``kafka/localhost``) and a client (``alice``); ``KRB5_CONFIG`` points at its krb5.conf."""
    problem = missing_programs()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with kerberos_setup() as setup:
        yield setup
