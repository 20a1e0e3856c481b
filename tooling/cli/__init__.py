"""The ``odradek`` command: ``main`` and the parser in tooling/cli/main.py, one module per group
of subcommands (topics, produce, consume, groups, cluster, acls, quotas, users, records,
console), their shared options in args.py and where they print in output.py. ``python -m
tooling.cli`` runs it as the installed ``odradek`` script does."""
