"""The sender's C accelerator (``kclient.sender._speedups``) and its one handshake with the
record layer's C: the capsule ``kclient.record._speedups._C_API``, checked by version at
import (``kclient/record/_capi.h``). A sender module built from other sources than the
record module fails its import, and kclient runs its pure-Python code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kclient.record import _accel

pytestmark = pytest.mark.skipif(not _accel.ACCELERATED, reason="the accelerator is not built")


def run(script: str, pure: str = "0") -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter, with ``KCLIENT_PURE_PYTHON`` set to ``pure``."""
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "KCLIENT_PURE_PYTHON": pure},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_the_record_module_exports_its_c_api_as_a_capsule() -> None:
    from kclient.record import _speedups

    assert type(_speedups._C_API).__name__ == "PyCapsule"
    assert "kclient.record._speedups._C_API" in repr(_speedups._C_API)


def test_a_record_c_api_of_another_version_fails_the_import_naming_both() -> None:
    """The record module swapped for one whose capsule says version 999: the sender's
    module refuses it with ImportError (not a crash, not a half-working module)."""
    script = """
import ctypes, importlib, sys, types
import kclient.record
version = ctypes.c_int(999)
name = b"kclient.record._speedups._C_API"
new = ctypes.pythonapi.PyCapsule_New
new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
fake = types.ModuleType("kclient.record._speedups")
fake._C_API = new(ctypes.addressof(version), name, None)
sys.modules["kclient.record._speedups"] = fake
try:
    importlib.import_module("kclient.sender._speedups")
except ImportError as exc:
    print(exc)
"""
    out = run(script, pure="1").stdout
    assert "kclient.record._speedups._C_API is version 999" in out
    assert "needs version 1" in out


@pytest.mark.parametrize(
    ("swap", "named"),
    [
        ("sys.modules['kclient.record._speedups'] = types.ModuleType('x')", "record"),
        ("sys.modules['kclient.sender._speedups'] = None", "sender"),
    ],
)
def test_either_module_missing_or_stale_runs_the_pure_python_code(swap: str, named: str) -> None:
    script = f"import sys, types; {swap}; import kclient.record as r; print(r.ACCELERATED)"
    done = run(script)
    assert done.stdout.split() == ["False"]
    assert f"kclient.{named}._speedups" in done.stderr
    assert "not built from these sources" in done.stderr
