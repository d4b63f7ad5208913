"""Whether the C accelerator (:mod:`kclient.record._speedups`) runs the record hot paths.

``ACCELERATED`` is true when the extension was built (``pip install`` compiles it when a C
compiler is there) from these sources and ``KCLIENT_PURE_PYTHON`` is not set to a
non-empty value other than ``0``. Otherwise the pure-Python builder and decoder run: same
bytes, same errors, slower. Decided once, at import. Constants only: any thread.
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
        ACCELERATED = hasattr(_speedups, "BatchFields")
        if not ACCELERATED:
            logging.getLogger(__name__).warning(
                "kclient.record._speedups was built from older sources; running the "
                "pure-Python record code (rebuild: pip install -e . or python setup.py "
                "build_ext --inplace)"
            )
