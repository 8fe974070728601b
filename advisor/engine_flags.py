"""Engine spellings of speculative decoding and eager mode, shared by the plan's recommended flag line
and the launchers (launchers/engines/*), so a plan and `launch --plan` always say the same thing.

Pure: no version gating here (the launchers check versions before calling these)."""

from __future__ import annotations

import json

DRAFT_PLACEHOLDER = "DRAFT_MODEL_PATH"

VLLM_SPEC = {"mtp": "mtp", "eagle": "eagle", "eagle3": "eagle3", "dflash": "dflash", "dspark": "dspark",
             "ngram": "ngram", "draft_model": "draft_model"}
VLLM_NEEDS_DRAFT = {"eagle", "eagle3", "dflash", "dspark", "draft_model"}
SGLANG_SPEC = {"mtp": "NEXTN", "eagle": "EAGLE", "eagle3": "EAGLE3", "dflash": "DFLASH", "dspark": "DSPARK",
               "ngram": "NGRAM", "draft_model": "STANDALONE"}
SGLANG_NEEDS_DRAFT = {"EAGLE", "EAGLE3", "DFLASH", "DSPARK", "STANDALONE"}
SGLANG_BLOCK_DRAFTERS = {"DFLASH", "DSPARK"}   # steps and top-k forced to 1 (speculative_hook.py L338-365)
# SGLang split its CUDA-graph switch per phase in 0.5.23 (srt/arg_groups/fields/exec_.py:606-648@0.5.23).
SGLANG_GRAPH_BACKEND_SINCE = (0, 5, 23)


def spec_method(method: str) -> str:
    """Engine-neutral method name (an MTP head may be called nextn or qwen3_next_mtp)."""
    m = str(method).lower()
    return "mtp" if m.endswith("mtp") or m == "nextn" else m


def vllm_speculative_config(method: str, draft_tokens: int, draft_model: str | None = None) -> str:
    """The JSON value of vLLM's --speculative-config."""
    m = spec_method(method)
    cfg: dict = {"method": VLLM_SPEC[m], "num_speculative_tokens": int(draft_tokens)}
    if draft_model:
        cfg["model"] = draft_model
    return json.dumps(cfg, separators=(",", ":"))


def sglang_speculative_args(method: str, draft_tokens: int, draft_model: str | None = None) -> list[str]:
    """SGLang's speculative flags: all of algorithm, steps, top-k and draft tokens (the auto rule asserts),
    --speculative-num-draft-tokens counting the anchor token."""
    alg = SGLANG_SPEC[spec_method(method)]
    k = int(draft_tokens)
    argv = ["--speculative-algorithm", alg]
    if draft_model:
        argv += ["--speculative-draft-model-path", draft_model]
    steps = 1 if alg in SGLANG_BLOCK_DRAFTERS else k
    return argv + ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(k + 1)]


def fastllm_speculative_args(method: str, draft_tokens: int, draft_model: str | None = None) -> list[str] | None:
    """FastLLM's speculative flags (None: FastLLM has no such method)."""
    m, k = spec_method(method), int(draft_tokens)
    if m == "mtp":
        return ["--mtp", str(k)]
    if m == "dflash":
        return ["--speculative_algorithm", "dflash", "--speculative_draft_model_path", draft_model or DRAFT_PLACEHOLDER,
                "--speculative_num_draft_tokens", str(k + 1)]
    if m == "dspark":
        return ["--speculative_algorithm", "dspark", "--speculative_draft_model_path", draft_model or DRAFT_PLACEHOLDER]
    return None


def needs_draft(engine: str, method: str) -> bool:
    m = spec_method(method)
    if engine == "vllm":
        return m in VLLM_NEEDS_DRAFT
    if engine == "sglang":
        return SGLANG_SPEC.get(m) in SGLANG_NEEDS_DRAFT
    return m in ("dflash", "dspark")


def speculative_args(engine: str, method: str, draft_tokens: int, draft_model: str | None = None) -> list[str]:
    """argv for ``draft_tokens`` drafted tokens of ``method`` on ``engine`` ([] when it has no spelling)."""
    if not draft_tokens:
        return []
    if draft_model is None and needs_draft(engine, method):
        draft_model = DRAFT_PLACEHOLDER
    if engine == "vllm":
        return ["--speculative-config", vllm_speculative_config(method, draft_tokens, draft_model)]
    if engine == "sglang":
        return sglang_speculative_args(method, draft_tokens, draft_model)
    if engine == "fastllm":
        return fastllm_speculative_args(method, draft_tokens, draft_model) or []
    return []


# The longest context one request may have: vLLM refuses to start when one request at this length (default:
# the model's max_position_embeddings) needs more KV cache than the pool holds
# (vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory@0.33.0); SGLang (--context-length,
# srt/arg_groups/fields/model.py L110@0.5.23) and FastLLM (--max_context_length, ftllm/util.py L551@1.9.0)
# cap requests at it.
CONTEXT_FLAG = {"vllm": "--max-model-len", "sglang": "--context-length", "fastllm": "--max_context_length"}


def context_args(engine: str, tokens: int | None) -> list[str]:
    """argv that caps one request's context at ``tokens`` ([] for None or an engine without the flag)."""
    flag = CONTEXT_FLAG.get(engine)
    return [flag, str(int(tokens))] if flag and tokens else []


# The checkpoint's chat template replaced by a file (vllm/entrypoints/common/cli_args.py:86@0.33.0;
# sglang/srt/arg_groups/fields/serving.py:176@0.5.23; ftllm/util.py:1086@1.9.0).
CHAT_TEMPLATE_FLAG = {"vllm": "--chat-template", "sglang": "--chat-template", "fastllm": "--chat_template"}


def chat_template_args(engine: str, path: str | None) -> list[str]:
    flag = CHAT_TEMPLATE_FLAG.get(engine)
    return [flag, str(path)] if flag and path else []


def prefix_cache_args(engine: str, on: bool | None) -> list[str]:
    """Prefix caching made explicit (None: leave the engine default). FastLLM's default depends on the
    model (on for Qwen3.5 and DeepSeek-V4, src/models/qwen3_5.cpp:3645-3650@d3aea32f), so a plan that
    assumed it says so on the line (ftllm/util.py:621-629, 1036@1.9.0)."""
    if on is None:
        return []
    if engine == "fastllm":
        return ["--prefix_cache", "true" if on else "false"]
    if engine == "vllm":
        return ["--enable-prefix-caching" if on else "--no-enable-prefix-caching"]
    if engine == "sglang":
        return [] if on else ["--disable-radix-cache"]
    return []


def draft_quant_env(engine: str, method: str | None, draft_tokens: int, draft_quant: dict) -> list[tuple[str, str]]:
    """The environment that quantizes the draft's head (FastLLM FASTLLM_DRAFT_QUANT=nvfp4_head) when the plan
    costed the draft pass with it."""
    if not method or not draft_tokens or not draft_quant:
        return []
    if spec_method(method) not in (draft_quant.get("methods") or ()):
        return []
    return [(str(draft_quant["env"]), str(draft_quant["value"]))]


def _version(text: str | None) -> tuple[int, ...] | None:
    parts = []
    for p in (text or "").split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def eager_args(engine: str, version: str | None = None) -> list[str]:
    """Flags that turn CUDA graphs off; FastLLM has none (its launcher sets FASTLLM_CUDA_GRAPH=0)."""
    if engine == "vllm":
        return ["--enforce-eager"]
    if engine == "sglang":
        v = _version(version)
        if v is None or v >= SGLANG_GRAPH_BACKEND_SINCE:
            return ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
        return ["--disable-cuda-graph"]
    return []


def eager_env(engine: str) -> list[tuple[str, str]]:
    return [("FASTLLM_CUDA_GRAPH", "0")] if engine == "fastllm" else []


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
