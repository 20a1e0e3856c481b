"""Which implementation of the message-set hot paths is in use: the optional C accelerator
(``protocol._speedups``, built by the install where a C compiler is at hand) or the pure-Python
code it stands in for, which stays as the fallback and does exactly the same.

``ODRADEK_PURE_PYTHON=1`` in the environment forces the fallback. The choice is made once, at
import: protocol.messageset, protocol.entry_scan and protocol.record_batch bind the chosen
functions to their names.
"""

from __future__ import annotations

import os
from types import ModuleType

native: ModuleType | None = None
if os.environ.get("ODRADEK_PURE_PYTHON") != "1":
    try:
        from protocol import _speedups as native
    except ImportError:  # not built here (no compiler at install time)
        native = None

#: the C accelerator is in use
ACCELERATED: bool = native is not None
#: what the start-up log and the benchmark report say
IMPLEMENTATION: str = "C accelerator" if ACCELERATED else "pure Python"
