"""FastLLM: its spellings of speculative decoding and prefix caching, its readiness quirks, and its EngineSpec."""

from __future__ import annotations

from advisor.engines import log_signatures
from advisor.engines.spec import EngineSpec
from advisor.engines.spelling import DRAFT_PLACEHOLDER, spec_method


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


def _speculative(method: str, draft_tokens: int, draft_model: str | None) -> list[str]:
    return fastllm_speculative_args(method, draft_tokens, draft_model) or []


def _prefix_cache(on: bool) -> list[str]:
    """Its default depends on the model (on for Qwen3.5 and DeepSeek-V4, src/models/qwen3_5.cpp:3645-3650@d3aea32f),
    so a plan that assumed it says so on the line (ftllm/util.py:621-629, 1036@1.9.0)."""
    return ["--prefix_cache", "true" if on else "false"]


SPEC = EngineSpec(
    name="fastllm", label="FastLLM", launcher="launchers.engines.fastllm",
    rule_family="fastllm", memory_family="fastllm", env_prefixes=("FASTLLM_",),
    tp_flag="--tp", tp_flag_from=2,
    # ftllm/util.py L551@1.9.0; ftllm/util.py:1086@1.9.0
    context_flag="--max_context_length", chat_template_flag="--chat_template",
    speculative=_speculative, prefix_cache=_prefix_cache, plan_states_prefix_cache=True,
    allreduce="nccl", allreduce_source="src/devices/multicuda/fastllm-multicuda.cu:3098@d3aea32f (ncclAllReduce)",
    eager_env=(("FASTLLM_CUDA_GRAPH", "0"),),   # no flag turns CUDA graphs off
    # field-notes §2: measured on FastLLM, its FP4 KV is slower than FP8 KV under concurrency
    four_bit_kv_warning="4-bit KV cache is unpacked on every attention read: on FastLLM it was measured "
                        "slower than FP8 KV under concurrency; it buys pool size, not speed",
    # ftllm/startup_progress.py prints this event once serving; fatal errors exit 0 (include/utils/utils.h:99-104)
    ready_event='"startup.ready"', exits_zero_on_failure=True,
    executables=("ftllm",), distributions=("ftllm", "fastllm"), reference_version="1.9.0",
    log_signatures=log_signatures.FASTLLM,
)
