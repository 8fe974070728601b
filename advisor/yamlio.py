"""Reading the YAML profiles: libyaml when available (5-8x faster than the pure-Python loader;
profiles are read on every cold start) and one error wording for every profile file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.errors import BadInput


def safe_load(text_or_stream: Any) -> Any:
    import yaml

    return yaml.load(text_or_stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loader


def parse_yaml(text: str, path: str, what: str) -> Any:
    """Parse profile text; a syntax error is one BadInput line naming the file and the line."""
    import yaml

    try:
        return safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise BadInput(f"{what} is not valid YAML{at}: {problem}", path=path) from None


def load_yaml_file(path: str | Path, what: str) -> Any:
    """Read and parse a profile file (``what`` names it in errors, e.g. "workloads file")."""
    from advisor.profile_cache import parsed
    from advisor.textfile import JSON_LIMIT, read_text

    text = read_text(path, limit_bytes=JSON_LIMIT, what=what)      # FIFO, device, huge: one BadInput line
    return parsed(text, lambda: parse_yaml(text, str(path), what))   # the same text parsed before: from the cache
