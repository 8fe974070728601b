"""Which engine rule files exist and which version a request resolves to: file names only.

Kept apart from advisor.kernel_path.rules (the pydantic schema) so that listing engines and versions
(the TUI's engine picker, `plan --engine` checks before any work) imports neither pydantic nor yaml.
"""

from __future__ import annotations

from pathlib import Path

from advisor.errors import BadInput, UsageError

ENGINES = ("vllm", "sglang", "fastllm")


def engines_dir() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "engines"


def _version_key(v: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError as err:
        raise UsageError(f"engine version {v!r} is not dotted numbers (e.g. 0.33 or 0.33.1)") from err


def available_versions(engine: str, folder: Path | None = None) -> list[str]:
    folder = folder or engines_dir()
    out = []
    for p in folder.glob(f"{engine}-*.yaml"):
        out.append(p.stem[len(engine) + 1:])
    return sorted(out, key=_version_key)


def parse_engine_spec(spec: str) -> tuple[str, str | None]:
    """'vllm' -> ('vllm', None); 'vllm@0.33.1' -> ('vllm', '0.33.1')."""
    name, _, version = spec.partition("@")
    name = name.strip().lower()
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    return name, (version.strip() or None)


def resolve_version(engine: str, requested: str | None, folder: Path | None = None) -> tuple[str, str | None]:
    """The rule-file version to use and a note when it is not the one asked for."""
    versions = available_versions(engine, folder)
    if not versions:
        raise BadInput(f"no rule files for {engine}", path=str(folder or engines_dir()))
    if requested is None:
        return versions[-1], None
    if requested in versions:
        return requested, None
    want = _version_key(requested)
    older = [v for v in versions if _version_key(v) <= want]
    if not older:
        raise UsageError(f"no rules for {engine} {requested}: the oldest rule file is {versions[0]} "
                         f"(available: {', '.join(versions)})")
    chosen = older[-1]
    return chosen, f"no rules for {engine} {requested}; using {chosen} (nearest older)"
