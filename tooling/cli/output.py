"""Where the ``odradek`` commands print, in a module of its own so that every command module
(tooling/cli/*.py) and the demo can take one without importing the command's main module,
which imports them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO


class Output:
    """Where commands print: stdout for data, stderr for summaries and errors."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err

    def json(self, value: Any) -> None:
        self.out.write(json.dumps(value) + "\n")

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        # Imported here: rich takes a while to import and only tables need it.
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(str(cell) for cell in row))
        console = Console(file=self.out, soft_wrap=True)
        if not console.is_terminal:  # a pipe or a file: whole values, not cut to 80 columns
            console.width = 10_000
        console.print(table)

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
