"""SGLang `sglang serve` (flags of 0.5.23; boundaries from the 0.5.10/0.5.13/0.5.16 wheels,
engines-launch.md §1)."""

from __future__ import annotations

from advisor.engines.flags import chat_template_args, context_args, no_host_overlap_args, prefix_cache_args
from advisor.engines.sglang import SGLANG_BLOCK_DRAFTERS, SGLANG_NEEDS_DRAFT, SGLANG_SPEC, sglang_speculative_args
from advisor.errors import Unsupported
from launchers.command import LaunchCommand
from launchers.engines._common import map_value, need_draft, visible_devices
from launchers.versions import Gate, check_removed, parse, require

KV = {"auto": "auto", "bf16": "bf16", "fp16": None, "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
      "nvfp4": "nvfp4", "q8_0": None, "q4_0": None, "bfloat16": "bfloat16", "fp4_mx_block16": "fp4_mx_block16"}
SPEC = SGLANG_SPEC
NEEDS_DRAFT = SGLANG_NEEDS_DRAFT
BLOCK_DRAFTERS = SGLANG_BLOCK_DRAFTERS   # steps and top-k forced to 1 (speculative_hook.py L338-365)

G_SERVE = Gate("`sglang serve` entry point", since="0.5.23", source="sglang/launch_server.py:70-76@0.5.23")
G_NVFP4_KV = Gate("--kv-cache-dtype nvfp4", since="0.5.23", source="srt/arg_groups/fields/model.py:197-221@0.5.23",
                  hint="0.5.10/0.5.13 offer only fp4_e2m1 (MXFP4); use fp8_e4m3")
G_DFLASH = Gate("--speculative-algorithm DFLASH", since="0.5.13", source="srt/arg_groups/fields/spec.py:31")
G_DSPARK = Gate("--speculative-algorithm DSPARK", since="0.5.23", source="srt/arg_groups/fields/spec.py:31@0.5.23")
# The decode/prefill split of the CUDA-graph batch flag: absent in 0.5.13, present in 0.5.16.
NEW_GRAPH_FLAGS = "0.5.16"
G_GRAPH_BACKEND = Gate("--cuda-graph-backend-decode", since="0.5.23",
                       source="srt/arg_groups/fields/exec_.py:606-648@0.5.23")
REMOVED = (
    Gate("--cuda-graph-max-bs", until=NEW_GRAPH_FLAGS, source="cuda_graph_max_bs field absent in 0.5.16 and 0.5.23",
         hint="use --cuda-graph-max-bs-decode (argparse otherwise exits 2: 'ambiguous option')"),
)


def build(s, version, note) -> LaunchCommand:
    notes, warnings = [], []
    if s.nodes > 1:
        raise Unsupported("multi-node launch is generated for vLLM (Ray executor) only; "
                          "SGLang uses --nnodes/--node-rank/--dist-init-addr on each node")
    if G_SERVE.allows(version):
        argv = ["sglang", "serve"]
    else:
        argv = ["python", "-m", "sglang.launch_server"]
    argv += ["--model-path", s.model, "--host", s.host, "--port", str(s.port)]
    if s.served_model_name:
        argv += ["--served-model-name", s.served_model_name]
    argv += ["--tp-size", str(s.tp)]
    if s.pp > 1:
        argv += ["--pp-size", str(s.pp)]
    kv = map_value("sglang", "--kv-cache-dtype", s.kv_cache_dtype, KV)
    if kv == "nvfp4":
        require("sglang", version, G_NVFP4_KV)
        notes.append("NVFP4 KV needs CUDA 12.8+ and PyTorch 2.8+ (SGLang help text)")
    argv += ["--kv-cache-dtype", kv]
    if s.max_batch is not None:
        argv += ["--max-running-requests", str(s.max_batch)]
    if s.memory_share is not None:
        argv += ["--mem-fraction-static", f"{s.memory_share:g}"]
    if s.chunked_prefill is not None:
        argv += ["--chunked-prefill-size", str(s.chunked_prefill if s.chunked_prefill > 0 else -1)]
    if s.max_batched_tokens:
        argv += ["--max-prefill-tokens", str(s.max_batched_tokens)]
    argv += context_args("sglang", s.max_model_len)
    new_graph = parse(version) >= parse(NEW_GRAPH_FLAGS) if parse(version) else True
    if s.host_overlap is False:
        argv += no_host_overlap_args("sglang")
    if not s.cuda_graphs:
        if G_GRAPH_BACKEND.allows(version):
            argv += ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
        else:
            argv += ["--disable-cuda-graph"]
    elif s.max_batch is not None:
        argv += ["--cuda-graph-max-bs-decode" if new_graph else "--cuda-graph-max-bs", str(s.max_batch)]
    if s.speculative:
        alg = SPEC[s.speculative.method]
        if alg == "DFLASH":
            require("sglang", version, G_DFLASH)
        if alg == "DSPARK":
            require("sglang", version, G_DSPARK)
        k = s.speculative.draft_tokens
        # All three or none (the auto rule asserts); steps/top-k are 1 for block drafters.
        draft = need_draft("sglang", s.speculative) if alg in NEEDS_DRAFT else None
        argv += sglang_speculative_args(s.speculative.method, k, draft)
        notes.append(f"--speculative-num-draft-tokens counts the anchor token: {k} drafted + 1")
    if s.linear_backend:
        argv += ["--fp4-gemm-backend", s.linear_backend]
    if s.moe_backend:
        argv += ["--moe-runner-backend", s.moe_backend]
    argv += prefix_cache_args("sglang", s.prefix_caching)
    argv += chat_template_args("sglang", s.chat_template)
    if s.api_key:
        argv += ["--api-key", s.api_key]
        notes.append("the API key is passed on the command line: other users of this machine can see it "
                     "in the process list")
    check_removed("sglang", version, s.extra_args, REMOVED)
    if "--enable-dp-attention" in s.extra_args:
        warnings.append("--enable-dp-attention is deprecated; use --attn-dp-size N (server_args.py L420-427)")
    argv += list(s.extra_args)
    env = visible_devices(s) + list(s.extra_env)
    return LaunchCommand(settings=s, version=version, version_note=note, argv=tuple(argv), env=tuple(env),
                         warnings=tuple(warnings), notes=tuple(notes))
