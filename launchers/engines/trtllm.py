"""TensorRT-LLM `trtllm-serve` (serve.py @ 00209af1, engines-launch.md §4.2): KV dtype, speculative
decoding and CUDA graphs go in a YAML file passed with --extra_llm_api_options."""

from __future__ import annotations

import yaml

from advisor.errors import Unsupported
from launchers.command import GeneratedFile, LaunchCommand
from launchers.engines._common import map_value, need_draft, visible_devices

KV = {"auto": "auto", "fp8_e4m3": "fp8", "bf16": None, "fp16": None, "fp8_e5m2": None, "nvfp4": None,
      "q8_0": None, "q4_0": None}
CONFIG_FILE = "trtllm-extra-options.yaml"


def build(s, version, note) -> LaunchCommand:
    if s.nodes > 1:
        raise Unsupported("TensorRT-LLM: multi-node launch is not generated (it runs under mpirun/slurm)")
    if s.api_key:
        raise Unsupported("trtllm-serve has no API-key option; keep it on 127.0.0.1 or front it with a proxy")
    argv = ["trtllm-serve", s.model, "--host", s.host, "--port", str(s.port), "--backend", "pytorch",
            "--tp_size", str(s.tp)]
    notes = []
    if s.pp > 1:
        argv += ["--pp_size", str(s.pp)]
    if s.max_batch is not None:
        argv += ["--max_batch_size", str(s.max_batch)]
    # With chunked prefill a prompt is cut into pieces of at most --max_num_tokens (the per-step token
    # budget): that is where a chunk size goes when no budget is given.
    budget = s.max_batched_tokens or (s.chunked_prefill or None)
    if budget:
        argv += ["--max_num_tokens", str(budget)]
    if s.max_model_len is not None:
        argv += ["--max_seq_len", str(s.max_model_len)]
    if s.memory_share is not None:
        argv += ["--kv_cache_free_gpu_memory_fraction", f"{s.memory_share:g}"]
        notes.append("TensorRT-LLM's fraction is of the memory left free AFTER the weights, not of the whole GPU")
    if s.chunked_prefill:
        argv += ["--enable_chunked_prefill"]
        if s.max_batched_tokens and s.max_batched_tokens != s.chunked_prefill:
            notes.append(f"TensorRT-LLM has no chunk-size flag: chunks follow --max_num_tokens {s.max_batched_tokens}, "
                         f"not {s.chunked_prefill}")
    extra: dict = {}
    kv = map_value("trtllm", "KV cache dtype", s.kv_cache_dtype, KV)
    if kv != "auto":
        extra["kv_cache_config"] = {"dtype": kv}
    if s.speculative:
        sp = s.speculative
        if sp.method == "eagle3":
            extra["speculative_config"] = {"decoding_type": "Eagle3", "max_draft_len": sp.draft_tokens,
                                           "speculative_model": need_draft("trtllm", sp)}
        elif sp.method == "mtp":
            extra["speculative_config"] = {"decoding_type": "MTP", "num_nextn_predict_layers": sp.draft_tokens}
        elif sp.method == "ngram":
            extra["speculative_config"] = {"decoding_type": "NGram", "max_draft_len": sp.draft_tokens}
        else:
            raise Unsupported(f"trtllm-serve: speculative method {sp.method!r} is not generated (eagle3, mtp, ngram)")
    if not s.cuda_graphs:
        extra["cuda_graph_config"] = None
    files: tuple[GeneratedFile, ...] = ()
    if extra:
        argv += ["--extra_llm_api_options", CONFIG_FILE]
        files = (GeneratedFile(CONFIG_FILE, yaml.safe_dump(extra, sort_keys=False),
                               "LLM API options (KV, speculation, graphs)"),)
    argv += list(s.extra_args)
    env = visible_devices(s) + list(s.extra_env)
    return LaunchCommand(settings=s, version=version, version_note=note, argv=tuple(argv), env=tuple(env),
                         files=files, notes=tuple(notes))
