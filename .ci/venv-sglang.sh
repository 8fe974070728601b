#!/usr/bin/env bash
# .venv-sglang: SGLang 0.5.23's own Python beside the CPU torch, for tests/conformance/sglang.
#
# What SGLang's real install brings, minus the GPU: sglang --no-deps, the pure-Python packages its
# selection code imports (pinned where SGLang pins them), FlashInfer's Python (JIT/cubins are only
# needed when a kernel runs), and the Python of its compiled dependencies sglang-kernel and
# sgl-deep-gemm with their shared libraries removed. Each removed library leaves behind the list of
# torch operator schemas it registers (read from the library), so tests/conformance/sglang/
# sglang_stubs.py can register the same operators as stubs that raise when called.
# Every package is pinned and installed without the resolver (fast, the same set every time). Rebuilt
# only when this script changes; a change also changes the harness hash, so the cached engine results go
# stale: refresh them (tests/conformance/sglang/sglang_cache.py). Usage: bash .ci/venv-sglang.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
V=$ROOT/.venv-sglang
PINS=(
  # the engine and what a default `pip install sglang==0.5.23` brings for kernel choice: FlashInfer's
  # Python (kernels JIT/cubin, loaded only when one runs), sglang-kernel and sgl-deep-gemm (their compiled
  # libraries are removed below), triton
  sglang==0.5.23 flashinfer-python==0.7.2 sglang-kernel==0.4.10 sgl-deep-gemm==0.2.3.post2 triton==3.9.0
  # the CuTe DSL (nvidia-cutlass-dsl[cu13]==4.8.0, a hard dependency): SGLang's scheduler imports it on sm_10x
  # (the FP4/BF16 GEMM configs); its Python frontend is libs-core, the CUDA 13 MLIR bindings libs-cu13
  nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0
  nvidia-cutlass-dsl-libs-cu13==4.8.0 protobuf==7.36.2
  # pure-Python (or CPU-only) imports on the path from ServerArgs to the built layers; versions as sglang
  # 0.5.23's METADATA pins them where it does
  transformers==5.19.0 tokenizers==0.23.2 huggingface_hub==1.33.0 hf-xet==1.8.0 safetensors==0.8.0
  compressed-tensors==0.18.0 apache-tvm-ffi==0.1.11 openai==2.8.0 sentencepiece==0.2.1 gguf==0.19.0
  cuda-python==13.4.4 cuda-bindings==13.4.4 cuda-core==1.2.2 cuda-pathfinder==1.9.1 nvidia-ml-py==13.615.71
  pydantic==2.14.4 pydantic_core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0
  typing_extensions==4.16.0 numpy==2.4.6 scipy==1.17.1 regex==2026.11.19 PyYAML==6.0.4 packaging==26.4
  filelock==4.3.2 fsspec==2026.9.0 tqdm==4.70.1 requests==2.34.2 urllib3==2.8.0 idna==3.20
  certifi==2026.10.19.post1 charset-normalizer==3.5.3 psutil==7.2.2 msgspec==0.23.0 msgpack==1.2.4
  cloudpickle==3.1.3 dill==0.4.1 einops==0.8.2 pyzmq==27.3.0 pybase64==1.5.1 orjson==3.13.0 xxhash==4.1.0
  zstandard==0.25.0 prometheus_client==0.26.0 pillow==13.0.0 setproctitle==1.3.8 interegular==0.3.3
  partial-json-parser==0.2.1.1.post7 python-multipart==0.0.34 aiohttp==3.14.5 aiohappyeyeballs==2.7.1
  aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 anyio==4.16.0 sniffio==1.3.1 h11==0.16.0
  httpx==0.29.0 httpcore==1.0.9 annotated-doc==0.0.7 jiter==0.19.0 distro==1.9.0 loguru==0.7.3
  opentelemetry-api==1.45.2 tabulate==0.10.0 click==8.5.1 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2
  Pygments==2.21.0 typer==0.29.2 shellingham==1.5.4 Jinja2==3.1.6 MarkupSafe==3.0.4 sympy==1.14.0
  mpmath==1.3.0 networkx==3.6.1 ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7
  traitlets==5.16.1 matplotlib-inline==0.2.2 prompt_toolkit==3.0.53 wcwidth==0.9.4 pexpect==4.9.0
  ptyprocess==0.7.0 stack-data==0.6.3 asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4
  # torchvision's Python (SGLang's multimodal configs import its transforms); its compiled ops are a CUDA
  # build that cannot load beside the CPU torch and are removed below
  torchvision==0.28.0
)
STAMP=$({ cat "$0"; echo "${PINS[*]}"; } | sha1sum | cut -c1-12)
if [ -x "$V/bin/python" ] && [ "$(cat "$V/.stamp" 2>/dev/null)" = "$STAMP" ]; then
  exit 0
fi
pipq() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
rm -rf "$V"
"$PY" -m venv "$V"
pipq "$V/bin/pip" install -q --upgrade pip
# the CPU torch first (as in .ci/dev): SGLang pins torch 2.14 (CUDA); its selection code runs on 2.13 CPU
pipq "$V/bin/pip" install -q "torch==2.13.0"
pipq "$V/bin/pip" install -q --no-deps "${PINS[@]}"
# Compiled libraries out, their operator schemas kept (the stubs register them; calling one raises).
SITE=$("$V/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$V/bin/python" tests/conformance/sglang/sglang_stubs.py save-schemas "$SITE" "$V/op-schemas" sgl_kernel deep_gemm
find "$SITE/sgl_kernel" "$SITE/deep_gemm" "$SITE/torchvision" -name "*.so" -delete
# deep_gemm builds _C.so from source when the file is missing: an empty one stays (the stubs load nothing).
: > "$SITE/deep_gemm/_C.so"
# sgl_kernel loads its ops library by globbing sm90/ and sm100/ for common_ops.*: an empty module there.
for d in sm90 sm100; do mkdir -p "$SITE/sgl_kernel/$d"; : > "$SITE/sgl_kernel/$d/common_ops.py"; done
echo "$STAMP" > "$V/.stamp"
