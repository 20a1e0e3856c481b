"""The wire protocol, sans-IO: frames, the API registry, error codes and the message-set codec.

Pure functions and dataclasses only -- no sockets, no trio, no files -- so every other package
(and a client in another language, through docs/protocol.md) can rely on one definition.
"""
