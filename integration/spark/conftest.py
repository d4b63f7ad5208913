"""One local[2] SparkSession per test module (starting a JVM takes seconds).

Python workers run ``sys.executable``, so they import kclient from the same venv as the
test process; the session listens on 127.0.0.1 only and is stopped at module teardown.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from integration.spark.session import local_session


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        session = local_session("kclient-spark-sink-tests")
        try:
            yield session
        finally:
            session.stop()
