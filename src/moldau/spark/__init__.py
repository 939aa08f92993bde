"""Spark integration: the ``moldau`` data source and the example pipelines.

Needs the ``spark`` extra (``pip install 'moldau[spark]'``): pyspark and pyarrow, plus
psycopg for the activity pipeline's PostgreSQL store. Import the data source from
``moldau.spark.datasource``; this package itself imports nothing heavy.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Make ``format("moldau")`` available in ``spark`` (a SparkSession)."""
    from .datasource import MoldauDataSource

    spark.dataSource.register(MoldauDataSource)
