"""The fixed per-request state of linear-attention layers (GDN, KDA, Mamba2, Mamba1): its bytes per
GPU, how an engine holds it next to the KV cache, and what a decode step reads and writes of it.

per layer, per GPU under TP N (vLLM MambaStateShapeCalculator; SGLang Mamba2StateShape):
  conv  = (conv_kernel - 1 + draft rows) x (intermediate + 2 x n_groups' x state_size) / N  x conv dtype
  state = num_heads / N x head_dim x state_size                                          x ssm dtype
          (mamba1: intermediate / N x state_size; n_groups' = n_groups padded so every rank holds its groups)
one request holds ``slots`` such states per layer (prefix-cache checkpoints, draft positions).

Engines (profiles/engine_memory/<engine>-<version>.yaml ``recurrent_state``):
  shared (vLLM, FastLLM): states take pages of the KV pool; vLLM pads each to the attention page and
                          raises the attention block so one page holds a state
  split  (SGLang):        r / (1 + r) of the pool becomes state slots up front; KV gets the rest and
                          running requests are capped at slots / slots-per-request
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.checkpoint.model import ArchInfo, LinearStateInfo
from advisor.cost.derived import Derived

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_ALIASES = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
_KIND_LABEL = {"gdn": "GDN", "kda": "KDA", "mamba2": "Mamba2", "mamba1": "Mamba"}


def _dtype(name: str | None) -> str | None:
    if not name:
        return None
    n = _ALIASES.get(str(name).lower(), str(name).lower())
    return n if n in DTYPE_BYTES else None


@dataclass(frozen=True)
class StateDtypes:
    conv: str
    ssm: str
    source: str


def resolve_dtypes(rules: dict[str, Any], arch: ArchInfo, model_dtype: str) -> StateDtypes:
    """Conv and recurrent dtypes the engine uses with its flags left at 'auto'."""
    info = arch.linear_state
    cd = rules.get("conv_dtype") or {}
    conv = model_dtype if cd.get("default", "model") == "model" else (_dtype(cd.get("default")) or model_dtype)
    sd = rules.get("ssm_dtype") or {}
    ssm = None
    if sd.get("from_config", True) and info is not None:
        ssm = _dtype(info.ssm_dtype)
    if ssm is None:
        mt = str(arch.model_type or "")
        ssm = next((_dtype(v) for k, v in (sd.get("by_model_type") or {}).items() if mt.startswith(k)), None)
    if ssm is None and info is not None:
        ssm = _dtype((sd.get("by_kind") or {}).get(info.kind))
    if ssm is None:
        other = sd.get("otherwise", "conv")
        ssm = conv if other == "conv" else (_dtype(other) or conv)
    return StateDtypes(conv, ssm, f"{cd.get('source', '')}; {sd.get('source', '')}".strip("; "))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def layer_elements(info: LinearStateInfo, tp: int, conv_rows_extra: int = 0) -> tuple[int, int, dict[str, Any]]:
    """(conv elements, recurrent elements) one layer keeps for one request on one of ``tp`` GPUs."""
    rows = max(info.conv_kernel - 1, 0) + conv_rows_extra
    if info.kind == "mamba1":
        inner = _ceil_div(info.intermediate_size, tp)
        return rows * inner, inner * info.state_size, {"conv_rows": rows, "conv_dim/N": inner,
                                                       "state": f"{inner} x {info.state_size}"}
    groups = info.n_groups
    if info.kind == "mamba2" and groups % tp:
        groups += tp - groups    # vLLM/SGLang extra_groups_for_head_shards: every rank holds the groups its heads need
    conv_dim = info.intermediate_size + 2 * groups * info.state_size
    heads = _ceil_div(info.num_heads, tp)
    conv = rows * _ceil_div(conv_dim, tp)
    ssm = heads * info.head_dim * info.state_size
    return conv, ssm, {"conv_rows": rows, "conv_dim": conv_dim, "N": tp,
                       "state": f"{heads} x {info.head_dim} x {info.state_size}"}


@dataclass(frozen=True)
class RecurrentState:
    """One engine's per-request state for one checkpoint at one setting (bytes per GPU)."""

    kind: str
    layers: int
    conv_bytes: float          # one layer, one slot
    ssm_bytes: float           # one layer, one slot
    slots: int                 # state slots one request holds per layer
    page_bytes: float          # one layer, one slot, as allocated (padded to the attention page)
    kv_block_tokens: int       # attention block the engine uses (raised to fit a state page); 1 = no rounding
    pool: str                  # shared | split
    memory_ratio: float        # split: state share r of r/(1+r)
    max_slots_per_request: int  # split: slots the cap on running requests divides by
    spec_intermediate: int     # split: draft positions whose intermediate states are reserved
    dtypes: StateDtypes
    derived: Derived           # bytes one request holds, with formula and source
    traffic_source: str = ""

    @property
    def state_bytes(self) -> float:
        """One state of every linear layer: what a decode step loads per request."""
        return self.layers * (self.conv_bytes + self.ssm_bytes)

    @property
    def request_bytes(self) -> float:
        """Memory one running request holds (shared pool: taken from the KV pool)."""
        return self.layers * self.page_bytes * self.slots

    def step_bytes(self, verify_tokens: int = 1) -> float:
        """Bytes a decode step moves per request: load the state, store it per verified position."""
        return self.state_bytes * (1 + max(1, verify_tokens))

    def split_reserve(self, pool: float, max_batch: int) -> tuple[float, int]:
        """SGLang: (bytes the state pool takes out of ``pool``, requests it can run)."""
        per = self.state_bytes
        if per <= 0 or pool <= 0:
            return 0.0, 0
        budget = pool * self.memory_ratio / (1 + self.memory_ratio)
        ratio = max(self.max_slots_per_request, 1)
        d = self.spec_intermediate
        if d:
            k = int((budget - per * (1 + d)) // (per * (1 + d / ratio)))
            capped = max(0, min(max(1, max_batch), k // ratio))
            reserve = (k + 1) * per + per * (capped + 1) * d
        else:
            k = int((budget - per) // per)
            reserve = (k + 1) * per
        return reserve, max(0, k // ratio)


def _prefill_checkpoint(rules: dict[str, Any], info: LinearStateInfo, cc: tuple[int, int] | None) -> bool:
    """vLLM align mode keeps one more state while a prefill exports its block-boundary checkpoint:
    every Mamba2 mixer; GDN only on FlashInfer's GDN prefill (SM90; SM10x/SM12x need key head dim 128)."""
    if info.kind in (rules.get("prefill_checkpoint_kinds") or ()):
        return True
    if info.kind != "gdn" or cc is None or cc[0] not in (rules.get("prefill_checkpoint_gdn_cc_major") or ()):
        return False
    need = rules.get("prefill_checkpoint_gdn_blackwell_key_head_dim")
    return cc[0] < 10 or need is None or info.state_size == int(need)


def build(rules: dict[str, Any], arch: ArchInfo, *, tp: int, attn_token_bytes: float, draft_tokens: int = 0,
          model_dtype: str = "bfloat16", cc: tuple[int, int] | None = None,
          architecture: str = "") -> RecurrentState | None:
    """The state for ``arch`` under an engine's ``rules``; None when the model keeps none (or its config
    lacks the shape) or the engine profile has no rules. ``attn_token_bytes``: KV bytes per token per
    attention layer per GPU (vLLM sizes the shared page from it)."""
    info = arch.linear_state
    if not rules or info is None or info.layers <= 0:
        return None
    dts = resolve_dtypes(rules, arch, model_dtype)
    rows_extra = int(rules.get("conv_rows_per_draft_token", 0)) * draft_tokens if info.kind != "mamba1" else 0
    rows_extra += int(rules.get("conv_window_rows_extra", 0))   # FastLLM keeps the full conv_kernel window
    conv_e, ssm_e, shape_in = layer_elements(info, tp, rows_extra)
    conv_b = conv_e * DTYPE_BYTES[dts.conv]
    ssm_b = ssm_e * DTYPE_BYTES[dts.ssm]
    raw = conv_b + ssm_b
    pool = str(rules.get("pool", "shared"))
    slots = int(rules.get("slots_per_request", 1)) + int(rules.get("slots_per_draft_token", 0)) * draft_tokens
    ckpt = int(rules.get("prefill_checkpoint_slots", 0)) if _prefill_checkpoint(rules, info, cc) else 0
    slots += ckpt
    align = int(rules.get("kernel_block_tokens", 1) or 1)
    page: float = raw
    block = 1
    if pool == "shared" and align > 1 and attn_token_bytes > 0:
        block = align * math.ceil(raw / (align * attn_token_bytes))
        page = block * attn_token_bytes
    ratio_slots = int(rules.get("slots_per_request", 1))
    if architecture and architecture in (rules.get("extra_buffer_architectures") or ()):
        ratio_slots += int(rules.get("extra_buffer_slots", 0))
    if pool == "split":
        slots = ratio_slots
    label = _KIND_LABEL.get(info.kind, info.kind)
    inputs: dict[str, Any] = {"layers": info.layers, **shape_in, "conv_dtype": dts.conv, "ssm_dtype": dts.ssm,
                              "conv_bytes": conv_b, "state_bytes": ssm_b}
    sources = [str(rules.get("shape_source", "")), dts.source]
    if pool == "shared":
        inputs.update({"page_bytes": page, "slots": slots, "prefill_checkpoint_slots": ckpt})
        formula = (f"{label} layers x page x slots; page = conv + state"
                   + (f", padded to the attention page of a {block}-token block" if block > 1 else ""))
        if block > 1:
            inputs["kv_block_tokens"] = block
        sources += [str(rules.get("pool_source", "")), str(rules.get("slots_source", ""))]
        if ckpt:
            sources.append(str(rules.get("prefill_checkpoint_source", "")))
        value = info.layers * page * slots
    else:
        inputs.update({"slots_per_running_request": ratio_slots,
                       "memory_ratio": float(rules.get("memory_ratio", 0.9))})
        formula = (f"{label} layers x (conv + state) x slots per running request; the state pool takes "
                   "r/(1+r) of the KV pool up front")
        sources += [str(rules.get("pool_source", "")), str(rules.get("slots_source", ""))]
        value = info.layers * raw * ratio_slots
    derived = Derived(value, "B/request/GPU", formula, inputs, "; ".join(s for s in sources if s))
    return RecurrentState(
        kind=info.kind, layers=info.layers, conv_bytes=conv_b, ssm_bytes=ssm_b, slots=slots, page_bytes=page,
        kv_block_tokens=block, pool=pool, memory_ratio=float(rules.get("memory_ratio", 0.0) or 0.0),
        max_slots_per_request=ratio_slots,
        spec_intermediate=draft_tokens if pool == "split" and rules.get("spec_intermediate") else 0,
        dtypes=dts, derived=derived, traffic_source=str(rules.get("traffic_source", "")))
