"""Spark pipelines: the ``odradek`` PySpark data source, built on ``client``."""
