"""integration/gssapi needs the gssapi extra and Debian's MIT Kerberos and kcat packages
(kclient.testing.kdc names them): without them a test fails saying what to install,
never a silent skip."""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(autouse=True)
def _gssapi_extra() -> None:
    if importlib.util.find_spec("gssapi") is None:
        pytest.fail(
            "the gssapi extra is not installed: pip install 'kclient-kafka[gssapi]' "
            "(it builds against MIT krb5: apt-get install libkrb5-dev)",
            pytrace=False,
        )
