"""Whether the C accelerators run the record and append hot paths.

``ACCELERATED`` is true when both extensions were built (``pip install`` compiles them when
a C compiler is there) from these sources — :mod:`kclient.record._speedups` (the record
batch's builder and decoder) and :mod:`kclient.sender._speedups` (the accumulator's
append, which reaches the record module's C through its ``_C_API`` capsule and fails its
import when the two were built from different sources) — and ``KCLIENT_PURE_PYTHON`` is
not set to a non-empty value other than ``0``. Otherwise the pure-Python builder, decoder
and append run: same bytes, same errors, slower. Decided once, at import. Constants only:
any thread.
"""

from __future__ import annotations

import logging
import os

PURE_PYTHON_ENV = "KCLIENT_PURE_PYTHON"

ACCELERATED: bool
if os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("", "0"):
    ACCELERATED = False
else:
    try:
        from kclient.record import _speedups
    except ImportError:  # not built (no compiler at install time), or built for another Python
        ACCELERATED = False
    else:
        # built from older sources (a checkout updated without rebuilding): its RecordsWriter
        # does not read what the Python code hands it, so the pure-Python code runs instead
        _stale = "" if hasattr(_speedups, "_C_API") else "kclient.record._speedups"
        if not _stale:
            try:
                from kclient.sender import _speedups as _sender_speedups  # noqa: F401
            except ImportError as exc:  # not built, or its record C API differs
                _stale = f"kclient.sender._speedups ({exc})"
        ACCELERATED = not _stale
        if _stale:
            logging.getLogger(__name__).warning(
                "%s was not built from these sources; running the pure-Python record and "
                "append code (rebuild: pip install -e . or python setup.py build_ext "
                "--inplace)",
                _stale,
            )
