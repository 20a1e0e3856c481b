"""Thin, synchronous, single-threaded clients: Consumer, Producer, Admin and the ``odradek`` CLI.

Imports ``protocol`` only -- never ``broker`` or ``coordinator`` -- so it is exactly what a user
of another machine runs.
"""
