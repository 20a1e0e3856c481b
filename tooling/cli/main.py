"""The ``odradek`` command line: the parser, put together from the modules of each family of
commands beside (topics.py, produce.py, consume.py, groups.py, cluster.py ...), and ``main``,
which runs the command asked for.

``odradek broker ...`` and ``odradek log ...`` replace this process with ``python -m broker``
and ``python -m broker.log.dump`` (same PID, so whoever started it can stop it), so the other
commands never load the broker's code. Every other command talks to brokers over the wire.

Expected failures (a broker that cannot be reached, a topic that does not exist, a bad setting)
print one line naming what went wrong and exit 1 -- no traceback. Human output uses rich
tables; ``--json`` prints JSON for scripts (one object per record for ``consume``). SIGTERM
stops a command as Ctrl-C does, cleanly (tooling/cli/signals.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from protocol.errors import OdradekError
from tooling.cli.acls import add_acls_parser
from tooling.cli.args import client_options, json_option
from tooling.cli.cluster import add_cluster_parser
from tooling.cli.console import add_console_parser
from tooling.cli.consume import add_consume_parser
from tooling.cli.groups import add_groups_parser
from tooling.cli.mirror import add_mirror_parser
from tooling.cli.output import Output
from tooling.cli.produce import add_produce_parser
from tooling.cli.quotas import add_quotas_parser
from tooling.cli.records import add_records_parser
from tooling.cli.signals import Interrupted, signals_interrupt
from tooling.cli.topics import add_topics_parser
from tooling.cli.users import add_users_parser
from tooling.local.demo import add_demo_parser

_PASSTHROUGH = {"broker": "broker", "log": "broker.log.dump"}


# ------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek",
        description="odradek: a log broker with a broker-side consumer-group coordinator.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    client = client_options()
    json_flag = json_option()

    commands.add_parser(
        "broker",
        add_help=False,
        help="run a broker: `odradek broker start [...]` (try `odradek broker start --help`)",
    )
    commands.add_parser(
        "log",
        add_help=False,
        help="dump log segment and index files: `odradek log dump PATH...` "
        "(try `odradek log dump --help`)",
    )
    add_topics_parser(commands, [client, json_flag])
    add_produce_parser(commands, [client, json_flag])
    add_consume_parser(commands, [client, json_flag])
    add_groups_parser(commands, [client, json_flag])
    add_console_parser(commands, client.get_default("bootstrap"))
    add_cluster_parser(commands, json_flag)
    add_records_parser(commands, [client, json_flag])
    add_acls_parser(commands, [client, json_flag])
    add_quotas_parser(commands, [client, json_flag])
    add_users_parser(commands, [client, json_flag])
    add_mirror_parser(commands, [json_flag])
    add_demo_parser(commands)
    return parser


# -------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in _PASSTHROUGH:
        module = _PASSTHROUGH[args_list[0]]
        rest = args_list[1:]
        if args_list[0] == "log" and rest[:1] == ["dump"]:
            rest = rest[1:]  # ``odradek log dump PATH``: the module's own name for itself
        os.execv(sys.executable, [sys.executable, "-m", module, *rest])
    args = build_parser().parse_args(args_list)
    output = Output(sys.stdout, sys.stderr)
    try:
        with signals_interrupt():  # SIGTERM cleans up as Ctrl-C does (tooling/cli/signals.py)
            code: int = args.run(args, output)
        return code
    except OdradekError as exc:
        output.note(f"odradek: error: {exc or type(exc).__name__}")
        return 1
    except KeyboardInterrupt as exc:  # 130 for Ctrl-C, 143 for SIGTERM
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as shell tools do.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
