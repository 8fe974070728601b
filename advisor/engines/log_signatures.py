"""Log signatures: what an engine prints when it is ready, out of memory, falling back, or stuck.

Data only, one frozen record a line the engine prints: each maps a substring (or regex) of a log line to a cause
and a remedy. Strings are the engines' own (engines-launch.md §5, vllm-kernel-selection.md §2), matched as
substrings. Each engine's EngineSpec (advisor/engines/<engine>.py, registry.py) names its own tuple; ``COMMON``
holds what any engine's HTTP server, PyTorch, NCCL or argparse prints. launchers/signatures.py matches them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# kinds, in the order a line is matched against them
READY, OOM, KV_SMALL, UNSUPPORTED, FALLBACK, PORT, FATAL, NCCL, BAD_FLAG, NOT_READY = (
    "ready", "oom", "kv_too_small", "unsupported_quant", "slow_fallback", "port_in_use", "fatal_error",
    "nccl", "bad_flag", "not_ready")
KINDS = (READY, OOM, KV_SMALL, UNSUPPORTED, FALLBACK, PORT, FATAL, NCCL, BAD_FLAG, NOT_READY)
FAILURE_KINDS = (OOM, KV_SMALL, UNSUPPORTED, PORT, FATAL, NCCL, BAD_FLAG, NOT_READY)


@dataclass(frozen=True)
class LogSignature:
    kind: str
    pattern: str                     # substring, or a regex when regex=True
    cause: str
    remedy: str
    source: str = ""
    regex: bool = False

    def matches(self, line: str) -> bool:
        return bool(re.search(self.pattern, line)) if self.regex else self.pattern in line


_OOM_REMEDY = ("lower max batch / context length, use a smaller KV dtype, or raise the memory share if other "
               "processes are not using the GPU")

# any engine
COMMON: tuple[LogSignature, ...] = (
    LogSignature(READY, "Uvicorn running on http", "the HTTP server is listening", "", "uvicorn server.py:232"),
    LogSignature(READY, "Application startup complete.", "the HTTP application started", "",
                 "uvicorn lifespan/on.py:62"),
    LogSignature(OOM, "CUDA out of memory", "the GPU ran out of memory", _OOM_REMEDY, "PyTorch OutOfMemoryError"),
    LogSignature(UNSUPPORTED, r"The quantization method \S+ is not supported for the current GPU",
                 "the checkpoint's quantization needs a newer GPU than this one",
                 "use a weight-only (W4A16/W8A16) checkpoint or another engine; see `nvfp4-advisor explain`",
                 "vllm/config/vllm.py:926-936@0.33.0; sglang model_loader/loader.py:259-265", regex=True),
    LogSignature(PORT, "address already in use", "another process holds the port",
                 "stop it (`nvfp4-advisor launch --stop-leftovers`) or choose another --port",
                 "uvicorn server.py:189-192"),
    LogSignature(NCCL, r"NCCL error|nccl(?:Internal|System|Unhandled(?:Cuda)?|Invalid(?:Usage|Argument))Error",
                 "NCCL failed to set up or run communication between the GPUs",
                 "on consumer cards without P2P try NCCL_P2P_DISABLE=1; set NCCL_DEBUG=INFO for details; "
                 "check that every GPU is visible and on the same driver", "NCCL", regex=True),
    LogSignature(BAD_FLAG, "error: unrecognized arguments", "the engine does not know a flag",
                 "check the engine version (`--engine-version`) so the advisor uses its flag set", "argparse"),
    LogSignature(BAD_FLAG, "error: ambiguous option", "a flag was removed or renamed in this version",
                 "check the engine version so the advisor uses its flag set", "argparse"),
)

# vLLM and SGLang both print these Marlin fallbacks (SGLang reuses vLLM's Marlin utilities)
_MARLIN_FALLBACKS = (
    LogSignature(FALLBACK, "does not have native support for FP4 computation",
                 "FP4 weights run weight-only on Marlin with BF16 activations (W4A16)",
                 "expected without FP4 tensor cores; for FP4 MMA you need sm_100/sm_120 and a W4A4 checkpoint",
                 "vllm kernels/linear/nvfp4/marlin.py:34-39@0.33.0"),
    LogSignature(FALLBACK, "does not have native support for FP8 computation",
                 "FP8 weights run weight-only on Marlin with BF16 activations (W8A16)",
                 "expected below sm_89 (and for block FP8 on Ada); prefill gets no FP8 speed-up",
                 "vllm layers/quantization/utils/marlin_utils_fp8.py:108-113@0.33.0"),
)

VLLM: tuple[LogSignature, ...] = (
    LogSignature(OOM, "No available memory for the cache blocks",
                 "nothing is left for the KV cache after the weights",
                 "raise --gpu-memory-utilization, or shrink weights (smaller scheme / more TP)",
                 "vllm/v1/core/kv_cache_utils.py"),
    LogSignature(KV_SMALL, "KV cache is needed, which is larger than the available KV cache memory",
                 "one request at --max-model-len needs more KV cache than is left",
                 "lower --max-model-len, use a smaller KV dtype (fp8/nvfp4), or raise --gpu-memory-utilization",
                 "vllm/v1/core/kv_cache_utils.py"),
    LogSignature(UNSUPPORTED, "Quantization scheme is not supported for the current GPU",
                 "a compressed-tensors scheme needs a newer GPU", "use a weight-only checkpoint",
                 "compressed_tensors.py:392-418@0.33.0"),
    *_MARLIN_FALLBACKS,
    LogSignature(FALLBACK, "NVFP4 linear falling back to the slow and unoptimized emulation backend",
                 "NVFP4 layers run the slow emulation path (dequantize + BF16 GEMM in PyTorch)",
                 "install the missing kernels (flashinfer-cubin) or pick a supported --linear-backend",
                 "vllm kernels/linear/__init__.py:1293-1301@0.33.0"),
)

SGLANG: tuple[LogSignature, ...] = (
    LogSignature(READY, "The server is fired up and ready to roll!", "SGLang is serving", "",
                 "sglang/srt/entrypoints/http_server.py:2600@0.5.23"),
    LogSignature(OOM, "Not enough memory. Please try to increase --mem-fraction-static",
                 "the KV pool does not fit in the static memory fraction",
                 "raise --mem-fraction-static, or lower --max-running-requests / --context-length",
                 "srt/model_executor/pool_configurator.py:96@0.5.23"),
    LogSignature(OOM, "Capture cuda graph failed", "CUDA graph capture ran out of memory",
                 "set --mem-fraction-static lower (0.8 or 0.7) or --cuda-graph-max-bs-decode smaller (e.g. 16)",
                 "srt/model_executor/runner/decode_cuda_graph_runner.py:603@0.5.23"),
    LogSignature(UNSUPPORTED, "ModelOpt NVFP4 native dense GEMM backends require SM100+",
                 "a native FP4 GEMM backend was forced on a GPU without FP4 tensor cores",
                 "use --fp4-gemm-backend marlin (or auto)", "modelopt_quant.py:1931-1935@0.5.23"),
    LogSignature(UNSUPPORTED, "does not support NVFP4 quantization with the selected MoE backend",
                 "the chosen MoE backend cannot run NVFP4 experts here", "use --moe-runner-backend auto",
                 "modelopt_quant.py:2382-2387@0.5.23"),
    *_MARLIN_FALLBACKS,
    LogSignature(FALLBACK, "NVFP4 w4a4 requires compute capability >= 10.0",
                 "the W4A4 checkpoint is served weight-only via FP4 Marlin", "expected below sm_100",
                 "compressed_tensors.py:778-782@0.5.23"),
    LogSignature(PORT, "Port is already in use", "an internal SGLang port is taken",
                 "stop the other SGLang instance or set --port/--dist-init-addr", "server_args.py:884-887@0.5.23"),
)

FASTLLM: tuple[LogSignature, ...] = (
    LogSignature(READY, '"type":"startup.ready"', "FastLLM reports startup.ready", "", "ftllm/startup_progress.py"),
    LogSignature(OOM, r"CUDA error when allocating .* memory", "FastLLM could not allocate GPU memory",
                 "lower --max_batch or --gpu_mem_ratio headroom, or use --kv_cache_dtype fp8_e4m3",
                 "src/devices/cuda/fastllm-cuda.cu:4422", regex=True),
    LogSignature(OOM, "cudaErrorMemoryAllocation", "FastLLM could not allocate GPU memory",
                 "lower --max_batch, --max_context_length or the KV dtype width", "src/fastllm.cpp:124"),
    LogSignature(OOM, "MTP startup validation failed", "--max_batch exceeds what fits with MTP",
                 "lower --max_batch or the MTP draft tokens", "ftllm/util.py:1080"),
    LogSignature(FALLBACK, "compile failed, fallback to built-in CUDA FP8 linear",
                 "FastLLM's Triton FP8 kernel failed to compile", "check the Triton install", "cudadevice.cpp:1139"),
    LogSignature(FALLBACK, "Triton is unavailable in the current Python environment",
                 "--triton was disabled; built-in CUDA kernels are used", "install triton in the engine's environment",
                 "ftllm/util.py:436-442"),
    LogSignature(FALLBACK, "auto CUDA graph disabled", "FastLLM turned CUDA graphs off on this GPU",
                 "expected on compute capability <= 7.5", "ftllm/util.py:740@1.9.0"),
    LogSignature(FALLBACK, "TurboMind kernels disabled", "the SM70 TurboMind kernels are not in this build",
                 "expected on V100 with this wheel", "libfastllm_tools.so@1.9.0"),
    LogSignature(FATAL, "FastLLM Error:", "FastLLM hit a fatal error (it exits with status 0)",
                 "read the message after 'FastLLM Error:'; the exit code does not tell failure",
                 "include/utils/utils.h:99-104"),
    LogSignature(FATAL, '"type":"startup.error"', "FastLLM reported a startup error",
                 "see the message field", "ftllm/startup_progress.py"),
)

LLAMACPP: tuple[LogSignature, ...] = (
    LogSignature(READY, "server is listening on", "llama-server is listening", "", "tools/server/server.cpp"),
    LogSignature(OOM, "cudaMalloc failed: out of memory", "llama.cpp could not allocate GPU memory",
                 "lower -c / -np, quantize the KV cache (-ctk/-ctv q8_0), or offload fewer layers (-ngl)", "ggml-cuda"),
    LogSignature(OOM, "failed to allocate buffer for kv cache", "the KV cache does not fit",
                 "lower -c or -np, or quantize the KV cache", "llama.cpp"),
    LogSignature(UNSUPPORTED, "V cache requires flash_attn", "a quantized V cache needs flash attention",
                 "add -fa on", "llama.cpp"),
    LogSignature(PORT, "couldn't bind HTTP server socket", "another process holds the port",
                 "choose another --port", "server-http.cpp"),
    LogSignature(FATAL, "exiting due to model loading error", "llama.cpp could not load the model",
                 "check the GGUF file and memory", "server.cpp"),
)

TRTLLM: tuple[LogSignature, ...] = (
    LogSignature(PORT, "Failed to bind socket", "another process holds the port", "choose another --port",
                 "tensorrt_llm/commands/serve.py launch_server()"),
)
