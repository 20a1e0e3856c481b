"""Which source topics a mirror copies, and the name each takes on the target."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from client.errors import ConfigError

#: what a ``--rename`` template may name
_FIELDS = frozenset({"topic", "source"})
_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


@dataclass(frozen=True)
class TopicSelection:
    """``--topics PATTERN`` (a regular expression matched against whole names) or ``--topic T``
    named one by one; internal topics (``__consumer_offsets``) are never mirrored."""

    pattern: re.Pattern[str] | None = None
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, pattern: str | None, names: Sequence[str]) -> TopicSelection:
        if (pattern is None) == (not names):
            raise ConfigError("name the topics to mirror: --topics PATTERN or --topic T ...")
        if pattern is None:
            return cls(names=frozenset(names))
        try:
            return cls(pattern=re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"--topics {pattern!r} is not a regular expression: {exc}") from None

    def select(self, topics: Iterable[str]) -> list[str]:
        if self.pattern is None:
            return sorted(t for t in topics if t in self.names)
        return sorted(t for t in topics if not t.startswith("__") and self.pattern.fullmatch(t))


@dataclass(frozen=True)
class Renaming:
    """``--rename '{source}.{topic}'``: MirrorMaker 2's naming, so that one target can join many
    sources (``us-east.orders``, ``eu-west.orders``) without their topics colliding."""

    template: str = "{topic}"
    source: str | None = None  # --source-alias

    def __post_init__(self) -> None:
        fields = {f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None}
        if "topic" not in fields:
            raise ConfigError(f"--rename {self.template!r} must contain {{topic}}")
        if not fields <= _FIELDS:
            unknown = ", ".join(sorted(fields - _FIELDS))
            raise ConfigError(f"--rename {self.template!r} names {unknown}; it may name only "
                              "{topic} and {source}")
        if "source" in fields and not self.source:
            raise ConfigError(f"--rename {self.template!r} uses {{source}}: give --source-alias")

    def target_topic(self, topic: str) -> str:
        name = self.template.format(topic=topic, source=self.source)
        if not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
            raise ConfigError(f"--rename {self.template!r} makes topic {topic!r} into "
                              f"{name!r}, which is not a legal topic name")
        return name
