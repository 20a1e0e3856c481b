"""Which client connection a request came on, and who it is: the principal its listener's TLS
client certificate or SASL exchange set, ``User:ANONYMOUS`` before (or without) either.

A module of its own so that the security modules, which set and read the principal, and the
broker context, which holds them, need not import each other."""

from __future__ import annotations

import socket
from contextvars import ContextVar
from dataclasses import dataclass

import trio

#: Who a connection is before (or without) authentication, as Kafka names it.
ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class ClientConnection:
    id: int
    host: str
    #: The connection's socket, for ``peer_closed``; None where there is none to watch.
    socket: trio.socket.SocketType | None = None
    #: The authenticated principal (``User:NAME``): set by the listener's TLS client
    #: certificate or SASL exchange; the authorizer and quotas read it.
    principal: str = ANONYMOUS
    #: The name of the listener the connection came in on (``PLAINTEXT``, ``SASL_SSL``, ...).
    listener: str = "PLAINTEXT"
    #: The client id of the connection's latest request header (quotas are per client id).
    client_id: str | None = None

    async def peer_closed(self) -> None:
        """Return once the peer has closed its end (EOF or a socket error); never, if there is
        no socket or the peer sends bytes first -- a pipelining client's next request is
        readability too, and the EOF behind it is not visible until that request is read.
        Only for a request's handler: the connection is not reading then (seed 001)."""
        if self.socket is not None:
            try:
                if await self.socket.recv(1, socket.MSG_PEEK):
                    await trio.sleep_forever()
            except OSError:
                pass
            return
        await trio.sleep_forever()


#: Set by each connection's task for its own requests (trio gives every task its own copy of
#: the context): group requests need the connection to tell the coordinator when it closes.
CLIENT_CONNECTION: ContextVar[ClientConnection | None] = ContextVar(
    "client_connection", default=None
)
