"""The kernel-path contract: what `explain` decides per layer class and `plan` costs.

Every decision carries its reasons and sources (engine path:line@version) so the TUI, the CLI
and `--json` show the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeGuard, get_args

# MMA instruction classes a path issues.
MmaClass = Literal[
    "hmma_f16",        # mma.sync f16 inputs (Turing+)
    "hmma_bf16",       # mma.sync bf16 inputs (Ampere+)
    "imma_int8",       # mma.sync s8 (Turing+)
    "imma_int4",       # mma.sync s4 (Turing/Ampere/Ada)
    "qmma_e4m3",       # mma.sync e4m3 (Ada sm_89, sm_12x)
    "wgmma_bf16", "wgmma_e4m3", "wgmma_int8",          # Hopper warpgroup MMA
    "tcgen05_bf16", "tcgen05_e4m3", "tcgen05_fp4_block_scaled", "tcgen05_mxf8f6f4",  # sm_100/103
    "tcgen05_int8",    # sm_100/103 int8 UMMA
    "mma_sync_fp4_block_scaled",  # sm_120/121 block-scaled mma.sync (kind::mxf4nvf4)
    "none",            # no tensor-core MMA (CPU, CUDA cores, or unsupported)
]
MMA_CLASSES: tuple[MmaClass, ...] = get_args(MmaClass)
# Layer classes.
LayerClass = Literal["dense_linear", "moe_experts", "attention_kv", "lm_head_embed"]
LAYER_CLASSES: tuple[LayerClass, ...] = get_args(LayerClass)
# Where weights become MMA inputs.
Dequant = Literal["none", "registers", "memory", "cpu"]


def is_mma_class(name: str) -> TypeGuard[MmaClass]:
    return name in MMA_CLASSES


def is_layer_class(name: str) -> TypeGuard[LayerClass]:
    return name in LAYER_CLASSES


@dataclass(frozen=True)
class Rejection:
    kernel: str
    reason: str                  # never empty: why this candidate did not run
    source: str = ""             # path:line@version


@dataclass(frozen=True)
class EngineWarning:
    text: str                    # exactly what the engine prints
    meaning: str                 # plain-language: what it really means for the user
    source: str = ""


@dataclass(frozen=True)
class KernelRange:
    """The kernel an engine runs for a band of rows M (tokens in one GEMM call): m_min <= M <= m_max."""

    m_min: int
    m_max: int | None            # None: no upper bound
    kernel: str
    mma: MmaClass                # "none": CUDA cores
    dequant: Dequant
    source: str = ""             # path:line@version of the threshold (or of the kernel when it never switches)
    note: str = ""
    launch_rows: tuple[int, ...] = ()   # GEMV launches: rows per launch, largest first (weights re-read per launch)
    single_launch_max: int = 0          # ... up to this many rows one launch serves them all
    read_bytes_per_element: float | None = None   # the engine's in-memory layout (None: as the checkpoint stores it)

    def covers(self, m: float) -> bool:
        """M may be fractional (expected rows per expert): a band covers [m_min, m_max + 1)."""
        return m >= self.m_min and (self.m_max is None or m < self.m_max + 1)

    def launches(self, m: int) -> int:
        """Kernel launches (weight passes) for M rows: one, or the greedy split of ``launch_rows``."""
        if not self.launch_rows or m <= max(self.single_launch_max, 1):
            return 1
        n, left = 0, int(m)
        for rows in self.launch_rows:
            n += left // rows
            left %= rows
        return n + left

    @property
    def label(self) -> str:
        """'M 1-31', 'M >= 32', 'every M'."""
        if self.m_max is None:
            return "every M" if self.m_min <= 1 else f"M >= {self.m_min:,}"
        return f"M = {self.m_min:,}" if self.m_min == self.m_max else f"M {self.m_min:,}-{self.m_max:,}"


@dataclass(frozen=True)
class CoveredModule:
    """A checkpoint module group a decision covers, with its GEMM shape on one GPU."""

    name: str                    # module (pattern) as inspect names it, e.g. 'model.layers.*.mlp.down_proj'
    shape: tuple[int, int] | None = None   # (N out, K in) of one member, per GPU under tensor parallel
    count: int = 1               # members (layers x experts)


@dataclass(frozen=True)
class LayerDecision:
    layer_class: LayerClass
    roles: tuple[str, ...]       # checkpoint roles covered (attn_qkv, mlp_down, expert, ...)
    checkpoint_scheme: str       # what the checkpoint declares, e.g. W4A4-NVFP4
    effective_scheme: str        # what really runs, e.g. W4A16-NVFP4 (activations BF16)
    kernel: str | None           # chosen kernel; None when nothing can run it
    mma: MmaClass
    activation_dtype: str        # bf16 | fp16 | fp8_e4m3 | nvfp4 | int8 | ...
    dequant: Dequant
    runs: bool                   # False: the engine refuses / crashes on this combination
    reasons: tuple[str, ...]     # why this candidate won (gates it passed, downgrades applied)
    rejected: tuple[Rejection, ...] = ()
    warnings: tuple[EngineWarning, ...] = ()
    source: str = ""             # of the chosen candidate
    kv_cache_dtype: str | None = None   # attention_kv only: the KV dtype evaluated
    error: str | None = None     # when runs is False: what the engine says / does
    modules: tuple[CoveredModule, ...] = ()   # the module groups this decision covers (empty: by role)
    m_ranges: tuple[KernelRange, ...] = ()    # kernel per band of rows M (empty: kernel/mma/dequant at every M)

    def at_m(self, m: float) -> KernelRange:
        """The kernel that runs for M rows."""
        m = max(m, 1)
        for r in self.m_ranges:
            if r.covers(m):
                return r
        return KernelRange(1, None, self.kernel or "(none)", self.mma, self.dequant, self.source)

    def covers_module(self, name: str) -> bool:
        return any(c.name == name for c in self.modules)


@dataclass(frozen=True)
class ModelLoad:
    """What the engine makes of the checkpoint's quantization config before it builds any layer: the file
    it reads, the method it resolves (after its normaliser and per-model rewrites), and whether the model
    starts at all. Where this view differs from the checkpoint's, explain shows both."""

    config_file: str | None      # the file (and key) the engine reads; None: it finds no quantization config
    declared_method: str | None  # quant_method (or ModelOpt quant_algo) as that file declares it
    method: str | None           # the engine's quantization method; None: every layer is built unquantized
    config_class: str | None     # the engine's config class for that method, e.g. ModelOptFp8Config
    steps: tuple[str, ...]       # how the method was resolved, each step with its engine source line
    # loads | refused (raises before any layer) | unquantized (quantized weights, no method)
    outcome: str
    error: str | None = None     # what the engine prints (refusal) or does (detection miss)
    meaning: str = ""            # what that means for the user, and what to do
    source: str = ""             # engine source of the outcome

    @property
    def runs(self) -> bool:
        return self.outcome == "loads"

    @property
    def refused(self) -> bool:
        """The engine raises while reading the config: the model does not start, no layer is built."""
        return self.outcome == "refused"


@dataclass(frozen=True)
class Explanation:
    engine: str                  # vllm | sglang | fastllm
    engine_version: str          # version of the rule file used
    requested_version: str | None
    version_note: str | None     # e.g. "no rules for 0.34; using 0.33 (nearest older)"
    gpu_id: str
    gpus: int
    checkpoint_label: str
    decisions: tuple[LayerDecision, ...]
    summary: str                 # one paragraph, plain language
    runs: bool                   # every layer class has a working path
    load: ModelLoad | None = None   # the engine's config-loading stage (None: the rule file does not model it)

    def kernel_signature(self) -> tuple:
        """Which module runs which kernel at which M: equal for two explanations (e.g. at two TP sizes)
        that differ only in the shard shapes they report."""
        return tuple((d.layer_class, d.checkpoint_scheme, d.effective_scheme, d.kernel, d.mma, d.dequant, d.runs,
                      d.error, d.m_ranges, tuple(c.name for c in d.modules)) for d in self.decisions)
