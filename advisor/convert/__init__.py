"""BF16/FP16 -> NVFP4 converter in NVIDIA ModelOpt's unified HF layout, bit-exact with
nvidia-modelopt 0.47.0, streaming; and byte-for-byte verification against a reference.

Modules: nvfp4_math (the arithmetic, the reference), chunk_quantizer (the same arithmetic, fast, on
reusable buffers), safetensors_io (streaming files), source (a checkpoint folder), rules (keep-BF16
patterns, fused-group name tables), modelopt_config (the JSON configs), plan (what a conversion
does), converter (the parallel streaming writer), verify (comparisons).
"""

from advisor.convert.converter import ConvertResult, convert
from advisor.convert.plan import Options
from advisor.convert.verify import VerifyReport, verify

__all__ = ["ConvertResult", "Options", "VerifyReport", "convert", "verify"]
