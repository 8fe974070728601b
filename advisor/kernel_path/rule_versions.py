"""Which engine rule files exist and which version a request resolves to: file names only.

Kept apart from advisor.kernel_path.rules (the pydantic schema) so that listing engines and versions
(the TUI's engine picker, `plan --engine` checks before any work) imports neither pydantic nor yaml.
The engines are the registry's tuned ones; the nearest-older choice is advisor.engines.versions'.
"""

from __future__ import annotations

from pathlib import Path

from advisor import engines
from advisor.engines.versions import RULE_FILES, file_versions, resolve, version_key
from advisor.errors import UsageError

ENGINES = engines.tuned()
_version_key = version_key


def engines_dir() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "engines"


def available_versions(engine: str, folder: Path | None = None) -> list[str]:
    spec = engines.find(engine)
    return file_versions(spec.rule_family if spec and spec.rule_family else engine, folder or engines_dir())


def parse_engine_spec(spec: str) -> tuple[str, str | None]:
    """'vllm' -> ('vllm', None); 'vllm@0.33.1' -> ('vllm', '0.33.1')."""
    name, _, version = spec.partition("@")
    name = name.strip().lower()
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    return name, (version.strip() or None)


def resolve_version(engine: str, requested: str | None, folder: Path | None = None) -> tuple[str, str | None]:
    """The rule-file version to use and a note when it is not the one asked for."""
    folder = folder or engines_dir()
    chosen, note = resolve(RULE_FILES, engine, requested, available_versions(engine, folder), folder)
    return chosen, note or None
