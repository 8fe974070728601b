"""One step's attention over every KV layer: measured per layer where the card has evidence (16-bit or
FP8 KV, no MLA), else the KV bytes over the estimated bandwidth against the attention FLOPs (decode), or
the FLOPs over the MMA rate (prefill); a KV cache the kernel cannot read as stored adds its unpack.

Linear-attention layers (GDN, KDA, Mamba) keep a recurrent state instead of KV: a Gated-DeltaNet layer is
charged the measured layer of the card's nearest measured system (decode: conv update + recurrent step at
the state bytes it loads and stores; prefill: conv + chunked scan at the chunk's tokens, latency per token,
advisor.cost.measured.linear_attention_time); a Mamba2 layer's decode per kernel (advisor.cost.mamba2_cost:
the measured conv update, the SSM update and gated norm at least the measured small kernel); other kinds, or
a card without such a table, keep an estimate (state bytes over the estimated bandwidth; nominal FLOPs at the
attention MMA peak), labelled."""

from __future__ import annotations

import math

from advisor.checkpoint.model import ArchInfo
from advisor.cost import mamba2_cost, measured
from advisor.cost.efficiency import KV_DEQUANT_INSTR, THREADS_PER_WARP
from advisor.cost.kv import KvDtype, KvLayout
from advisor.cost.measured import Measured, Ops
from advisor.cost.rates import Rates
from advisor.cost.recurrent_state import RecurrentState
from advisor.cost.step_costs import Attention

# Attention MMA classes that consume FP8 KV natively (no unpack before the MMA).
_FP8_NATIVE_ATTN = ("qmma_e4m3", "wgmma_e4m3", "tcgen05_e4m3")


def _dims(arch: ArchInfo, decode: bool) -> tuple[float, float, float]:
    a = arch
    if a.mla is not None:
        m = a.mla
        if decode:   # absorbed MLA: scores and values in the latent space
            return a.num_attention_heads, m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank
        return (a.num_attention_heads, (m.qk_nope_head_dim or m.kv_lora_rank // 4) + m.qk_rope_head_dim,
                m.v_head_dim or m.kv_lora_rank // 4)
    d = a.head_dim or a.hidden_size // max(a.num_attention_heads, 1)
    return a.num_attention_heads, d, d


def flops(arch: ArchInfo, layers: KvLayout, queries_ctx_pairs_full: float, pairs_window: float,
          decode: bool) -> float:
    """2 x H x (d_qk + d_v) FLOPs per (query, key) pair, over the full and sliding-window layers of
    ``layers`` (the KV layout on one GPU)."""
    h, dqk, dv = _dims(arch, decode)
    return 2.0 * h * (dqk + dv) * (layers.full_layers * queries_ctx_pairs_full
                                     + layers.window_layers * pairs_window)


def sum_window_pairs(done: int, t: int, w: int) -> float:
    """Sum over queries done+1..done+t of min(position, w)."""
    lo, hi = done + 1, done + t
    if hi <= w:
        return (lo + hi) * t / 2
    if lo > w:
        return float(t * w)
    below = (lo + w) * (w - lo + 1) / 2
    return below + (hi - w) * w


def _measured_dtype(kv: KvDtype) -> str:
    """The measured KV dtype nearest ``kv`` (a narrower cache than FP8 is read by an FP8-class kernel)."""
    return {"bf16": "bfloat16", "fp16": "bfloat16", "fp32": "bfloat16"}.get(kv.kind, "fp8")


def decode(rates: Rates, arch: ArchInfo, ops: Ops | None, attn_mma: str, kvl: KvLayout, one_gpu: KvLayout,
           batch: int, context: float, kv: KvDtype, tp: int, queries: int, unknown: set[str]) -> Attention:
    """Decode attention over every KV layer of ``kvl`` (per GPU; ``one_gpu``: the layout at TP 1, whose
    layers the FLOPs count) for ``batch`` sequences at ``context`` tokens, ``queries`` positions each."""
    a = arch
    win = context if kvl.window is None else min(context, kvl.window)
    dt = _measured_dtype(kv)
    kv_bytes = batch * kvl.request_bytes(kv, context)
    t_kvdeq = 0.0          # issue time to unpack a cache the kernel cannot read as it is stored
    if kv.kind in KV_DEQUANT_INSTR and not (kv.kind == "fp8" and attn_mma in _FP8_NATIVE_ATTN):
        values = kv_bytes / (kv.bits / 8.0)
        t_kvdeq = rates.issue_time(values * KV_DEQUANT_INSTR[kv.kind][0] / THREADS_PER_WARP, unknown)
    if ops is not None and ops.measured and a.mla is None and batch > 0 and (kvl.full_layers or kvl.window_layers):
        kv_heads = max(1, math.ceil((a.num_kv_heads or a.num_attention_heads) / max(tp, 1)))
        d = int(a.head_dim or a.hidden_size // max(a.num_attention_heads, 1))
        out: list[tuple[int, Measured]] = []
        for layers, c, window in ((kvl.full_layers, context, False), (kvl.window_layers, win, True)):
            if layers:
                nbytes = batch * max(c, 1.0) * kvl.bytes_per_token_layer(kv, window=window)
                got = measured.decode_attention_time(ops.evidence.gpu, batch, max(c, 1.0), kv_heads, d, dt,
                                                     engine=ops.engine, evidence=ops.evidence, nbytes=nbytes)
                if got.seconds is None:
                    out = []
                    break
                out.append((layers, got))
        if out:
            work = sum(n * ((g.seconds or 0.0) - (g.fixed_s or 0.0)) for n, g in out) * ops.bandwidth_scale
            floor = sum(n * (g.fixed_s or 0.0) for n, g in out)
            g = out[0][1]
            # a cache read by another dtype's kernel (FP8 KV on a system measured in BF16 only, a 4-bit
            # cache) is unpacked on top of the measured read
            unpack = t_kvdeq if f"(KV {dt})" not in g.source or kv.kind not in ("bf16", "fp16", "fp8") else 0.0
            return Attention(work, unpack, floor, sum(n for n, _ in out),
                             "; ".join(x for x in (g.source, g.scaling, g.note, "+ unpack issue time (estimate, "
                                                   "KV_DEQUANT_INSTR)" if unpack else "") if x))
    attn = flops(arch, one_gpu, batch * queries * context, batch * queries * win, decode=True) / tp
    t_attn = rates.mma_time(attn, attn_mma, unknown)
    return Attention(kv_bytes / rates.bw("kv"), t_attn + t_kvdeq, 0.0, 0.0, "")


def prefill(rates: Rates, arch: ArchInfo, ops: Ops | None, attn_mma: str, kvl: KvLayout, one_gpu: KvLayout,
            done: int, t: int, tp: int, unknown: set[str]) -> Attention:
    """Causal attention of a ``t``-token chunk after ``done`` tokens, every KV layer: the measured
    context-attention kernel at the chunk's work (its (query, key) pairs as an equivalent prompt
    length), or FLOPs over the estimated rate."""
    full_pairs = t * done + t * (t + 1) / 2                      # causal (query, key) pairs
    win_pairs = full_pairs if kvl.window is None else sum_window_pairs(done, t, kvl.window)
    a = arch
    if ops is not None and ops.measured and a.mla is None and (kvl.full_layers or kvl.window_layers):
        heads = max(1, math.ceil(a.num_attention_heads / max(tp, 1)))
        d = int(a.head_dim or a.hidden_size // max(a.num_attention_heads, 1))
        out: list[tuple[int, Measured]] = []
        for layers, pairs in ((kvl.full_layers, full_pairs), (kvl.window_layers, win_pairs)):
            if layers:
                got = measured.context_attention_time(ops.evidence.gpu, 1, math.sqrt(2.0 * pairs), heads, d,
                                                      engine=ops.engine, evidence=ops.evidence)
                if got.seconds is None:
                    out = []
                    break
                out.append((layers, got))
        if out:
            work = sum(n * ((g.seconds or 0.0) - (g.fixed_s or 0.0)) for n, g in out) / rates.clock_factor
            floor = sum(n * (g.fixed_s or 0.0) for n, g in out)
            g = out[0][1]
            return Attention(0.0, work, floor, sum(n for n, _ in out),
                             "; ".join(x for x in (g.source, g.scaling, g.note, "chunk after a prefix as the "
                                                   "prompt length with the same causal (query, key) pairs") if x))
    ca = rates.mma_time(flops(arch, one_gpu, full_pairs, win_pairs, decode=False) / tp, attn_mma, unknown)
    return Attention(0.0, ca, 0.0, 0.0, "")


GDN_CALLS = 2      # kernels per GDN layer and phase in the measured tables (conv + recurrence / scan)


def _linear_label(g: Measured, what: str) -> str:
    return "; ".join(x for x in (g.source, g.scaling, g.note, what) if x)


def linear_decode(rates: Rates, ops: Ops | None, st: RecurrentState | None, batch: int,
                  verify_tokens: int = 1, inner: int = 0) -> Attention:
    """The linear-attention layers of one decode step: each loads its state and stores it per verified
    position (``st.step_bytes``); measured per GDN layer at those bytes, Mamba2 layers per kernel
    (advisor.cost.mamba2_cost; ``inner``: the mixer's inner width per GPU), else the bytes over the
    estimated bandwidth."""
    if st is None or batch <= 0 or st.layers <= 0:
        return Attention(0.0, 0.0, 0.0, 0.0, "")
    total = batch * st.step_bytes(verify_tokens)
    if st.kind == "mamba2":
        got_m = mamba2_cost.decode(rates, ops, st, batch, verify_tokens, inner)
        if got_m is not None:
            return got_m
    if ops is not None and ops.measured:
        got = measured.linear_attention_time(ops.evidence.gpu, "decode", total / st.layers, kind=st.kind,
                                             engine=ops.engine, evidence=ops.evidence)
        if got.seconds is not None:
            fixed = got.fixed_s or 0.0
            what = ("measured at one position; the stores of further verified positions charged as bytes"
                    if verify_tokens > 1 else "")
            return Attention(st.layers * (got.seconds - fixed) * ops.bandwidth_scale, 0.0, st.layers * fixed,
                             st.layers * GDN_CALLS, _linear_label(got, what))
        why = got.note
    else:
        why = "no measured system for this card"
    return Attention(total / rates.bw("kv"), 0.0, 0.0, 0.0,
                     f"estimate: state bytes / (DRAM x bandwidth_eff.kv), no launch floor ({why})")


def linear_nominal_flops(arch: ArchInfo, tokens: float, tp: int) -> float:
    """Nominal FLOPs of one linear-attention layer's chunked scan over ``tokens`` tokens on one of ``tp``
    GPUs: 8 x tokens x value heads/N x key dim x value dim (the state-sized products per token; the
    estimate's work where no table applies)."""
    info = arch.linear_state
    if info is None:
        return 0.0
    heads = math.ceil(info.num_heads / max(tp, 1)) if info.num_heads else 0
    return 8.0 * tokens * heads * info.state_size * info.head_dim


def linear_prefill(rates: Rates, arch: ArchInfo, ops: Ops | None, attn_mma: str, t: int, tp: int,
                   unknown: set[str]) -> Attention:
    """The linear-attention layers of one ``t``-token prefill chunk (conv + chunked scan; the state carries
    the prefix, so the chunk's own tokens are the work): measured per GDN layer at the chunk's tokens, else
    the nominal FLOPs at the attention MMA's peak (an estimate and a lower bound: the measured scans are
    latency-bound far below it)."""
    info = arch.linear_state
    if info is None or info.layers <= 0 or t <= 0:
        return Attention(0.0, 0.0, 0.0, 0.0, "")
    work = linear_nominal_flops(arch, t, tp)
    if work <= 0:
        return Attention(0.0, 0.0, 0.0, 0.0, "")
    if ops is not None and ops.measured:
        got = measured.linear_attention_time(ops.evidence.gpu, "prefill", t, heads=math.ceil(info.num_heads / tp),
                                             kind=info.kind, engine=ops.engine, evidence=ops.evidence)
        if got.seconds is not None:
            fixed = got.fixed_s or 0.0
            return Attention(0.0, info.layers * (got.seconds - fixed) / rates.clock_factor, info.layers * fixed,
                             info.layers * GDN_CALLS, _linear_label(got, ""))
        why = got.note
    else:
        why = "no measured system for this card"
    return Attention(0.0, rates.mma_time(info.layers * work, attn_mma, unknown), 0.0, 0.0,
                     f"estimate: nominal scan FLOPs (8 x tokens x heads x key dim x value dim) at the {attn_mma} "
                     f"peak, no launch floor; a lower bound ({why})")
