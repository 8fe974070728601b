"""FastLLM `ftllm server` (flags of 1.9.0 vs the Aug 2026 snapshot 0.1.x, engines-launch.md §2)."""

from __future__ import annotations

from advisor.engines.fastllm import fastllm_speculative_args
from advisor.engines.flags import chat_template_args, context_args, eager_env, prefix_cache_args
from advisor.errors import Unsupported
from launchers.command import LaunchCommand
from launchers.engines._common import map_value, need_draft, visible_devices
from launchers.versions import Gate, require

KV = {"auto": "auto", "bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": None,
      "nvfp4": "fp4_e2m1", "q8_0": None, "q4_0": None,
      "bfloat16": "bfloat16", "float16": "float16", "fp8": "fp8_e4m3", "fp4_e2m1": "fp4_e2m1"}
SRC = "ftllm/util.py@1.9.0"
G_FP4_KV = Gate("--kv_cache_dtype fp4_e2m1", since="1.9.0", source=SRC, hint="use --kv_cache_dtype fp8_e4m3")
G_DFLASH = Gate("--speculative_algorithm dflash / --speculative_num_draft_tokens", since="1.9.0",
                source="ftllm/util.py:1058-1069@1.9.0",
                hint="earlier releases accept only --speculative_algorithm dspark")
FP8_DTYPES = {"fp8", "float8", "fp8_e4m3"}
UNQUANTIZED = {"BF16", "FP16"}


def build(s, version, note) -> LaunchCommand:
    notes, warnings, env = [], [], visible_devices(s)
    if s.nodes > 1 or s.pp > 1:
        raise Unsupported("FastLLM: multi-node / pipeline launch is not generated; "
                          "for a pipeline split use --device cudapp=N by hand")
    if "--tokens" in s.extra_args and (s.max_batch is None or s.max_batch > 1):
        raise Unsupported("FastLLM: --tokens forces concurrency to 1; drop it (or set max batch 1)")
    argv = ["ftllm", "server", s.model, "--host", s.host, "--port", str(s.port)]
    if s.served_model_name:
        argv += ["--model_name", s.served_model_name]
        notes.append("FastLLM checks the model name in each request: clients must send it exactly")
    placed = any(a.split("=", 1)[0] in ("--moe_device", "--device") for a in s.extra_args)
    if s.checkpoint_moe and s.tp <= 1 and not placed:
        warnings.append("MoE checkpoint on one GPU: FastLLM puts the experts on the CPU by default (--moe_device cpu, "
                        "tools/fastllm_pytools/util.py:818-826@d3aea32), so they run at CPU speed; when they fit in "
                        "GPU memory add --extra-arg=--moe_device --extra-arg=cuda")
    if s.tp > 1:
        argv += ["--tp", str(s.tp)]
        if (s.checkpoint_scheme or "").upper() == "W4A16-INT4":
            warnings.append("FastLLM's INT4 group kernel is single-GPU only: with --tp it falls back to the "
                            "CPU silently (GPU ~0 %, one core busy); serve INT4 on one GPU")
    if s.weight_dtype:
        argv += ["--dtype", s.weight_dtype]
        if s.weight_dtype.lower() in FP8_DTYPES and (s.checkpoint_scheme or "").upper() in UNQUANTIZED:
            warnings.append(f"--dtype {s.weight_dtype} on a {s.checkpoint_scheme} checkpoint does not convert it: "
                            "FastLLM loads FP16 weights silently; quantize the checkpoint instead")
    if s.max_batch is not None:
        argv += ["--max_batch", str(s.max_batch)]
    kv = map_value("fastllm", "--kv_cache_dtype", s.kv_cache_dtype, KV)
    if kv == "fp4_e2m1":
        require("fastllm", version, G_FP4_KV)
        warnings.append("FastLLM FP4 KV (only Qwen3.5 CUDA and DeepSeek-V4.1) is unpacked on every read: "
                        "slower than FP8 KV under concurrency")
    argv += ["--kv_cache_dtype", kv]
    if s.memory_share is not None:
        argv += ["--gpu_mem_ratio", f"{s.memory_share:g}"]
    if s.chunked_prefill:
        argv += ["--chunked_prefill_size", str(s.chunked_prefill)]
    elif s.chunked_prefill == 0:
        notes.append("FastLLM has no switch to disable chunked prefill; the model default is kept")
    argv += context_args("fastllm", s.max_model_len)
    argv += prefix_cache_args("fastllm", s.prefix_caching)
    if s.speculative:
        sp = s.speculative
        if sp.method not in ("mtp", "dflash", "dspark"):
            raise Unsupported(f"FastLLM has no speculative method {sp.method!r} (mtp, dflash, dspark)")
        if sp.method == "dflash":
            require("fastllm", version, G_DFLASH)
        draft = need_draft("fastllm", sp) if sp.method in ("dflash", "dspark") else None
        argv += fastllm_speculative_args(sp.method, sp.draft_tokens, draft) or []
        if sp.method == "dflash":
            notes.append(f"--speculative_num_draft_tokens is the DFlash block incl. the anchor: "
                         f"{sp.draft_tokens} drafted + 1; the draft must be a DFlash2DraftModel for a Qwen3.5 target")
    argv += chat_template_args("fastllm", s.chat_template)
    if s.api_key:
        argv += ["--api_key", s.api_key]
        notes.append("the API key is passed on the command line: other users of this machine can see it "
                     "in the process list")
    if not s.cuda_graphs:
        env += eager_env("fastllm")
    argv += ["--startup-progress", "ndjson"]
    notes.append("stdin must be /dev/null: on a fatal error FastLLM prints 'FastLLM Error:' and waits for a key, "
                 "then exits 0 (judge readiness by /v1/models, not the exit code)")
    argv += list(s.extra_args)
    env += list(s.extra_env)
    return LaunchCommand(settings=s, version=version, version_note=note, argv=tuple(argv), env=tuple(env),
                         warnings=tuple(warnings), notes=tuple(notes))
