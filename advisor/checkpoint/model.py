"""The checkpoint contract: what `inspect` produces and every later stage consumes.

Pure data, frozen. Built by advisor.checkpoint.inspect from config files and safetensors headers
only (never weights), or from the architecture config alone when no weights are present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from advisor.checkpoint.declared import DeclaredQuant

# Module roles: what a module is for, read from its name (advisor.checkpoint.roles.role_of).
Role = Literal[
    "attn_qkv", "attn_o", "gdn_in_proj", "gdn_out_proj", "mlp_gate_up", "mlp_down",
    "expert", "shared_expert", "router", "lm_head", "embed", "vision", "mtp", "conv", "norm", "other",
]
ROLES: tuple[Role, ...] = get_args(Role)

# Scheme labels (per module and per checkpoint).
Scheme = Literal[
    "BF16", "FP16", "W8A16-FP8", "W8A16-INT8", "W4A16-INT4", "W4A16-NVFP4", "W4A16-MXFP4",
    "W8A8-FP8", "W8A8-INT8", "W4A4-NVFP4", "W4A4-MXFP4", "W4A8-FP8", "MIXED",
    # formats the engines' kernel rules do not serve: named, sized from their own bits, never "BF16"
    "EXL2", "EXL3", "BITNET", "MLX", "HQQ", "AQLM", "GGUF", "UNKNOWN",
]
SCHEMES: tuple[Scheme, ...] = get_args(Scheme)
# Weight formats: bf16 fp16 fp32 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 int4 int8 uint4 nf4 unknown
# Scale granularity: none | tensor | channel | group | block | nvfp4 (16-block e4m3 + fp32 global)
#   | mxfp4 (32-block e8m0)
# Activation quant format: none | fp8_e4m3 | int8 | nvfp4 | mxfp4 ; granularity: tensor | token | group


@dataclass(frozen=True)
class WeightQuant:
    format: str = "bf16"
    bits: int = 16
    granularity: str = "none"
    group_size: int | None = None           # for group / nvfp4 (16) / mxfp4 (32)
    block: tuple[int, int] | None = None    # for block FP8, e.g. (128, 128)
    symmetric: bool | None = None
    packing: str | None = None              # e.g. "int32-8-per-word", "uint8-2-per-byte"
    act_order: bool | None = None           # GPTQ desc_act: columns permuted by activation order
    bpw: float | None = None                # average stored bits per weight where the format declares it (EXL2, GGUF)


@dataclass(frozen=True)
class ActQuant:
    format: str = "none"
    dynamic: bool | None = None
    granularity: str | None = None          # tensor | token | group
    group_size: int | None = None


@dataclass(frozen=True)
class ModuleGroup:
    """One module, or many modules with the same role/scheme/shape (e.g. 'layers.*.mlp.experts.*.down_proj')."""

    name: str
    role: Role
    scheme: Scheme                          # not MIXED (BF16/FP16 for unquantized)
    weight: WeightQuant
    act: ActQuant
    count: int = 1                          # modules in the group
    params: int = 0                         # weight elements (logical, unpacked), whole group
    stored_bytes: int = 0                   # bytes on disk incl. scales/zeros, whole group
    shape: tuple[int, int] | None = None    # logical (out_features, in_features) of one member
    layers: tuple[int, ...] = ()            # decoder layer indices covered


@dataclass(frozen=True)
class MoEInfo:
    num_experts: int
    top_k: int
    num_shared_experts: int = 0
    expert_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    moe_layers: int | None = None           # decoder layers that are MoE (others dense)


@dataclass(frozen=True)
class MLAInfo:
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    q_lora_rank: int | None = None


@dataclass(frozen=True)
class LinearStateInfo:
    """Shape numbers of the fixed per-request state a linear-attention layer keeps (a short-conv window
    plus a recurrent matrix state), from config.json. One layout serves GDN, KDA and Mamba2 (engines
    size GDN as Mamba2 with n_groups = key heads, state_size = key head dim):
      conv state      (conv_kernel - 1) x (intermediate_size + 2 x n_groups x state_size)
      recurrent state num_heads x head_dim x state_size           (mamba1: intermediate_size x state_size)
    """

    kind: str                               # gdn | kda | mamba2 | mamba1
    conv_kernel: int                        # linear_conv_kernel_dim | conv_kernel | mamba_d_conv
    intermediate_size: int                  # linear_num_value_heads x linear_value_head_dim | mamba inner dim
    n_groups: int = 0                       # linear_num_key_heads | n_groups (B/C groups)
    state_size: int = 0                     # linear_key_head_dim | ssm_state_size | mamba_d_state
    num_heads: int = 0                      # linear_num_value_heads | mamba_num_heads
    head_dim: int = 0                       # linear_value_head_dim | mamba_head_dim
    ssm_dtype: str | None = None            # the config's mamba_ssm_dtype / mamba_ssm_cache_dtype, if any
    layers: int = 0                         # decoder layers that keep this state


@dataclass(frozen=True)
class KVGroup:
    """Decoder layers that keep the same KV per token: their own KV heads and head size (Gemma 4's
    global layers differ from its sliding ones; Nemotron-NAS sets KV heads per block)."""

    layers: int
    kv_heads: int
    head_dim: int
    sliding: bool = False                   # holds at most ArchInfo.sliding_window tokens
    values: int = 0                         # K+V values per token per layer (2 x heads x dim; 1 x when K = V)


@dataclass(frozen=True)
class ArchInfo:
    """The architecture numbers the cost model needs (text model; vision tower counted separately)."""

    model_type: str | None = None
    architectures: tuple[str, ...] = ()
    num_layers: int = 0
    hidden_size: int = 0
    intermediate_size: int | None = None
    num_attention_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    vocab_size: int = 0
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = None
    kv_layers: int = 0                      # decoder layers that keep a full KV cache
    sliding_window: int | None = None
    sliding_window_layers: int = 0          # layers whose KV is capped at sliding_window
    linear_attention_layers: int = 0        # GDN / Mamba / linear-attention layers (no growing KV)
    # per decoder layer: attention | mla | sliding | gdn | mamba | none (FFN-only)
    layer_types: tuple[str, ...] = ()
    moe: MoEInfo | None = None
    mla: MLAInfo | None = None
    mtp_layers: int = 0
    has_vision: bool = False
    linear_state: LinearStateInfo | None = None   # GDN / Mamba state shape (None: none, or config lacks it)
    kv_groups: tuple[KVGroup, ...] = ()     # per-layer KV geometry when layers differ (empty: uniform)


@dataclass(frozen=True)
class Finding:
    """A doctor warning about the checkpoint."""

    code: str                               # stable id, e.g. "fused-global-scale-mismatch"
    severity: str                           # info | warn | error
    message: str                            # one line
    detail: str = ""
    modules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Totals:
    params: int = 0                         # all weight elements (logical)
    stored_bytes: int = 0                   # on disk (or computed when no weights present)
    active_params: int = 0                  # per decoded token (MoE: top_k + shared experts)
    bytes_per_token: int = 0                # weight bytes read per decoded token at stored width
    sizes_from: str = "headers"             # headers | config (no weights present)


@dataclass(frozen=True)
class CheckpointInfo:
    source: str                             # folder, file or hub id[@revision]
    # modelopt | compressed-tensors | fp8 | gptq | awq | bitsandbytes | mxfp4 | none | unknown
    producer: str
    label: Scheme
    scheme_shares: dict[Scheme, float]      # scheme -> byte share among quantized linear weights (sums to 1)
    modules: tuple[ModuleGroup, ...]
    arch: ArchInfo
    totals: Totals
    kv_cache_quant: str | None = None       # declared by the checkpoint: fp8 | nvfp4 | int8 | None
    # unquantized parts of a quantized checkpoint (a subset of `modules`, not extra groups)
    kept_bf16: tuple[ModuleGroup, ...] = ()
    findings: tuple[Finding, ...] = ()
    quant_method: str | None = None         # raw quant_method / quant_algo string
    format_note: str = ""                   # the format in words for the headline, e.g. "EXL2, 4.25 bits per weight"
    kv_cache_detail: str = ""               # the KV-cache quantization in words (dtype, scales)
    raw_quant_config: dict | None = field(default=None, compare=False)
    declared: DeclaredQuant | None = field(default=None, compare=False)   # each config file's quantization block, raw

    def modules_with_role(self, role: str) -> tuple[ModuleGroup, ...]:
        return tuple(m for m in self.modules if m.role == role)
