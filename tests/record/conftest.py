"""Every record test runs twice: with the C accelerator ("c") and with pure Python ("python").

``RecordBatchBuilder(...)`` and ``RecordBatch.records()`` pick their implementation from
``kclient.record._accel.ACCELERATED`` when called, so switching it switches everything a
test builds and reads. The "c" runs are skipped when the extension is not built or
``KCLIENT_PURE_PYTHON`` is set. A module that compares the two itself sets
``COMPARES_IMPLEMENTATIONS = True`` and runs once. Module scope, so that hypothesis tests
take no per-test fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kclient.record import _accel

C_AVAILABLE = _accel.ACCELERATED
IMPLEMENTATIONS = ["c", "python"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "implementation" in metafunc.fixturenames and not getattr(
        metafunc.module, "COMPARES_IMPLEMENTATIONS", False
    ):
        metafunc.parametrize("implementation", IMPLEMENTATIONS, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def implementation(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The implementation this run of the module uses (None: the module picks per call)."""
    name: str | None = getattr(request, "param", None)
    if name is None:
        yield None
        return
    if name == "c" and not C_AVAILABLE:
        pytest.skip("the C accelerator is not built (or KCLIENT_PURE_PYTHON is set)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_accel, "ACCELERATED", name == "c")
        yield name
