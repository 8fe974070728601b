"""Engine spellings of settings, shared by the plan's recommended flag line and the launchers
(launchers/engines/*), so a plan and `launch --plan` always say the same thing. Each function looks the
engine up in the registry; an engine without the spelling gets [].

Pure: no version gating here (the launchers check versions before calling these)."""

from __future__ import annotations

from advisor.engines.registry import find
from advisor.engines.spelling import DRAFT_PLACEHOLDER, as_flag_dict, spec_method  # noqa: F401 - one import place
from advisor.engines.spelling import version_tuple


def needs_draft(engine: str, method: str) -> bool:
    spec = find(engine)
    m = spec_method(method)
    return spec.needs_draft(m) if spec else m in ("dflash", "dspark")


def speculative_args(engine: str, method: str, draft_tokens: int, draft_model: str | None = None) -> list[str]:
    """argv for ``draft_tokens`` drafted tokens of ``method`` on ``engine`` ([] when it has no spelling)."""
    spec = find(engine)
    if not draft_tokens or spec is None:
        return []
    if draft_model is None and needs_draft(engine, method):
        draft_model = DRAFT_PLACEHOLDER
    return spec.speculative(method, draft_tokens, draft_model)


def context_args(engine: str, tokens: int | None) -> list[str]:
    """argv that caps one request's context at ``tokens`` ([] for None or an engine without the flag)."""
    flag = spec.context_flag if (spec := find(engine)) else ""
    return [flag, str(int(tokens))] if flag and tokens else []


def chat_template_args(engine: str, path: str | None) -> list[str]:
    """The checkpoint's chat template replaced by a file."""
    flag = spec.chat_template_flag if (spec := find(engine)) else ""
    return [flag, str(path)] if flag and path else []


def prefix_cache_args(engine: str, on: bool | None) -> list[str]:
    """Prefix caching made explicit (None: leave the engine default)."""
    spec = find(engine)
    return spec.prefix_cache(on) if spec and on is not None else []


def eager_args(engine: str, version: str | None = None) -> list[str]:
    """Flags that turn CUDA graphs off (FastLLM has none: see eager_env)."""
    spec = find(engine)
    return spec.eager(version) if spec else []


def no_host_overlap_args(engine: str, version: str | None = None) -> list[str]:
    """Flags that make the engine finish each step's host work before the next GPU step (vLLM
    --no-async-scheduling, SGLang --disable-overlap-schedule); [] where there is none, or where
    ``version`` predates them (it schedules without overlap by default there)."""
    spec = find(engine)
    if spec is None:
        return []
    v, since = version_tuple(version), version_tuple(spec.no_host_overlap_since)
    return [] if v and since and v < since else list(spec.no_host_overlap)


def eager_env(engine: str) -> list[tuple[str, str]]:
    spec = find(engine)
    return list(spec.eager_env) if spec else []


def tp_args(engine: str, tp: int) -> list[str]:
    """The tensor-parallel flag as the launcher passes it ([] below the engine's tp_flag_from)."""
    spec = find(engine)
    flag, since = (spec.tp_flag, spec.tp_flag_from) if spec else ("--tp", 1)
    return [flag, str(tp)] if tp >= since else []


def draft_quant_env(engine: str, method: str | None, draft_tokens: int, draft_quant: dict) -> list[tuple[str, str]]:
    """The environment that quantizes the draft's head (FastLLM FASTLLM_DRAFT_QUANT=nvfp4_head) when the plan
    costed the draft pass with it (the variable comes from the engine memory profile)."""
    if not method or not draft_tokens or not draft_quant:
        return []
    if spec_method(method) not in (draft_quant.get("methods") or ()):
        return []
    return [(str(draft_quant["env"]), str(draft_quant["value"]))]
