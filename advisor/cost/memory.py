"""The KV pool: what is left of VRAM x memory share once the engine holds everything else, term by term.

  pool = total VRAM x share - sum(terms)                                   (per GPU)

The terms and their parameters come from the engine's memory profile
(profiles/engine_memory/<engine>-<version>.yaml ``memory.terms``), each with the engine source line that
allocates it; this module only knows how to size each kind of term:

  cuda_context      CUDA context, cuBLAS (+ NCCL under TP) inside the measured budget (x share where the
                    engine scales its baseline by the share: SGLang)
  weights           the checkpoint as the engine holds it resident (its in-memory layout, e.g. FastLLM's
                    12-byte NVFP4 blocks), the MTP head only when the engine loads it
  draft_weights     a separate draft (EAGLE / DFlash / draft model) and a quantized copy of its head
  non_torch         allocations outside the torch allocator made after the engine's baseline
  moe_workspace     the fused-MoE workspace sized for the largest profiled batch (kept by vLLM)
  activation_peak   one layer's live activations for the largest forward (the profile run)
  sampler           logits and sampler buffers for the largest batch of sequences
  cuda_graphs       the CUDA-graph pool (first capture + per graph)
  warmup_cache      activations of the warm-up forward that the engine's own allocator keeps (FastLLM)
  runtime_headroom  the engine's safety margin (FastLLM: min(max(512 MiB, 1 % of VRAM), 2 GiB, avail / 4))
  runtime_reserve   logits / sampling buffers the engine reserves for max batch (FastLLM)
  spec_snapshots    recurrent-state snapshots for speculative verification (FastLLM hybrid models)
  delayed_pages     one more layer's K+V page per page, held back (FastLLM; last: a share of the rest)

Engines whose share budgets only weights and KV (SGLang, ``covers: weights_kv``) keep activations and
graphs in VRAM x (1 - share); the auto share reserves that room (``sglang_reserved_mb``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from advisor.checkpoint.model import ArchInfo
from advisor.cost.derived import Derived
from advisor.cost.engine_profile import GIB, MIB, EngineMemory
from advisor.cost.weights import WeightModel

ACT_BYTES = 2   # BF16/FP16 activations


@dataclass(frozen=True)
class SpecMemory:
    """What speculative decoding adds to memory (the draft's KV is in the KV layout, not here)."""

    method: str
    draft_tokens: int
    draft_bytes: float          # a separate draft's weights as loaded, all GPUs together (0: none / MTP head)
    draft_source: str
    head_copy_bytes: float = 0.0   # a quantized copy of the output head for the draft, all GPUs
    head_copy_source: str = ""
    snapshot_bytes: float = 0.0    # one request's linear-attention state (all layers), per GPU


@dataclass(frozen=True)
class MemoryInputs:
    arch: ArchInfo
    weights: WeightModel
    vram_bytes: float
    share: float
    tp: int
    tokens: int                 # the largest forward: vLLM max_num_batched_tokens, FastLLM chunked prefill
    max_batch: int
    graphs: bool
    cc: tuple[int, ...] = (0, 0)
    spec: SpecMemory | None = None
    kv_layers: int = 0          # attention layers whose KV pages the pool holds (draft layers included)


@dataclass(frozen=True)
class MemoryBudget:
    share: Derived
    pool_bytes: Derived         # per GPU
    reserve_bytes: Derived      # every term but the weights, per GPU
    fits: bool
    note: str = ""
    terms: tuple[tuple[str, Derived], ...] = ()
    budget_bytes: Derived | None = None


# ------------------------------------------------------------------ sizes shared by several terms

def _intermediate(arch: ArchInfo) -> int:
    """The dense MLP width a forward keeps alive (MoE models: shared experts, else 0)."""
    if arch.moe is not None:
        shared = arch.moe.shared_expert_intermediate_size or 0
        return int(shared * max(arch.moe.num_shared_experts, 1) if shared else 0)
    return int(arch.intermediate_size or 4 * arch.hidden_size)


def layer_live_bytes(arch: ArchInfo, tokens: int, tp: int, streams: int) -> tuple[float, dict[str, Any]]:
    """One layer's live activations for ``tokens`` tokens: residual streams + the wider of the attention
    projection and the MLP (gate_up + activation output), per GPU, 16-bit."""
    h = arch.hidden_size
    heads = arch.num_attention_heads or 0
    kv_heads = arch.num_kv_heads or heads
    hd = arch.head_dim or (h // heads if heads else 0)
    qkv = (heads + 2 * kv_heads) * hd / tp
    inter = _intermediate(arch)
    mlp = 3.0 * inter / tp
    per_token = (streams * h + max(qkv, mlp)) * ACT_BYTES
    return tokens * per_token, {"T": tokens, "H": h, "residual_streams": streams, "qkv/N": qkv,
                                "I": inter, "N": tp}


def _resident(eng_term: dict, x: MemoryInputs) -> tuple[float, dict[str, Any], list[str]]:
    layouts = eng_term.get("layout") or {}
    drafting = x.spec.method if x.spec is not None and x.spec.draft_tokens > 0 else None
    skip_mtp = bool(eng_term.get("mtp_only_when_drafting")) and drafting != "mtp"
    # parts the engine keeps in host memory with some draft methods (FastLLM + DFlash: the embedding)
    on_host = {kind: rule for kind, rule in (eng_term.get("on_host") or {}).items()
               if drafting in (rule.get("with_methods") or ())}
    total, stored, whole = 0.0, 0.0, 0.0     # whole: replicated groups every rank holds (weights.REPLICATED_NAMES)
    changed: dict[str, float] = {}
    sources: list[str] = []
    host = 0.0
    for p in x.weights.parts:
        if skip_mtp and p.kind == "mtp":
            continue
        if p.kind in on_host:
            host += p.stored_bytes
            continue
        stored += p.stored_bytes
        lay = next((v for k, v in layouts.items() if k.upper() in p.scheme.upper()), None)
        if lay is not None and p.params:
            b = p.params * float(lay["bytes_per_param"])
            changed[p.scheme] = changed.get(p.scheme, 0.0) + b - p.stored_bytes
            sources.append(str(lay.get("source", "")))
            total += b
            whole += b if p.replicated else 0.0
        else:
            total += p.stored_bytes
            whole += p.stored_bytes if p.replicated else 0.0
    inputs: dict[str, Any] = {"stored": stored, "N": x.tp}
    for scheme, delta in changed.items():
        inputs[f"layout_delta.{scheme}"] = delta
    if skip_mtp and any(p.kind == "mtp" for p in x.weights.parts):
        inputs["mtp_head_not_loaded"] = sum(p.stored_bytes for p in x.weights.parts if p.kind == "mtp")
    if host:
        inputs["on_host"] = host
        sources += [str(r.get("source", "")) for r in on_host.values()]
    if whole and x.tp > 1:
        inputs["replicated"] = whole
    return (total - whole) / x.tp + whole, inputs, sorted(set(sources))


# ------------------------------------------------------------------ the terms

def _cuda_context(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    gib = float(t.get("gib", 0.0)) + (float(t.get("tp_gib", 0.0)) if x.tp > 1 else 0.0)
    scale = x.share if t.get("scaled_by_share") else 1.0
    formula = "CUDA context + cuBLAS" + (" + NCCL (TP)" if x.tp > 1 and t.get("tp_gib") else "")
    if t.get("scaled_by_share"):
        formula = f"({formula}) x share (the share applies to what was free after it)"
    return Derived(gib * GIB * scale, "B", formula, {"GiB": gib, "share_scale": scale}, t["source"])


def _weights(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    value, inputs, layout_sources = _resident(t, x)
    formula = "stored weights in the engine's resident layout / N"
    if "replicated" in inputs:
        formula = "(stored weights in the engine's resident layout - replicated) / N + replicated"
        layout_sources = [*layout_sources, f"replicated: {x.weights.replicated_source()}"]
    return Derived(value, "B", formula, inputs, "; ".join([t["source"], *layout_sources]))


def _draft_weights(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    s = x.spec
    if s is None or not s.draft_tokens or (s.draft_bytes <= 0 and s.head_copy_bytes <= 0):
        return None
    value = (s.draft_bytes + s.head_copy_bytes) / x.tp
    return Derived(value, "B", "(draft weights + quantized head copy) / N",
                   {"draft": s.draft_bytes, "head_copy": s.head_copy_bytes, "N": x.tp, "method": s.method},
                   "; ".join(v for v in (t["source"], s.draft_source, s.head_copy_source) if v))


def _non_torch(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    gib = float(t.get("gib", 0.0))
    return Derived(gib * GIB, "B", "allocations outside torch after the baseline", {"GiB": gib}, t["source"])


def _moe_workspace(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    moe = x.arch.moe
    if moe is None or not moe.expert_intermediate_size or not moe.top_k:
        return None
    h, i, k, m = x.arch.hidden_size, moe.expert_intermediate_size / x.tp, moe.top_k, x.tokens
    value = m * k * (max(i, h) + max(2 * i, h)) * ACT_BYTES
    return Derived(value, "B", "M x top_k x (max(I/N, H) + max(2 I/N, H)) x 2 B",
                   {"M": m, "top_k": k, "I": moe.expert_intermediate_size, "H": h, "N": x.tp}, t["source"])


def _activation(t: dict, x: MemoryInputs, remaining: float, tokens: int | None = None) -> Derived:
    value, inputs = layer_live_bytes(x.arch, tokens or x.tokens, x.tp, int(t.get("residual_streams", 2)))
    return Derived(value, "B", "T x (streams x H + max(qkv/N, 3 x I/N)) x 2 B", inputs, t["source"])


def _sampler(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    v = x.arch.vocab_size
    if not v:
        return None
    rows = max(1, min(x.tokens, x.max_batch))
    per = float(t.get("bytes_per_logit", 4.0))
    spec = float(t.get("spec_bytes_per_logit", 0.0)) if x.spec is not None and x.spec.draft_tokens else 0.0
    value = rows * v * (per + spec)
    return Derived(value, "B", "rows x V x bytes per logit (+ rejection-sampler logits when drafting)",
                   {"rows": rows, "V": v, "bytes_per_logit": per, "spec_bytes_per_logit": spec}, t["source"])


def capture_sizes(t: dict, x: MemoryInputs) -> list[int]:
    """vLLM's default CUDA-graph capture sizes (config/vllm.py _set_cudagraph_sizes)."""
    q = 1 + (x.spec.draft_tokens if x.spec is not None else 0)
    ceiling = int(t.get("max_capture_sm100", 0) or 0) if x.cc[0] == 10 else 0
    ceiling = ceiling or int(t.get("max_capture", 512))
    top = max(1, min(2 * x.max_batch * q, ceiling, x.tokens))
    sizes = [n for n in (1, 2, 4) if n <= top] + list(range(8, min(top + 1, 256), 8)) + list(range(256, top + 1, 16))
    if top not in sizes:
        sizes.append(top)
    return sorted(set(sizes))


def _cuda_graphs(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    if not x.graphs:
        return None
    if "gib" in t:
        gib = float(t["gib"])
        return Derived(gib * GIB, "B", "graph workspace reserve", {"GiB": gib}, t["source"])
    sizes = capture_sizes(t, x)
    first, _ = layer_live_bytes(x.arch, sizes[-1], x.tp, 2)
    layers = x.arch.num_layers
    per = (float(t.get("per_graph_mib", 0.0)) + float(t.get("per_graph_mib_per_layer", 0.0)) * layers) * MIB
    value = first + per * (len(sizes) - 1)
    return Derived(value, "B", "first capture (live activations at the largest size) + per graph x (graphs - 1); "
                   "per graph = layers x MiB per layer (piecewise graphs split at every attention)",
                   {"graphs": len(sizes), "largest": sizes[-1], "first_capture": first, "layers": layers,
                    "per_graph_MiB": per / MIB}, t["source"])


def _warmup_cache(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    d = _activation(t, x, remaining)
    return Derived(d.value, "B", "warm-up prefill kept by the engine's pool: " + d.formula, d.inputs, d.source)


def _runtime_headroom(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    floor = max(float(t.get("min_mib", 0)) * MIB, x.vram_bytes * float(t.get("total_fraction", 0.0)))
    value = min(floor, float(t.get("max_gib", 1e9)) * GIB, max(remaining, 0.0) * float(t.get("avail_fraction", 1.0)))
    return Derived(max(value, 0.0), "B", "min(max(512 MiB, 1 % of VRAM), 2 GiB, available / 4)",
                   {"VRAM": x.vram_bytes, "available": remaining}, t["source"])


def _runtime_reserve(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    v, b = x.arch.vocab_size or 0, max(1, x.max_batch)
    per = float(t.get("logits_bytes_per_row_vocab", 4.0))
    scratch = float(t.get("scratch_mib", 0.0)) * MIB
    value = b * v * per + b * 4 + scratch
    return Derived(value, "B", "max batch x V x (4 + 2) B + max batch x 4 B + scratch",
                   {"max_batch": b, "V": v, "bytes_per_row_vocab": per, "scratch_MiB": scratch / MIB}, t["source"])


def _spec_snapshots(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    s = x.spec
    if s is None or not s.draft_tokens or s.snapshot_bytes <= 0:
        return None
    b, k = max(1, x.max_batch), s.draft_tokens
    if x.tp > 1:
        slots, formula = b * (k + 1), "max batch x (drafts + 1) x state (TP keeps every prefix snapshot)"
    else:
        cap = int(t.get("snapshot_batch_max", 4))
        slots, formula = max(b, min(b, cap) * (k + 1)), "max(batch, min(batch, 4) x (drafts + 1)) x state"
    return Derived(slots * s.snapshot_bytes, "B", formula,
                   {"max_batch": b, "drafts": k, "slots": slots, "state_per_slot": s.snapshot_bytes},
                   t["source"])


def _delayed_pages(t: dict, x: MemoryInputs, remaining: float) -> Derived | None:
    """FastLLM sizes every page with one more layer's K+V page held back ("delayed paged cache"): of what
    is left, 1 / (KV layers + 1) never becomes KV."""
    if x.kv_layers <= 0 or remaining <= 0:
        return None
    value = remaining / (x.kv_layers + 1)
    return Derived(value, "B", "what is left / (KV layers + 1): each page carries one more layer's page",
                   {"available": remaining, "kv_layers": x.kv_layers}, t["source"])


TERMS: dict[str, Callable[[dict, MemoryInputs, float], Derived | None]] = {
    "cuda_context": _cuda_context, "weights": _weights, "draft_weights": _draft_weights,
    "non_torch": _non_torch, "moe_workspace": _moe_workspace, "activation_peak": _activation,
    "sampler": _sampler, "cuda_graphs": _cuda_graphs, "warmup_cache": _warmup_cache,
    "runtime_headroom": _runtime_headroom, "runtime_reserve": _runtime_reserve,
    "spec_snapshots": _spec_snapshots, "delayed_pages": _delayed_pages,
}


def terms(eng: EngineMemory, x: MemoryInputs) -> tuple[tuple[str, Derived], ...]:
    """Every term the profile lists, in its order (each sees what the earlier ones left)."""
    out: list[tuple[str, Derived]] = []
    remaining = x.vram_bytes * x.share
    for name, params in (eng.memory.get("terms") or {}).items():
        d = TERMS[name](params, x, remaining)
        if d is not None:
            out.append((name, d))
            remaining -= d.value
    return tuple(out)


def resident_weights(eng: EngineMemory, x: MemoryInputs) -> float:
    """Weights per GPU as the engine holds them (the stored size when the profile has no weights term)."""
    t = (eng.memory.get("terms") or {}).get("weights")
    return _resident(t, x)[0] if t else x.weights.resident_bytes(x.tp)


# ------------------------------------------------------------------ SGLang's automatic share

def activation_bytes(arch: ArchInfo, tokens: int, seqs: int, tp: int) -> Derived:
    """Peak activation of one forward over ``tokens`` tokens (per GPU) + fp32 sampler logits of ``seqs``."""
    live, inputs = layer_live_bytes(arch, tokens, tp, 2)
    value = live + seqs * arch.vocab_size * 4.0
    return Derived(value, "B", "T x (streams x H + max(qkv/N, 3 x I/N)) x 2 B + S x V x 4 B",
                   {**inputs, "S": seqs, "V": arch.vocab_size}, "estimate of one forward's live set")


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


# ------------------------------------------------------------------ the budget

def budget(eng: EngineMemory, x: MemoryInputs) -> MemoryBudget:
    """KV pool per GPU for one setting: VRAM x share minus every term of the engine's profile."""
    b = eng.memory.get("budget") or {}
    share = Derived(x.share, "fraction", eng.share_flag, {}, eng.share_source)
    gross = Derived(x.vram_bytes * x.share, "B", str(b.get("formula", "VRAM x share")),
                    {"VRAM": x.vram_bytes, "share": x.share},
                    "; ".join(v for v in (str(b.get("source", "")) or eng.share_source,
                                          f"outside the budget: {b['outside']}" if b.get("outside") else "") if v))
    ts = terms(eng, x)
    held = sum(d.value for _, d in ts)
    others = [(n, d) for n, d in ts if n != "weights"]
    weights = next((d.value for n, d in ts if n == "weights"), 0.0)
    pool_v = gross.value - held
    pool = Derived(pool_v, "B", "VRAM x share - " + " - ".join(n for n, _ in ts),
                   {"budget": gross.value, **{n: d.value for n, d in ts}}, gross.source)
    reserve = Derived(sum(d.value for _, d in others), "B", " + ".join(n for n, _ in others) or "none",
                      {n: d.value for n, d in others}, "; ".join(dict.fromkeys(d.source for _, d in others)))
    if eng.share_covers == "weights_kv":
        # activations and graphs live outside the share: they must fit in VRAM x (1 - share)
        gib = x.vram_bytes / GIB
        outside = sglang_reserved_mb(eng, gib, x.tokens, graph_max_bs(eng, gib, x.tp, x.max_batch), x.tp, x.graphs)
        act = activation_bytes(x.arch, x.tokens, x.max_batch, x.tp)
        reserve = Derived(outside.value * MIB, "B", "outside the share: " + outside.formula, outside.inputs,
                          outside.source)
        fits = x.vram_bytes * (1 - x.share) >= max(act.value, 0.0) and pool_v > 0
        note = "" if fits else "activations would not fit in VRAM x (1 - share): lower the share or chunked prefill"
        return MemoryBudget(share, pool, reserve, fits, note, ts, gross)
    fits = pool_v > 0
    note = "" if fits else ("the weights alone exceed VRAM x share: no KV pool" if weights >= gross.value else
                            "weights and the engine's other memory exceed VRAM x share: no KV pool")
    return MemoryBudget(share, pool, reserve, fits, note, ts, gross)
