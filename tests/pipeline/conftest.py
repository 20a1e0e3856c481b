"""Fixtures for the pipeline tests: one local SparkSession for the whole run (starting Spark
takes seconds), skipped with its reason when there is no Java to run it on."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pipeline.session import local_session


def _java_missing() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return False
    return shutil.which("java") is None


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if _java_missing():
        pytest.skip(
            "Java is not installed: PySpark needs a JVM (set JAVA_HOME or put java on PATH)"
        )
    session = local_session("odradek-tests", master="local[2]", shuffle_partitions=2)
    try:
        yield session
    finally:
        session.stop()
