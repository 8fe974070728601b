"""The kernel-path contract: what `explain` decides per layer class and `plan` costs.

Every decision carries its reasons and sources (engine path:line@version) so the TUI, the CLI
and `--json` show the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

# MMA instruction classes a path issues.
MMA_CLASSES = (
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
)
# Layer classes.
LAYER_CLASSES = ("dense_linear", "moe_experts", "attention_kv", "lm_head_embed")


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
class LayerDecision:
    layer_class: str             # one of LAYER_CLASSES
    roles: tuple[str, ...]       # checkpoint roles covered (attn_qkv, mlp_down, expert, ...)
    checkpoint_scheme: str       # what the checkpoint declares, e.g. W4A4-NVFP4
    effective_scheme: str        # what really runs, e.g. W4A16-NVFP4 (activations BF16)
    kernel: str | None           # chosen kernel; None when nothing can run it
    mma: str                     # one of MMA_CLASSES
    activation_dtype: str        # bf16 | fp16 | fp8_e4m3 | nvfp4 | int8 | ...
    dequant: str                 # where weights become MMA inputs: "none", "registers", "memory", "cpu"
    runs: bool                   # False: the engine refuses / crashes on this combination
    reasons: tuple[str, ...]     # why this candidate won (gates it passed, downgrades applied)
    rejected: tuple[Rejection, ...] = ()
    warnings: tuple[EngineWarning, ...] = ()
    source: str = ""             # of the chosen candidate
    kv_cache_dtype: str | None = None   # attention_kv only: the KV dtype evaluated
    error: str | None = None     # when runs is False: what the engine says / does


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
