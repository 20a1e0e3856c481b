"""Processes on this machine: the ZooKeeper and broker supervisor behind ``odradek cluster
up/down`` and the cluster tests (cluster.py), and ``odradek demo`` (demo.py)."""
