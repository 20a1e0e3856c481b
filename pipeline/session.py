"""A local SparkSession set up for odradek: the example jobs, tests and benchmark use it.

Spark's Python workers must run this very interpreter (the one with pyarrow and odradek
installed), not whatever ``python3`` is first on the PATH, so ``PYSPARK_PYTHON`` defaults to it.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from pipeline import register


def local_session(
    app_name: str, *, master: str = "local[2]", shuffle_partitions: int = 4
) -> SparkSession:
    """Start (or reuse) a SparkSession on this machine with the ``odradek`` format registered:
    no web UI, bound to loopback, few shuffle partitions (small jobs, few cores)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
