"""``odradek console --bootstrap HOST:PORT [--listen 127.0.0.1:8080] [--command-config F]``:
serve the web console (tooling/console/app.py) with uvicorn until Ctrl-C.

It prints its address on its first line. No login: it binds 127.0.0.1 by default. It asks the
brokers with a 2 s timeout (``--api-timeout-ms``), so a broker gone shows as "disconnected"
quickly.
"""

from __future__ import annotations

import argparse
import socket

from tooling.cli.args import add_command_config, positive_int, security_options
from tooling.cli.output import Output

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_TIMEOUT_MS = 2_000


def add_console_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], bootstrap: str
) -> None:
    """``bootstrap``: the default of --bootstrap. The console has its own --api-timeout-ms
    (argparse shares a parent parser's option objects, defaults included, among commands)."""
    console = subparsers.add_parser(
        "console",
        help="a read-only web console of the cluster, topics and groups",
        description="Serve a read-only web console: the cluster (brokers, controller), "
        "topics with their partitions, groups, and a live page per group. It has no login: "
        "keep it on 127.0.0.1 (the default) or behind something that authenticates. With "
        "--command-config it logs in to the brokers as that user, and whoever reaches it "
        "sees what that user may describe.",
    )
    console.add_argument("--bootstrap", default=bootstrap, metavar="HOST:PORT[,HOST:PORT...]",
                         help="brokers to contact first (default: %(default)s)")
    console.add_argument("--api-timeout-ms", dest="api_timeout_ms", type=positive_int,
                         default=DEFAULT_TIMEOUT_MS, metavar="MS",
                         help="how long to wait for brokers to answer before the pages say "
                         "disconnected (default: %(default)s)")
    console.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                         help="where to serve it (default: %(default)s; port 0 picks one)")
    add_command_config(console)
    console.set_defaults(run=cmd_console)


def cmd_console(args: argparse.Namespace, output: Output) -> int:
    import uvicorn  # imported here: the other commands need neither it nor Starlette

    from tooling.console.app import make_app
    from tooling.console.data import ConsoleData

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        output.note(f"odradek console: --listen {args.listen!r} is not HOST:PORT")
        return 2
    try:
        sock = socket.create_server((host.strip("[]"), int(port)))
    except OSError as exc:
        output.note(f"odradek console: cannot listen on --listen {args.listen}: {exc}")
        return 1
    bound = sock.getsockname()
    output.out.write(f"odradek console on http://{host}:{bound[1]}/ (read-only, no login)\n")
    output.out.flush()
    data = ConsoleData(args.bootstrap, timeout_ms=args.api_timeout_ms,
                       security=security_options(args))
    try:
        config = uvicorn.Config(make_app(data), log_level="warning", lifespan="off")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        data.close()
        sock.close()
    return 0
