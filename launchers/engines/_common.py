"""Small helpers shared by the per-engine generators."""

from __future__ import annotations

from advisor.errors import Unsupported, UsageError


def map_value(engine: str, what: str, value: str, table: dict[str, str | None]) -> str:
    """Engine spelling of an engine-neutral value; refuse values the engine has no spelling for."""
    mapped = table.get(value)
    if mapped is None:
        ok = ", ".join(k for k, v in table.items() if v is not None)
        # a name no engine knows is a typo (exit 2, as plan/explain); a known one this engine lacks: exit 4
        error = UsageError if value not in table else Unsupported
        raise error(f"{engine} has no {what} {value!r} (supported here: {ok})")
    return mapped


def need_draft(engine: str, spec) -> str:
    if not spec.draft_model:
        raise UsageError(f"{engine}: speculative method {spec.method} needs a draft model (--draft-model)")
    return spec.draft_model


def visible_devices(settings) -> list[tuple[str, str]]:
    if settings.cuda_devices:
        return [("CUDA_VISIBLE_DEVICES", ",".join(str(d) for d in settings.cuda_devices))]
    return []
