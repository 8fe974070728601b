"""Version choice for versioned engine data (rule files, engine memory profiles): one nearest-older rule.

Files are named <engine>-<version>.yaml; a version without its own file uses the nearest older one and
says so in a note. File names only: no yaml, no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from advisor.errors import BadInput, UsageError


def version_key(v: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        raise UsageError(f"engine version {v!r} is not dotted numbers (e.g. 0.33 or 0.33.1)") from None


def file_versions(engine: str, folder: Path) -> list[str]:
    """The versions of ``engine``'s files in ``folder``, oldest first (names that are not dotted numbers
    are not versions: skipped)."""
    out = (p.stem[len(engine) + 1:] for p in folder.glob(f"{engine}-*.yaml"))
    return sorted((v for v in out if v and all(x.isdigit() for x in v.split("."))), key=version_key)


@dataclass(frozen=True)
class VersionedData:
    """How one kind of versioned file is worded in notes and errors."""

    what: str                 # "rules": "no rules for vllm 0.40; using 0.33 (nearest older)"
    missing: str              # "no rule files for {engine}"
    oldest: str               # "the oldest rule file is": "... {oldest} 0.33 (available: ...)"
    same_series: bool = False  # 0.33.0 is served by 0.33 without a note


RULE_FILES = VersionedData("rules", "no rule files for {engine}", "the oldest rule file is")
MEMORY_PROFILES = VersionedData("memory profile", "no memory profile for engine '{engine}'", "the oldest is",
                                same_series=True)


def resolve(kind: VersionedData, engine: str, requested: str | None, versions: list[str],
            folder: Path) -> tuple[str, str]:
    """The file version for ``requested`` (None: the newest) and a note ("" when it is the asked-for one)."""
    if not versions:
        raise BadInput(kind.missing.format(engine=engine), path=str(folder))
    if not requested or requested in versions:
        return requested or versions[-1], ""
    want = version_key(requested)
    if kind.same_series:
        same = [v for v in versions if version_key(v) == want[:len(version_key(v))]]
        if same:
            return same[-1], ""
    older = [v for v in versions if version_key(v) <= want]
    if not older:
        raise UsageError(f"no {kind.what} for {engine} {requested}: {kind.oldest} {versions[0]} "
                         f"(available: {', '.join(versions)})")
    return older[-1], f"no {kind.what} for {engine} {requested}; using {older[-1]} (nearest older)"
