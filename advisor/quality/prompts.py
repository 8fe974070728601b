"""The prompt set of `bench --reference-url` (profiles/prompts/quality.yaml, or a user file of the
same shape) as frozen records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from advisor.errors import BadInput

KINDS = ("code", "math", "prose")


@dataclass(frozen=True)
class Prompt:
    kind: str
    text: str


@dataclass(frozen=True)
class PromptSet:
    prompts: tuple[Prompt, ...]
    max_tokens: int
    source: str


def default_path() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "prompts" / "quality.yaml"


def load_prompts(path: str | Path | None = None) -> PromptSet:
    from advisor.yamlio import load_yaml_file

    path = Path(path) if path else default_path()
    data = load_yaml_file(path, "prompt file")
    if not isinstance(data, dict) or not isinstance(data.get("prompts"), list) or not data["prompts"]:
        raise BadInput("expected a mapping with a non-empty 'prompts' list", path=str(path))
    out = []
    for i, p in enumerate(data["prompts"]):
        if not isinstance(p, dict) or not isinstance(p.get("text"), str) or not p["text"].strip():
            raise BadInput(f"prompts[{i}] needs a non-empty 'text'", path=str(path))
        kind = p.get("kind", "prose")
        if not isinstance(kind, str) or not kind.strip():
            raise BadInput(f"prompts[{i}].kind must be a word such as code, math or prose", path=str(path))
        out.append(Prompt(kind.strip(), p["text"]))
    max_tokens = data.get("max_tokens", 64)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= 4096:
        raise BadInput("max_tokens must be a whole number from 1 to 4096", path=str(path))
    return PromptSet(tuple(out), max_tokens, str(path))
