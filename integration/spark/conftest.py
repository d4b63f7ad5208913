"""One local[2] SparkSession per test module (starting a JVM takes seconds).

Python workers run ``sys.executable``, so they import kclient from the same venv as the
test process; the session listens on 127.0.0.1 only and is stopped at module teardown.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession


def local_session(app_name: str) -> SparkSession:
    """``local[2]`` with small shuffles and no UI (callers set PYSPARK_PYTHON first)."""
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


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
