"""Fixtures of the Sender's tests."""

from __future__ import annotations

import pytest

from kclient.record import _accel
from kclient.sender import sender as sender_module


@pytest.fixture(params=["c", "python"])
def both_sender_steps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with the Sender's send step in C (``kclient.sender._step``, when the
    accelerator is built) and with the Python reference (``_send_producer_data``)."""
    if request.param == "python":
        monkeypatch.setattr(sender_module, "_step", None)
    else:
        assert (sender_module._step is not None) == _accel.ACCELERATED  # the test command builds it
    return str(request.param)
