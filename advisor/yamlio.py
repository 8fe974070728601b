"""YAML loading through libyaml when available (about 5-8x faster than the pure-Python loader):
profiles are read on every cold start, so this is on the critical path of `--help`-to-answer."""

from __future__ import annotations

from typing import Any


def safe_load(text_or_stream: Any) -> Any:
    import yaml

    return yaml.load(text_or_stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loader
