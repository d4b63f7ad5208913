"""The ``spark`` extra installs a pandas that the installed pyspark supports: no
"PySpark does not yet fully support pandas >= 3.0.0" warning on every Spark run."""

from __future__ import annotations

import warnings

from pyspark.sql.pandas.utils import require_minimum_pandas_version


def test_the_spark_extra_resolves_a_pandas_pyspark_supports_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_minimum_pandas_version()  # warns (FutureWarning) for pandas >= 3
