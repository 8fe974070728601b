"""KV pool: what is left of VRAM x memory share after weights, activations and graph buffers.

Engines budget differently (profiles/engine_memory.yaml ``covers``):
  all        (vLLM, FastLLM): pool = VRAM x share - weights/N - activation peak - non-torch - graphs
  weights_kv (SGLang):        pool = VRAM x share - weights/N; activations + graphs must fit in the rest
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.checkpoint.model import ArchInfo
from advisor.cost.derived import Derived
from advisor.cost.engine_profile import GIB, MIB, EngineMemory

ACT_BYTES = 2   # BF16/FP16 activations


@dataclass(frozen=True)
class MemoryBudget:
    share: Derived            # memory share used
    pool_bytes: Derived       # per GPU
    reserve_bytes: Derived    # activation + graphs + non-torch, per GPU
    fits: bool
    note: str = ""


def activation_bytes(arch: ArchInfo, tokens: int, seqs: int, tp: int) -> Derived:
    """Peak activation of one forward over ``tokens`` tokens (per GPU) + sampler logits of ``seqs``."""
    h = arch.hidden_size
    inter = arch.intermediate_size or 4 * h
    if arch.moe is not None and arch.moe.expert_intermediate_size:
        inter = max(inter if arch.intermediate_size else 0,
                    arch.moe.expert_intermediate_size * arch.moe.top_k)
    value = tokens * (2.0 * inter / tp + 4.0 * h) * ACT_BYTES + seqs * arch.vocab_size * 4.0
    return Derived(value, "B", "T x (2 x I/N + 4 x H) x 2 B + S x V x 4 B (gate_up output, residual "
                   "streams; fp32 sampler logits)",
                   {"T": tokens, "I": inter, "H": h, "N": tp, "S": seqs, "V": arch.vocab_size},
                   "estimate of the engine's profiled peak")


def sglang_reserved_mb(eng: EngineMemory, vram_gib: float, chunked: int, graph_bs: int, tp: int,
                       graphs: bool) -> Derived:
    r = eng.reserve
    act_tokens = max(chunked, int(r["min_activation_tokens"]))
    prefill_graphs = (5 + len(range(512, chunked + 1, 256))) if graphs and chunked >= 512 else 0
    mb = (r["base_mb"] + r["per_activation_token_mb"] * act_tokens + r["per_tp_mb"] * tp
          + (r["per_graph_bs_mb"] * graph_bs if graphs else 0) + r["per_prefill_graph_mb"] * prefill_graphs)
    if vram_gib > 60:
        mb = max(mb, r["floor_mb_above_60gib"])
    return Derived(mb, "MB", "512 + 1.5 x max(chunked, 2048) + 128 x tp + 2 x graph_max_bs "
                   "+ 8 x prefill_graphs (>= 10240 above 60 GiB)",
                   {"chunked": chunked, "graph_max_bs": graph_bs if graphs else 0, "tp": tp,
                    "prefill_graphs": prefill_graphs, "vram_gib": vram_gib}, r["source"])


def graph_max_bs(eng: EngineMemory, vram_gib: float, tp: int, max_batch: int) -> int:
    tier = eng.sglang_tier(vram_gib)
    if tier is None:
        return max_batch
    return min(max_batch, tier["graph_max_bs_tp4"] if tp >= 4 else tier["graph_max_bs"])


def default_share(eng: EngineMemory, vram_bytes: float, chunked: int, max_batch: int, tp: int,
                  graphs: bool) -> Derived:
    if eng.share_default is not None:
        return Derived(eng.share_default, "fraction", f"{eng.share_flag} default", {}, eng.share_source)
    vram_mib = vram_bytes / MIB
    res = sglang_reserved_mb(eng, vram_bytes / GIB, chunked, graph_max_bs(eng, vram_bytes / GIB, tp, max_batch),
                             tp, graphs)
    share = round((vram_mib - res.value) / vram_mib, 3)
    return Derived(share, "fraction", "(VRAM_MiB - reserved_mb) / VRAM_MiB",
                   {"VRAM_MiB": vram_mib, "reserved_mb": res.value}, eng.share_source)


def budget(eng: EngineMemory, arch: ArchInfo, *, vram_bytes: float, weight_bytes: float, share: float,
           chunked: int, max_batch: int, tp: int, graphs: bool) -> MemoryBudget:
    """KV pool per GPU for one setting (``weight_bytes`` already divided by TP)."""
    act = activation_bytes(arch, chunked, max_batch, tp)
    r = eng.reserve
    if eng.share_covers == "weights_kv":
        res = sglang_reserved_mb(eng, vram_bytes / GIB, chunked, graph_max_bs(eng, vram_bytes / GIB, tp, max_batch),
                                 tp, graphs)
        reserve = Derived(res.value * MIB, "B", "outside the share: " + res.formula, res.inputs, res.source)
        pool = vram_bytes * share - weight_bytes
        fits = vram_bytes * (1 - share) >= max(act.value, 0.0) and pool > 0
        return MemoryBudget(
            Derived(share, "fraction", eng.share_flag, {}, eng.share_source),
            Derived(pool, "B", "VRAM x share - weights/N",
                    {"VRAM": vram_bytes, "share": share, "weights/N": weight_bytes}, eng.share_source),
            reserve, fits,
            "" if fits else "activations would not fit in VRAM x (1 - share): lower the share or chunked prefill")
    non_torch = float(r.get("non_torch_gib", 0.0)) * GIB
    graph = float(r.get("cuda_graph_gib", 0.0)) * GIB if graphs else 0.0
    reserve_v = act.value + non_torch + graph
    reserve = Derived(reserve_v, "B", "activation peak + non-torch + CUDA graphs",
                      {"activation": act.value, "non_torch": non_torch, "cuda_graphs": graph,
                       "activation_formula": act.formula},
                      f"{r.get('activation_source', '')}; {r.get('non_torch_source', '')}; "
                      f"{r.get('cuda_graph_source', '')}")
    pool = vram_bytes * share - weight_bytes - reserve_v
    return MemoryBudget(
        Derived(share, "fraction", eng.share_flag, {}, eng.share_source),
        Derived(pool, "B", "VRAM x share - weights/N - reserve",
                {"VRAM": vram_bytes, "share": share, "weights/N": weight_bytes, "reserve": reserve_v},
                eng.share_source),
        reserve, pool > 0, "" if pool > 0 else "weights and reserves exceed VRAM x share: no KV pool")
