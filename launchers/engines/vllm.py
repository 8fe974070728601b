"""vLLM `vllm serve` (flags of 0.33.0: vllm-kernel-selection.md §4-5, engines-launch.md §3)."""

from __future__ import annotations

from advisor.engines.flags import chat_template_args, context_args, no_host_overlap_args, prefix_cache_args
from advisor.engines.vllm import SPEC as VLLM_ENGINE
from advisor.engines.vllm import VLLM_NEEDS_DRAFT, VLLM_SPEC, vllm_speculative_config
from launchers.cluster import ray_steps
from launchers.command import LaunchCommand
from launchers.engines._common import map_value, need_draft, visible_devices
from launchers.versions import Gate, check_removed, require

KV = {"auto": "auto", "bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2",
      "nvfp4": "nvfp4", "q8_0": None, "q4_0": None,
      # engine-native spellings (as a plan recommends them) pass through
      "bfloat16": "bfloat16", "float16": "float16", "fp8": "fp8", "nvfp4_4over6": "nvfp4_4over6",
      "int8_per_token_head": "int8_per_token_head", "int4_per_token_head": "int4_per_token_head",
      "fp8_per_token_head": "fp8_per_token_head"}
SPEC = VLLM_SPEC
NEEDS_DRAFT = VLLM_NEEDS_DRAFT

G_LINEAR = Gate("--linear-backend", since="0.33.0", source="vllm/engine/arg_utils.py:1845@0.33.0",
                hint="older versions choose linear kernels without this flag")
G_MOE = Gate("--moe-backend", since="0.33.0", source="vllm/engine/arg_utils.py:1848@0.33.0",
             hint="older versions used VLLM_USE_FLASHINFER_MOE_* environment variables")
G_NVFP4_KV = Gate("--kv-cache-dtype nvfp4", since="0.33.0", source="vllm/config/cache.py:44-67@0.33.0",
                  hint="use --kv-cache-dtype fp8")
REMOVED = (Gate("--calculate-kv-scales", until="0.33.0", source="PR vllm#49389",
                hint="FP8 KV scales now come from the checkpoint or default to 1.0"),)


def build(s, version, note) -> LaunchCommand:
    argv = ["vllm", "serve", s.model, "--host", s.host, "--port", str(s.port)]
    notes: list[str] = []
    warnings: list[str] = []
    if s.served_model_name:
        argv += ["--served-model-name", s.served_model_name]
    argv += ["--tensor-parallel-size", str(s.tp)]
    if s.pp > 1:
        argv += ["--pipeline-parallel-size", str(s.pp)]
    if s.max_batch is not None:
        argv += ["--max-num-seqs", str(s.max_batch)]
    batched = s.max_batched_tokens or (s.chunked_prefill or None)
    if batched:
        argv += ["--max-num-batched-tokens", str(batched)]
    if s.chunked_prefill == 0:
        notes.append("vLLM always chunks long prefills; the chunk budget is --max-num-batched-tokens")
    if s.memory_share is not None:
        argv += ["--gpu-memory-utilization", f"{s.memory_share:g}"]
    argv += context_args("vllm", s.max_model_len)
    kv = map_value("vllm", "--kv-cache-dtype", s.kv_cache_dtype, KV)
    if kv == "nvfp4":
        require("vllm", version, G_NVFP4_KV)
    argv += ["--kv-cache-dtype", kv]
    if s.speculative:
        draft = need_draft("vllm", s.speculative) if s.speculative.method in NEEDS_DRAFT else s.speculative.draft_model
        argv += ["--speculative-config", vllm_speculative_config(s.speculative.method, s.speculative.draft_tokens,
                                                                 draft)]
    if s.linear_backend:
        require("vllm", version, G_LINEAR)
        argv += ["--linear-backend", s.linear_backend]
    if s.moe_backend:
        require("vllm", version, G_MOE)
        argv += ["--moe-backend", s.moe_backend]
    argv += prefix_cache_args("vllm", s.prefix_caching)
    argv += chat_template_args("vllm", s.chat_template)
    if s.host_overlap is False:
        off = no_host_overlap_args("vllm", version)
        argv += off
        if not off:         # off already: that version's default
            notes.append(f"vLLM before {VLLM_ENGINE.no_host_overlap_since} schedules without overlap by default "
                         "(async_scheduling: bool = False, vllm/config/scheduler.py:133@0.13.0): no flag needed")
    if not s.cuda_graphs:
        argv += ["--enforce-eager"]
        notes.append("--enforce-eager turns off CUDA graphs and torch.compile (vllm/config/model.py:276-283@0.33.0)")
    steps: tuple = ()
    if s.nodes > 1:
        argv += ["--distributed-executor-backend", "ray"]
        steps = ray_steps(s)
        notes.append(f"run the server on the Ray head; TP {s.tp} x PP {s.pp} spans {s.nodes} nodes")
    env = visible_devices(s)
    if s.api_key:
        # The environment, not --api-key: argv is world-readable in the process list (/proc/PID/cmdline),
        # and vLLM logs its non-default args. vLLM reads VLLM_API_KEY when --api-key is unset
        # (vllm/entrypoints/openai/api_server.py: `args.api_key or envs.VLLM_API_KEY`).
        env.append(("VLLM_API_KEY", s.api_key))
        notes.append("the API key goes in VLLM_API_KEY (kept out of the process list); "
                     "it guards /v1 routes only, /health and /metrics stay open")
    check_removed("vllm", version, s.extra_args, REMOVED)
    argv += list(s.extra_args)
    env += list(s.extra_env)
    return LaunchCommand(settings=s, version=version, version_note=note, argv=tuple(argv), env=tuple(env),
                         steps=steps, warnings=tuple(warnings), notes=tuple(notes))
