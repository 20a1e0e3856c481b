"""Spark pipelines: the ``odradek`` PySpark data source, built on ``client``.

One call makes the format available in a session::

    import pipeline
    pipeline.register(spark)
    df = spark.read.format("odradek").option("bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "events").load()

Options and columns are those of Spark's Kafka source; see docs/pipelines.md.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from pipeline.source import OdradekDataSource

__all__ = ["OdradekDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``odradek`` format with ``spark`` (once per session)."""
    spark.dataSource.register(OdradekDataSource)
