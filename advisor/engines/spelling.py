"""Engine-neutral words the per-engine spellings share (method names, the draft placeholder, flag dicts)."""

from __future__ import annotations

DRAFT_PLACEHOLDER = "DRAFT_MODEL_PATH"


def spec_method(method: str) -> str:
    """Engine-neutral method name (an MTP head may be called nextn or qwen3_next_mtp)."""
    m = str(method).lower()
    return "mtp" if m.endswith("mtp") or m == "nextn" else m


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'0.5.23rc1' -> (0, 5, 23); None when it starts with no number."""
    parts = []
    for p in (text or "").split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def as_flag_dict(argv: list[str]) -> dict[str, str]:
    """["--a", "1", "--b"] -> {"--a": "1", "--b": ""} (the plan's flag -> value form)."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        key = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[key] = argv[i + 1]
            i += 2
        else:
            out[key] = ""
            i += 1
    return out
