"""The documentation site builds with no warning (Sphinx ``-W -n``, as ``./scripts/docs``),
and its API reference lists every public name of ``kclient``, ``kclient.aio``,
``kclient.spark``, ``kclient.testing``, ``kclient.broker`` and ``kclient.opentelemetry``."""

from __future__ import annotations

import importlib
import posixpath
import subprocess
import sys
from pathlib import Path

import pytest

from integration.docs.blocks import ROOT

PUBLIC = (
    "kclient",
    "kclient.aio",
    "kclient.spark",
    "kclient.testing",
    "kclient.broker",
    "kclient.opentelemetry",
)


@pytest.mark.timeout(600)
def test_the_site_builds_without_warnings_and_documents_every_public_name(
    tmp_path: Path,
) -> None:
    from sphinx.util.inventory import InventoryFile

    out = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-q",
         str(ROOT / "docs"), str(out), "-d", str(tmp_path / "doctrees")],
        capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-5000:]
    assert (out / "index.html").exists()
    with (out / "objects.inv").open("rb") as f:
        inventory = InventoryFile.load(f, "", posixpath.join)
    documented = {name for entries in inventory.values() for name in entries}
    missing = [
        f"{module}.{name}"
        for module in PUBLIC
        for name in importlib.import_module(module).__all__
        if f"{module}.{name}" not in documented
    ]
    assert not missing, f"not in the API reference: {missing}"
    # the configuration reference is the settings table, one row per setting
    from kclient.settings import SETTINGS

    page = (out / "reference" / "configuration.html").read_text()
    assert all(
        f'<code class="docutils literal notranslate"><span class="pre">{s.name}</span>' in page
        for s in SETTINGS
    )
