"""The optional C accelerator of the message-set hot paths (protocol/_speedups.c).

Everything else is declared in pyproject.toml. ``optional=True``: where it cannot be compiled
(no C compiler, no Python or zlib headers) the install goes on and protocol.speedups falls back
to the pure-Python code.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "protocol._speedups",
            sources=["protocol/_speedups.c"],
            libraries=["z"],
            optional=True,
        )
    ]
)
