"""Example Spark jobs, each runnable as ``python -m pipeline.jobs.<name> --help``."""
