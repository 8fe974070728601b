"""SGLang: its spellings of speculative decoding, the radix cache and eager mode, and its EngineSpec."""

from __future__ import annotations

from advisor.engines import log_signatures
from advisor.engines.spec import EngineSpec
from advisor.engines.spelling import spec_method, version_tuple

SGLANG_SPEC = {"mtp": "NEXTN", "eagle": "EAGLE", "eagle3": "EAGLE3", "dflash": "DFLASH", "dspark": "DSPARK",
               "ngram": "NGRAM", "draft_model": "STANDALONE"}
SGLANG_NEEDS_DRAFT = {"EAGLE", "EAGLE3", "DFLASH", "DSPARK", "STANDALONE"}
SGLANG_BLOCK_DRAFTERS = {"DFLASH", "DSPARK"}   # steps and top-k forced to 1 (speculative_hook.py L338-365)
# SGLang split its CUDA-graph switch per phase in 0.5.23 (srt/arg_groups/fields/exec_.py:606-648@0.5.23).
SGLANG_GRAPH_BACKEND_SINCE = (0, 5, 23)


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


def sglang_eager_args(version: str | None = None) -> list[str]:
    v = version_tuple(version)
    if v is None or v >= SGLANG_GRAPH_BACKEND_SINCE:
        return ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
    return ["--disable-cuda-graph"]


SPEC = EngineSpec(
    name="sglang", label="SGLang", launcher="launchers.engines.sglang",
    rule_family="sglang", memory_family="sglang", env_prefixes=("SGLANG_",),
    tp_flag="--tp-size",
    # srt/arg_groups/fields/model.py L110@0.5.23; srt/arg_groups/fields/serving.py:176@0.5.23
    context_flag="--context-length", chat_template_flag="--chat-template",
    speculative=sglang_speculative_args, needs_draft=lambda m: SGLANG_SPEC.get(m) in SGLANG_NEEDS_DRAFT,
    prefix_cache=lambda on: [] if on else ["--disable-radix-cache"], eager=sglang_eager_args,
    no_host_overlap=("--disable-overlap-schedule",),
    executables=("sglang", "python3", "python"), distributions=("sglang",), reference_version="0.5.23",
    log_signatures=log_signatures.SGLANG,
)
