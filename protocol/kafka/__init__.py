"""Kafka's binary protocol, sans-IO: the wire codec of the Kafka-protocol front door.

Generated from declarative schemas (``apis.py``, one table per API with the versions of each
field), for exactly Kafka 0.10.2's API table. Frames carry the same 4-byte length prefix as the
native protocol (``protocol.framing``); this package reads and writes what is inside one.
"""
