"""Formats the kernel rules do not serve (EXL2, MLX, GGUF, ...): which engines load them at all, from
profiles/quant_formats.yaml (each engine's own list of quantization methods, with its source line).

One answer for every engine: explain's no-rule path asks here before saying "unknown to the advisor".
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _table() -> dict:
    from advisor.yamlio import load_yaml_file
    from profiles import PROFILES_DIR

    data = load_yaml_file(PROFILES_DIR / "quant_formats.yaml", "quantization formats file")
    return data if isinstance(data, dict) else {}


def foreign_reason(scheme: str, engine: str, display_name: str) -> str | None:
    """One line for a layer whose scheme is a format without kernel rules; None for any other scheme."""
    fmt = (_table().get("formats") or {}).get(scheme)
    if not isinstance(fmt, dict):
        return None
    lists = (_table().get("engine_lists") or {}).get(engine) or {}
    loads = (fmt.get("loads") or {}).get(engine)
    others = fmt.get("runtimes") or "other runtimes"
    method = fmt.get("method")
    if loads is False:
        return (f"{display_name} does not load {scheme} checkpoints: quant_method {method!r} is not in its list of "
                f"quantization methods ({lists.get('source', 'its source')}) and it refuses the model at start-up "
                f"({lists.get('refusal', '')}); {scheme} runs on {others}")
    if loads is True:
        return (f"{display_name} lists {method!r} among its quantization methods ({lists.get('source', '')}), but "
                f"the advisor has no kernel rules for {scheme}; {scheme} also runs on {others}")
    if scheme == "UNKNOWN":
        return ("the checkpoint's quantization format is unknown to the advisor, so whether "
                f"{display_name} loads it cannot be said; it was made for {others}")
    return f"whether {display_name} loads {scheme} is not known to the advisor; {scheme} runs on {others}"
