"""The broker: the only package that does server I/O (trio).

It owns the network layer, request handlers, log storage and the driver that feeds the
sans-IO group coordinator with requests and timers and carries out its effects.
"""
