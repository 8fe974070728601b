"""llama.cpp `llama-server` (README at commit 00dc8057, engines-launch.md §4.1)."""

from __future__ import annotations

from advisor.errors import Unsupported
from launchers.command import LaunchCommand
from launchers.engines._common import map_value, need_draft, visible_devices
from launchers.versions import Gate, check_removed

KV = {"auto": "f16", "bf16": "bf16", "fp16": "f16", "q8_0": "q8_0", "q4_0": "q4_0",
      "fp8_e4m3": None, "fp8_e5m2": None, "nvfp4": None}
SPEC_TYPE = {"draft_model": "draft-simple", "eagle3": "draft-eagle3", "mtp": "draft-mtp", "dflash": "draft-dflash",
             "dspark": "draft-dspark", "ngram": "ngram-simple"}
REMOVED = (Gate("--draft-max", until="11434", hint="use --spec-draft-n-max"),
           Gate("--draft-min", until="11434", hint="use --spec-draft-n-min"))


def build(s, version, note) -> LaunchCommand:
    notes = []
    if s.nodes > 1:
        raise Unsupported("llama.cpp: multi-node launch is not generated (llama.cpp uses its RPC backend)")
    argv = ["llama-server", "-m", s.model, "--host", s.host, "--port", str(s.port), "-ngl", "all"]
    if s.served_model_name:
        argv += ["--alias", s.served_model_name]
    if s.max_model_len is not None:
        argv += ["-c", str(s.max_model_len)]
    if s.max_batch is not None:
        argv += ["-np", str(s.max_batch)]
    kv = map_value("llama.cpp", "KV cache type", s.kv_cache_dtype, KV)
    if s.kv_cache_dtype != "auto":
        argv += ["-ctk", kv, "-ctv", kv]
        if kv.startswith("q"):
            argv += ["-fa", "on"]
            notes.append("a quantized V cache requires flash attention (-fa on)")
    if s.tp > 1 or s.pp > 1:
        notes.append("llama.cpp splits layers over the visible GPUs (-sm layer); tp/pp map to that split")
    if s.speculative:
        sp = s.speculative
        if sp.method not in SPEC_TYPE:
            raise Unsupported(f"llama.cpp has no speculative type for {sp.method!r}")
        argv += ["--spec-type", SPEC_TYPE[sp.method]]
        if sp.method != "ngram":
            argv += ["--spec-draft-model", need_draft("llama.cpp", sp), "-ngld", "all"]
        argv += ["--spec-draft-n-max", str(sp.draft_tokens)]
    env = visible_devices(s)
    if s.api_key:
        # --api-key is registered with set_env("LLAMA_API_KEY") (common/arg.cpp): the environment keeps
        # the key out of the world-readable process list.
        env.append(("LLAMA_API_KEY", s.api_key))
        notes.append("the API key goes in LLAMA_API_KEY (kept out of the process list)")
    if not s.cuda_graphs:
        env.append(("GGML_CUDA_DISABLE_GRAPHS", "1"))
    check_removed("llama.cpp", version, s.extra_args, REMOVED)
    argv += list(s.extra_args)
    env += list(s.extra_env)
    return LaunchCommand(settings=s, version=version, version_note=note, argv=tuple(argv), env=tuple(env),
                         notes=tuple(notes))
