"""``python -m tooling.cli``: the ``odradek`` command."""

import sys

from tooling.cli.main import main

sys.exit(main())
