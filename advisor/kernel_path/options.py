"""What is installed and what the user passes to the engine: the facts kernel choice depends on
besides the GPU and the checkpoint.

Built at the edge (CLI flags, TUI form); rules read it, never the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Facts a rule file may name in its `dependencies` (the bool fields below).
DEPENDENCY_FACTS = (
    "flashinfer", "flashinfer_cubin", "nvcc_ninja", "deepgemm", "humming", "b12x",
    "triton_kernels", "fbgemm", "conch", "cutlass_fp8_build",
)


@dataclass(frozen=True)
class InstallOptions:
    """Install and launch facts. Defaults describe a complete engine install (official images)."""

    flashinfer: bool = True          # flashinfer-python importable
    flashinfer_cubin: bool = True    # prebuilt FlashInfer kernels (flashinfer-cubin) installed
    nvcc_ninja: bool = False         # nvcc and ninja on PATH (FlashInfer can JIT without cubin)
    deepgemm: bool = True            # deep_gemm importable (vLLM builds it in)
    humming: bool = True             # humming-kernels importable (vLLM default dependency)
    b12x: bool | None = None         # b12x package; None: as the engine's default install (vLLM 0.33: it ships in
                                     # the FlashInfer wheel, so present whenever FlashInfer is)
    triton_kernels: bool = True      # OpenAI triton_kernels (gpt-oss MoE)
    fbgemm: bool = False             # fbgemm_gpu
    conch: bool = False              # conch-triton-kernels (ROCm requirement only)
    cutlass_fp8_build: bool = True   # FastLLM wheel built with its optional CUTLASS FP8 kernels
    flags: tuple[tuple[str, str], ...] = ()   # engine flags, e.g. (("linear_backend", "marlin"),)
    env: tuple[tuple[str, str], ...] = ()     # environment overrides, e.g. (("VLLM_USE_DEEP_GEMM", "0"),)
    kv_cache_dtype: str | None = None         # None: the engine default for this checkpoint
    tp: int | None = None                     # tensor-parallel size; None: the number of GPUs
    ep: int = 1                               # expert-parallel size
    labels: tuple[str, ...] = field(default=(), compare=False)  # what the user changed, for display

    def flag(self, name: str) -> str | None:
        for k, v in self.flags:
            if k == name:
                return v
        return None

    def env_value(self, name: str) -> str | None:
        for k, v in self.env:
            if k == name:
                return v
        return None

    def fact(self, name: str) -> bool:
        """A fact's value; one left to the engine's default install (None) reads False until
        advisor.kernel_path.default_install.resolve_install() fills it from the rule file."""
        if name not in DEPENDENCY_FACTS:
            raise KeyError(name)
        return bool(getattr(self, name))
