"""vLLM: its spellings of speculative decoding, prefix caching and eager mode, and its EngineSpec."""

from __future__ import annotations

import json

from advisor.engines import log_signatures
from advisor.engines.spec import EngineSpec
from advisor.engines.spelling import spec_method

VLLM_SPEC = {"mtp": "mtp", "eagle": "eagle", "eagle3": "eagle3", "dflash": "dflash", "dspark": "dspark",
             "ngram": "ngram", "draft_model": "draft_model"}
VLLM_NEEDS_DRAFT = {"eagle", "eagle3", "dflash", "dspark", "draft_model"}


def vllm_speculative_config(method: str, draft_tokens: int, draft_model: str | None = None) -> str:
    """The JSON value of vLLM's --speculative-config."""
    m = spec_method(method)
    cfg: dict = {"method": VLLM_SPEC[m], "num_speculative_tokens": int(draft_tokens)}
    if draft_model:
        cfg["model"] = draft_model
    return json.dumps(cfg, separators=(",", ":"))


def _speculative(method: str, draft_tokens: int, draft_model: str | None) -> list[str]:
    return ["--speculative-config", vllm_speculative_config(method, draft_tokens, draft_model)]


def _prefix_cache(on: bool) -> list[str]:
    return ["--enable-prefix-caching" if on else "--no-enable-prefix-caching"]


SPEC = EngineSpec(
    name="vllm", label="vLLM", launcher="launchers.engines.vllm",
    rule_family="vllm", memory_family="vllm", env_prefixes=("VLLM_",),
    tp_flag="--tensor-parallel-size",
    # one request longer than the KV pool holds stops start-up (kv_cache_utils.py,
    # _check_enough_kv_cache_memory@0.33.0); the chat template: entrypoints/common/cli_args.py:86@0.33.0
    context_flag="--max-model-len", chat_template_flag="--chat-template",
    speculative=_speculative, needs_draft=lambda m: m in VLLM_NEEDS_DRAFT,
    prefix_cache=_prefix_cache, eager=lambda _version: ["--enforce-eager"],
    # async scheduling on by default, and --no-async-scheduling to turn it off, from 0.14.0
    # (vllm/config/scheduler.py:133@0.13.0: async_scheduling: bool = False)
    no_host_overlap=("--no-async-scheduling",), no_host_overlap_since="0.14.0",
    no_host_overlap_source="vllm/config/vllm.py:588-620@0.14.0",
    executables=("vllm",), distributions=("vllm",), reference_version="0.33.0", version_flag=True,
    log_signatures=log_signatures.VLLM,
)
