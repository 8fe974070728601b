#!/usr/bin/env bash
# .venv-vllm: vLLM 0.33.0 installed --no-deps beside the CPU torch, plus only what its selection code imports.
# The conformance suite (tests/conformance/vllm/) runs vLLM's own quantization detection and kernel choice
# in it. Every package is pinned and installed without the resolver: fast, and the same set every time.
# Versions follow vllm-0.33.0's METADATA where it pins them. A change here changes the harness hash, so the
# cached engine results go stale: refresh them (tests/conformance/vllm/vllm_cache.py refresh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=$PWD/.venv-vllm
pipq() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }

PINS=(
  # the engine and the accelerators a default `pip install vllm==0.33.0` brings (its METADATA pins them);
  # the FlashInfer wheel also ships the `b12x` package
  vllm==0.33.0 flashinfer-python==0.7.2.post1 humming-kernels==0.1.19 triton==3.9.0
  # pure-Python (or CPU-only) imports on the path from ModelConfig to the built model
  transformers==5.20.2 tokenizers==0.23.3 huggingface_hub==2.4.0 hf-xet==1.8.0 safetensors==0.8.0
  compressed-tensors==0.17.0 pydantic==2.14.4 pydantic_core==2.50.5 typing-inspection==0.4.5
  annotated-types==0.8.0 typing_extensions==4.16.0 numpy==2.4.6 regex==2026.11.19 PyYAML==6.0.4
  packaging==26.4 filelock==4.3.2 fsspec==2026.9.0 tqdm==4.70.1 requests==2.34.2 urllib3==2.8.0
  idna==3.20 certifi==2026.10.19.post1 charset-normalizer==3.5.3 cachetools==8.0.2 psutil==7.2.2
  py-cpuinfo==9.0.0 blake3==1.0.11 cbor2==6.3.0 msgspec==0.23.0 cloudpickle==3.1.3 einops==0.8.2
  pyzmq==27.3.0 pybase64==1.5.1 uvloop==0.23.0 prometheus_client==0.26.0 pillow==13.0.0
  aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0
  multidict==7.2.1 propcache==0.5.4 yarl==1.25.1 fastapi==0.165.0 starlette==1.10.0 anyio==4.16.0
  sniffio==1.3.1 h11==0.16.0 annotated-doc==0.0.7 openai==3.60.0 jiter==0.19.0 httpx2==2.16.2
  httpcore2==2.16.2 truststore==0.10.5 openai-harmony==0.0.8 partial-json-parser==0.2.1.1.post7
  xgrammar==0.2.8 llguidance==1.7.3 loguru==0.7.3 apache-tvm-ffi==0.1.11 nvidia-ml-py==13.615.71
  tabulate==0.10.0 cuda-bindings==13.5.0 cuda-pathfinder==1.9.1 opentelemetry-api==1.45.2
  rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 Pygments==2.21.0 typer==0.29.2 click==8.5.1
  shellingham==1.5.4 Jinja2==3.1.6 MarkupSafe==3.0.4 sympy==1.14.0 mpmath==1.3.0 networkx==3.6.1
  # torchvision's Python transforms (transformers' Qwen-VL image processors import them); its compiled
  # ops cannot load beside the CPU torch and are not needed
  torchvision==0.28.0
)

stamp() { { cat "$0"; echo "${PINS[*]}"; } | sha1sum | cut -c1-12; }

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.stamp" 2>/dev/null)" = "$(stamp)" ]; then
  exit 0
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
pipq "$VENV/bin/pip" install -q --upgrade pip
# the CPU torch first (as in .ci/dev): vLLM pins torch 2.14 (CUDA); its selection code runs on 2.13 CPU
pipq "$VENV/bin/pip" install -q "torch==2.13.0"
pipq "$VENV/bin/pip" install -q --no-deps "${PINS[@]}"
stamp > "$VENV/.stamp"
