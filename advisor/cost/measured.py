"""Operator times from measured silicon: GEMM, MoE layer, attention, GDN layer and all-reduce, for any GPU.

The evidence is NVIDIA AIConfigurator's operator tables (aiconfigurator-core 0.12.0, distilled
into profiles/calibration/ by benchmarks/distill_aiconfigurator.py). Each table gives a fixed
cost per call and a work efficiency against a roofline built from OUR GPU table's figures, so a
measurement carries to another card of the same architecture by recomputing the roofline with that
card's bandwidth and peaks (and its fixed cost by the clock ratio):

    t = fixed x clock_system / clock_card + roofline_card / e

Every GPU gets the nearest measured system (``evidence_for``): the card itself, else a system of the
same compute capability (nearest bandwidth), else of the same architecture (nearest sm_XY), else
none ("no measured system of this architecture", e.g. Turing). A ``microbench`` calibration of the
user's own card overrides the streaming rate of the kernel classes it measured (decode M <= 16).
Every answer says which table, which engine kernel, and which scaling it used.

One module over ~400 lines on purpose: every operator (GEMM, MoE, attention, GDN, all-reduce) is carried to
the card by the same formula from the same Evidence and table choice, so they are read and changed
together; loading and validating the tables lives in advisor.cost.measured_tables, the per-module-group
charges in advisor.cost.measured_kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from advisor import engines
from advisor.calibration import ENGINE_KERNEL_CLASSES, Calibration
from advisor.cost import measured_tables as mt
from advisor.cost.derived import Derived
from advisor.gpu_spec import NOT_SUPPORTED, GpuSpec

ENGINE_ORDER = ("vllm", "sglang", "trtllm")   # whose measurement stands in when the asked engine has none
CALIBRATED_MAX_M = 16                        # microbench measures the streaming (decode) regime only
E_BOUND = 0.999                              # a fitted MoE efficiency at its bound (1.0): not a rate

# Kernel class (advisor.cost.efficiency.KERNEL_CLASS values) -> measured dtypes, nearest first.
GEMM_DTYPES = {
    "bf16": ("bfloat16",), "a8_native": ("fp8", "fp8_block", "sq"), "a4_native": ("nvfp4",),
    "w4a16_int4": ("int4_wo",), "w4a16_nvfp4": ("int4_wo",), "w8a16_fp8": ("int8_wo",),
}
MOE_DTYPES = {
    "bf16": ("bfloat16",), "a8_native": ("fp8", "fp8_block", "w4a8_mxfp4_mxfp8"), "a4_native": ("nvfp4",),
    "w4a16_int4": ("int4_wo",), "w4a16_nvfp4": ("w4a16_mxfp4", "int4_wo"), "w8a16_fp8": ("int4_wo",),
}
# Measured dtypes that stand in for another format of the same width (a weight-only kernel of that width).
STAND_IN = {("w4a16_nvfp4", "int4_wo"): "INT4 weight-only kernel as the nearest measured 4-bit weight-only GEMM",
            ("w8a16_fp8", "int8_wo"): "INT8 weight-only kernel as the nearest measured 8-bit weight-only GEMM"}
MOE_STAND_IN = {("w8a16_fp8", "int4_wo"): "the INT4 Marlin MoE stands in for the FP8 weight-only Marlin MoE (same "
                                          "routing, permute and kernel; charged the FP8 weights' bytes)"}


@dataclass(frozen=True)
class Measured:
    """One operator time from measured evidence; ``seconds`` None: no evidence (``note`` says why)."""

    seconds: float | None
    fixed_s: float | None = None       # the fixed part (per-call floor, per-layer MoE routing/permute), included
    efficiency: float | None = None    # work efficiency against the card's roofline
    roofline_s: float | None = None    # the work at the card's bandwidth / peak
    bound: str = ""                    # memory | compute (which roofline term)
    source: str = ""                   # the measured table (package, file, engine kernel, system)
    scaling: str = ""                  # how the measurement was carried to this card
    note: str = ""                     # caveats, or why there is no evidence
    memory_s: float = 0.0              # the roofline's bytes term at the card's bandwidth (before 1/e)
    compute_s: float = 0.0             # the roofline's FLOPs term at the card's peak (before 1/e)

    def to_derived(self) -> Derived | None:
        if self.seconds is None:
            return None
        return Derived(self.seconds, "s", "fixed + roofline / efficiency",
                       {"fixed_s": self.fixed_s, "roofline_s": self.roofline_s, "efficiency": self.efficiency,
                        "bound": self.bound},
                       "; ".join(x for x in (self.source, self.scaling, self.note) if x))


def _none(note: str) -> Measured:
    return Measured(None, note=note)


# ---------------------------------------------------------------- evidence per GPU
@dataclass(frozen=True)
class Evidence:
    """The measured system that stands for ``gpu`` (None: none of its architecture was measured)."""

    gpu: GpuSpec
    system: mt.SystemRef | None
    relation: str                      # same card | same compute capability | same architecture | none
    why: str
    calibration: Calibration | None = None  # a microbench calibration of this very card

    @property
    def same_card(self) -> bool:
        return self.relation == "same card"

    @property
    def measured_system(self) -> mt.SystemRef:
        """The system, where the caller knows there is one (a GPU without evidence has no figures to carry)."""
        if self.system is None:
            raise ValueError(f"{self.gpu.id}: no measured system ({self.why})")
        return self.system

    def bandwidth_gbs(self) -> float | None:
        return self.measured_system.bandwidth_gbs if self.same_card else self.gpu.bandwidth_gbs

    def peak_tflops(self, key: str):
        """The card's dense peak for a systems.json key: a float, None (unknown) or NOT_SUPPORTED."""
        if self.same_card:
            return self.measured_system.peaks.get(key)
        v = self.gpu.peaks.get(mt.GPU_PEAK[key])
        if key == "bf16" and v is None:
            v = self.gpu.peaks.get("fp16_fp32acc")
        return v

    def clock_ratio(self) -> tuple[float, str]:
        """Fixed costs scale by system clock / card clock (the card's own clock where the table has one)."""
        if self.same_card:
            return 1.0, ""
        clock = self.gpu.boost_clock_mhz or self.gpu.tensor_peak_clock_mhz
        if not clock:
            return 1.0, f"fixed costs unscaled ({self.gpu.id} has no clock in the GPU table)"
        system_clock = self.measured_system.clock_mhz
        return system_clock / clock, f"fixed costs x {system_clock:g}/{clock:g} MHz"

    def scaling(self) -> str:
        if self.system is None:
            return ""
        if self.same_card:
            return f"measured on this card ({self.system.system})"
        _, clock = self.clock_ratio()
        return (f"{self.relation} evidence scaled from {self.system.system} (sm_{self.system.sm}) to {self.gpu.id} "
                f"(sm_{self.gpu.sm}): roofline at {self.gpu.id}'s bandwidth {self.gpu.bandwidth_gbs:g} GB/s "
                f"(system {self.system.bandwidth_gbs:g}) and GPU-table peaks; {clock}")


def evidence_for(gpu: GpuSpec, calibration: Calibration | None = None, folder: Path | None = None) -> Evidence:
    """The nearest measured system for ``gpu``: same card, else same compute capability (nearest
    bandwidth), else same architecture (nearest sm_XY, then bandwidth), else none."""
    cal = calibration if calibration is not None and calibration.gpu_id == gpu.id else None
    systems = list(mt.systems(folder).values())
    for s in systems:
        if s.gpu == gpu.id:
            return Evidence(gpu, s, "same card", f"{gpu.id} is the measured system {s.system}", cal)
    bw = gpu.bandwidth_gbs or 0.0

    def bw_gap(s: mt.SystemRef) -> float:
        return abs(s.bandwidth_gbs - bw) / s.bandwidth_gbs

    same_cc = [s for s in systems if s.cc == tuple(gpu.cc)]
    if same_cc:
        s = min(same_cc, key=bw_gap)
        return Evidence(gpu, s, "same compute capability",
                        f"{s.system} is a measured sm_{s.sm} system (nearest bandwidth to {gpu.id})", cal)
    same_arch = [s for s in systems if s.arch == gpu.arch]
    if same_arch:
        s = min(same_arch, key=lambda s: (abs(s.sm - gpu.sm), bw_gap(s)))
        return Evidence(gpu, s, "same architecture",
                        f"no measured sm_{gpu.sm} system: {s.system} (sm_{s.sm}) is the nearest measured "
                        f"{gpu.arch} system", cal)
    return Evidence(gpu, None, "none", f"no measured system of this architecture ({gpu.arch}, sm_{gpu.sm}) in "
                    f"{mt.PACKAGE} {mt.PACKAGE_VERSION}", cal)


# ---------------------------------------------------------------- table choice
# (id of the table tuple, system, dtypes, engine, kernel) -> (that tuple, choice): a plan asks the same
# choice for every module group and M; the tuple is held, so its id cannot be reused while the entry lives
_PICKED: dict = {}


def _pick(tables, system: str, dtypes: tuple[str, ...], engine: str | None, kernel: str | None = None,
          gated: bool | None = None):
    """The table for (system, dtype) from ``engine`` (else the first of ENGINE_ORDER that has one), nearest
    dtype first; among kernels of one engine, the one matching ``kernel``, then (MoE) the one whose gating
    matches ``gated``, or else the most measured."""
    if not isinstance(tables, tuple):         # only an immutable set can be remembered
        return _choose(tables, system, dtypes, engine, kernel, gated)
    key = (id(tables), system, tuple(dtypes), engine, kernel, gated)
    hit = _PICKED.get(key)
    if hit is not None and hit[0] is tables:
        return hit[1]
    out = _choose(tables, system, dtypes, engine, kernel, gated)
    _PICKED[key] = (tables, out)
    return out


def _choose(tables, system: str, dtypes: tuple[str, ...], engine: str | None, kernel: str | None,
            gated: bool | None = None):
    cands = [t for t in tables if t.system == system and t.dtype in dtypes]
    matched = [t for t in cands if kernel in t.kernel] if kernel else cands
    if not cands:
        return None, ""
    order = ([engine] if engine else []) + [e for e in ENGINE_ORDER if e != engine]
    best = min(matched or cands, key=lambda t: (dtypes.index(t.dtype), order.index(t.engine) if t.engine in order
                                                else 99, gated is not None and getattr(t, "gated", gated) != gated,
                                                -_size(t)))
    notes = []
    if kernel and not matched:                 # no table of the wanted kernel: another one stands in, said so
        notes.append(f"{best.kernel} stands in: no {kernel} table on {system}")
    if engine and best.engine != engine:
        notes.append(f"no {engine} measurement on {system}: {best.engine}'s kernel stands in")
    return best, "; ".join(notes)


def _size(t) -> int:
    return sum(getattr(t, "n", ())) or len(getattr(t, "m", ()))


def _dtypes(table: dict, kernel_class: str, dtype: str | None) -> tuple[str, ...]:
    return (dtype,) if dtype else table.get(kernel_class, ())


def _figures(ev: Evidence, dtype: str) -> tuple[float | None, float | None, str]:
    """(bandwidth GB/s, peak TFLOPS or None, note); peak NOT_SUPPORTED -> bandwidth None and the reason."""
    key = mt.PEAK_KEY[dtype]
    peak = ev.peak_tflops(key)
    if peak is NOT_SUPPORTED:
        return None, None, f"{ev.gpu.id} has no {key.upper()} tensor cores: no {dtype} kernel runs on it"
    bw = ev.bandwidth_gbs()
    if not bw:
        return None, None, f"{ev.gpu.id} has no bandwidth in the GPU table"
    note = "" if peak else f"{ev.gpu.id} has no {key} peak in the GPU table: compute term left out (lower bound)"
    return float(bw), (float(peak) if peak else None), note


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


# ---------------------------------------------------------------- GEMM
def gemm_time(gpu: GpuSpec, kernel_class: str, m: float, n: int, k: int, *, dtype: str | None = None,
              engine: str | None = None, calibration: Calibration | None = None, evidence: Evidence | None = None,
              folder: Path | None = None) -> Measured:
    """One Linear call of M tokens against an N x K weight in ``kernel_class`` (the advisor's kernel
    classes; ``dtype`` picks a measured format, e.g. "fp8_block"), as ``engine`` runs it."""
    ev = evidence or evidence_for(gpu, calibration, folder)
    if ev.system is None:
        return _none(ev.why)
    table, pick_note = _pick(mt.gemm_tables(folder), ev.system.system, _dtypes(GEMM_DTYPES, kernel_class, dtype),
                             engine)
    if table is None:
        return _none(f"no {dtype or kernel_class} GEMM measured on {ev.system.system}")
    bw, peak, fig_note = _figures(ev, table.dtype)
    if bw is None:
        return _none(fig_note)
    floor, e = table.at(m, n * k)
    ratio, _ = ev.clock_ratio()
    floor *= ratio
    nbytes = n * k * mt.WEIGHT_BYTES[table.dtype] + m * k * mt.ACT_BYTES.get(table.dtype, 2.0) + m * n * 2
    t_mem = nbytes / (bw * 1e9)
    t_comp = 2.0 * m * n * k / (peak * 1e12) if peak else 0.0
    bound = "memory" if t_mem >= t_comp else "compute"
    roof = max(t_mem, t_comp)
    work, source = roof / e, f"{table.src}: {table.label}"
    if not ev.same_card:
        work = _carried_work(table, ev, m, n, k, nbytes, roof, e, ratio)
    cal = ev.calibration
    if (cal is not None and m <= CALIBRATED_MAX_M and kernel_class in cal.kernel_bandwidth_eff
            and kernel_class in ENGINE_KERNEL_CLASSES and cal.bandwidth_gbs > 0):
        rate = cal.bandwidth_gbs * cal.kernel_bandwidth_eff[kernel_class] * 1e9
        work = max(nbytes / rate, t_comp / e)
        source = (f"microbench {cal.measured_at} on this card: {kernel_class} streams at "
                  f"{cal.kernel_bandwidth_eff[kernel_class]:.3f} x {cal.bandwidth_gbs:g} GB/s; floor from {source}")
    stand_in = STAND_IN.get((kernel_class, table.dtype), "")
    return Measured(floor + work, floor, roof / work if work else e, roof, bound, source, ev.scaling(),
                    _join(pick_note, stand_in, fig_note), t_mem, t_comp)


def _carried_work(table, ev: Evidence, m: float, n: int, k: int, nbytes: float, roof: float, e: float,
                  clock_ratio: float) -> float:
    """Work time on a card other than the measured system. The measured shortfall from the kernel's
    large-shape rate (e_big) is latency (tile waves, pipeline fill, small grids) that does not shrink or
    grow with bandwidth: it is carried as time (x the clock ratio), and only the large-shape rate scales
    with the card's own roofline. On the measured system this is exactly roof / e."""
    s = ev.measured_system
    e_big = table.asymptote(m)
    if not e_big or e_big <= 0:
        return roof / e
    peak_sys = s.peaks.get(mt.PEAK_KEY[table.dtype])
    roof_sys = max(nbytes / (s.bandwidth_gbs * 1e9), 2.0 * m * n * k / (peak_sys * 1e12) if peak_sys else 0.0)
    latency = (roof_sys / e - roof_sys / e_big) * clock_ratio
    return max(roof / max(e, e_big), roof / e_big + latency)


# ---------------------------------------------------------------- MoE
def moe_layer_time(gpu: GpuSpec, kernel_class: str, tokens: float, hidden: int, inter: int, topk: int, experts: int,
                   *, tp: int = 1, dtype: str | None = None, engine: str | None = None, kernel: str | None = None,
                   evidence: Evidence | None = None, folder: Path | None = None,
                   weight_bytes: float | None = None, mats: int | None = None) -> Measured:
    """One MoE layer's routed experts for ``tokens`` tokens (top-k routing from router logits, permute,
    grouped GEMMs, combine; not the router GEMM). ``hidden``: the width the experts read and write (a
    LatentMoE's latent width); ``inter``: the full expert intermediate size, split by ``tp``. ``fixed_s`` is
    the per-layer cost that does not shrink with the weights. ``weight_bytes``: stored bytes per weight
    element of the format that runs (default: the measured dtype's). ``mats``: weight matrices per expert
    of the model (3 gated: gate, up, down; 2 non-gated: up, down; default: the measured kernel's). A table
    measured with the other gating stands in by its efficiency e(T) at the same token count, applied to
    the roofline (bytes, FLOPs) of this model's matrices: its fitted fixed cost (routing, permute) is kept."""
    ev = evidence or evidence_for(gpu, None, folder)
    if ev.system is None:
        return _none(ev.why)
    table, pick_note = _pick(mt.moe_tables(folder), ev.system.system, _dtypes(MOE_DTYPES, kernel_class, dtype),
                             engine, kernel, None if mats is None else mats == 3)
    if table is None:
        return _none(f"no {dtype or kernel_class} MoE kernel measured on {ev.system.system}")
    bw, peak, fig_note = _figures(ev, table.dtype)
    if bw is None:
        return _none(fig_note)
    fixed, e = table.at(tokens)
    ratio, _ = ev.clock_ratio()
    fixed *= ratio
    table_mats = 3 if table.gated else 2
    gating_note = ""
    if mats is None:
        mats = table_mats
    elif mats != table_mats:
        gating_note = (f"{'gated' if table.gated else 'non-gated'} kernel ({table_mats} matrices) measured: its "
                       f"e(T) applied to this model's {mats}-matrix roofline at width {hidden}")
    inter_local = inter / max(tp, 1)
    touched = min(experts, tokens * topk)
    per = weight_bytes if weight_bytes else mt.WEIGHT_BYTES[table.dtype]
    nbytes = touched * mats * hidden * inter_local * per + tokens * hidden * 4
    t_mem = nbytes / (bw * 1e9)
    t_comp = 2.0 * tokens * topk * mats * hidden * inter_local / (peak * 1e12) if peak else 0.0
    roof = max(t_mem, t_comp)
    work, carry_note = roof / e, ""
    if not ev.same_card:
        sys_peak = ev.system.peaks.get(mt.PEAK_KEY[table.dtype])
        roof_sys = max(nbytes / (ev.system.bandwidth_gbs * 1e9),
                       t_comp * peak / sys_peak if peak and sys_peak else 0.0)
        work, carry_note = _carried_moe_work(table, tokens, roof, roof_sys, e, ratio)
    return Measured(fixed + work, fixed, roof / work if work else e, roof, "memory" if t_mem >= t_comp else "compute",
                    f"{table.src}: {table.label}", ev.scaling(),
                    _join(pick_note, STAND_IN.get((kernel_class, table.dtype), ""),
                          MOE_STAND_IN.get((kernel_class, table.dtype), ""), gating_note, carry_note, fig_note),
                    t_mem, t_comp)


def _carried_moe_work(table, tokens: float, roof: float, roof_sys: float, e: float,
                      clock_ratio: float) -> tuple[float, str]:
    """MoE work time on a card other than the measured system. e(T) is fitted per token count together
    with the fixed cost; where the layer's roofline is small next to that cost the two trade off, and
    the fit can end at its bound, e = 1 (the full DRAM peak, which no kernel streams at). Carried as a
    rate to a slower card, such an e would set the streaming speed there. So a bound e is replaced by
    the rate the kernel reaches at the nearest token count whose fit is not at the bound, and the
    measured gap to it is latency, carried as time (x the clock ratio), as for a GEMM
    (``_carried_work``). Unbound fits carry as they are; on the measured system this is roof / e."""
    if e < E_BOUND:
        return roof / e, ""
    here = math.log2(max(tokens, 1.0))
    free = [(abs(math.log2(t) - here), t, et) for t, et in zip(table.tokens, table.e) if 0 < et < E_BOUND]
    if not free:
        return roof / e, ""
    _, t_rate, e_rate = min(free)
    latency = (roof_sys / e - roof_sys / e_rate) * clock_ratio
    return max(roof / e, roof / e_rate + latency), (
        f"e fitted at its bound at {tokens:g} tokens: the rate of the nearest unbound fit (T = {t_rate}, "
        f"e = {e_rate:.3f}) carried to this card, the measured difference as time")


# ---------------------------------------------------------------- attention
def decode_attention_time(gpu: GpuSpec, batch: int, context: float, kv_heads: int, head_dim: int, kv_dtype: str,
                          *, engine: str | None = None, evidence: Evidence | None = None,
                          folder: Path | None = None, nbytes: float | None = None) -> Measured:
    """One layer's decode attention for ``batch`` sequences of ``context`` tokens (per GPU: kv_heads after TP).
    A KV dtype the system lacks a table for is charged the nearest measured kernel (FP8, else BF16) at its
    own bytes (``nbytes``: the KV bytes the layer reads, scales included)."""
    kv = "bfloat16" if kv_dtype in ("bfloat16", "float16", "auto") else kv_dtype
    if nbytes is None:
        if kv not in mt.KV_BYTES:
            return _none(f"no attention kernel measured with a {kv_dtype} KV cache")
        nbytes = batch * context * kv_heads * head_dim * 2 * mt.KV_BYTES[kv]
    return _attention(gpu, "decode", kv, "bfloat16", nbytes, "bf16", engine, evidence, folder)


def context_attention_time(gpu: GpuSpec, batch: int, tokens: float, heads: int, head_dim: int, *,
                           dtype: str = "bfloat16", engine: str | None = None, evidence: Evidence | None = None,
                           folder: Path | None = None) -> Measured:
    """One layer's causal prefill attention over ``tokens`` new tokens per sequence (heads per GPU)."""
    flops = 2.0 * batch * heads * head_dim * tokens * tokens
    return _attention(gpu, "context", "bfloat16", dtype, flops, "fp8" if dtype == "fp8" else "bf16", engine,
                      evidence, folder)


def _attention(gpu, phase, kv, attn_dtype, work, peak_key, engine, evidence, folder) -> Measured:
    ev = evidence or evidence_for(gpu, None, folder)
    if ev.system is None:
        return _none(ev.why)
    cands = [t for t in mt.attention_tables(phase, folder) if t.system == ev.system.system
             and t.attn_dtype == attn_dtype]
    # the KV dtype's own kernel, else the nearest measured one (FP8 for a narrower cache, then BF16)
    order = [kv] + [d for d in ("fp8", "bfloat16") if d != kv]
    cands.sort(key=lambda t: (order.index(t.kv_dtype) if t.kv_dtype in order else 9, t.engine != engine,
                              ENGINE_ORDER.index(t.engine) if t.engine in ENGINE_ORDER else 99, -len(t.e)))
    if not cands:
        return _none(f"no {phase} attention kernel measured on {ev.system.system} for {attn_dtype} / KV {kv}")
    table = cands[0]
    ratio, _ = ev.clock_ratio()
    fixed = table.floor_us * 1e-6 * ratio
    e = table.efficiency(work)
    if phase == "decode":
        bw = ev.bandwidth_gbs()
        if not bw:
            return _none(f"{gpu.id} has no bandwidth in the GPU table")
        roof, bound = work / (bw * 1e9), "memory"
    else:
        peak = ev.peak_tflops(peak_key)
        if not peak or peak is NOT_SUPPORTED:
            return _none(f"{gpu.id} has no {peak_key} peak in the GPU table")
        roof, bound = work / (float(peak) * 1e12), "compute"
    note = f"no {engine} measurement: {table.engine}'s kernel stands in" if engine and table.engine != engine else ""
    if phase == "decode" and table.kv_dtype != kv:
        note = _join(note, f"no {kv} KV kernel measured on {table.system}: the {table.kv_dtype} KV kernel stands "
                           "in at this cache's bytes")
    return Measured(fixed + roof / e, fixed, e, roof, bound, f"{table.src}: {table.label}", ev.scaling(), note,
                    roof if bound == "memory" else 0.0, roof if bound == "compute" else 0.0)


# ---------------------------------------------------------------- linear attention (GDN)
def linear_attention_time(gpu: GpuSpec, phase: str, work: float, *, heads: int = 0, kind: str = "gdn",
                          engine: str | None = None, evidence: Evidence | None = None,
                          folder: Path | None = None) -> Measured:
    """One linear-attention layer (per GPU). ``phase`` decode: ``work`` = the state bytes the step loads and
    stores, charged floor + bytes / (BW e); prefill: ``work`` = the tokens of one sequence's chunk and
    ``heads`` its value heads per GPU, charged floor + tokens x (ns/token + heads x ns/token/head): the scan
    is latency-bound on the sequence, so another card gets it as time x the clock ratio. Gated-DeltaNet layers
    are measured whole; of a Mamba2 layer (``kind`` mamba2) only the decode conv update, ``work`` = the conv
    window bytes it loads and stores (TRT-LLM's kernel, the only one measured)."""
    ev = evidence or evidence_for(gpu, None, folder)
    if ev.system is None:
        return _none(ev.why)
    if kind not in ("gdn", "mamba2"):
        return _none(f"no {kind} layer measured in {mt.PACKAGE} {mt.PACKAGE_VERSION}'s tables we distil "
                     "(GDN, Mamba2's decode conv)")
    cands = sorted((t for t in mt.linear_tables(phase, folder) if t.system == ev.system.system and t.kind == kind),
                   key=lambda t: (t.engine != engine, ENGINE_ORDER.index(t.engine) if t.engine in ENGINE_ORDER
                                  else 99, -len(t.e)))
    if not cands and kind == "mamba2" and phase == "prefill":
        return _none("no Mamba2 prefill layer measured: mamba2_perf holds the causal_conv1d_fn conv alone, not the "
                     "chunk scan (mamba_chunk_scan_combined)")
    if not cands:
        return _none(f"no {'GDN' if kind == 'gdn' else 'Mamba2'} {phase} layer measured on {ev.system.system}")
    table = cands[0]
    ratio, clock = ev.clock_ratio()
    fixed = table.floor_us * 1e-6 * ratio
    note = f"no {engine} measurement: {table.engine}'s kernels stand in" if engine and table.engine != engine else ""
    if phase == "prefill":
        busy = work * (table.ns_per_token + heads * table.ns_per_token_head) * 1e-9 * ratio
        scaling = ev.scaling() if ev.same_card else (
            f"{ev.relation} evidence from {ev.measured_system.system} (sm_{ev.measured_system.sm}): the scan's "
            f"latency per token carried as time ({clock or 'same clock'})")
        return Measured(fixed + busy, fixed, None, None, "latency", f"{table.src}: {table.label}", scaling, note)
    bw, bw_sys = ev.bandwidth_gbs(), ev.measured_system.bandwidth_gbs
    if not bw:
        return _none(f"{gpu.id} has no bandwidth in the GPU table")
    roof, roof_sys = work / (bw * 1e9), work / (bw_sys * 1e9)
    e = table.efficiency(work)
    busy = _carried_busy(ev, roof, roof_sys, e, table.e[-1], ratio)
    return Measured(fixed + busy, fixed, roof / busy if busy else e, roof, "memory", f"{table.src}: {table.label}",
                    ev.scaling(), note, roof, 0.0)


def _carried_busy(ev: Evidence, roof: float, roof_sys: float, e: float, e_big: float, ratio: float) -> float:
    """Work time of a small operator: roof / e on the measured system; elsewhere as a GEMM (_carried_work):
    the largest work's rate scales with this card's roofline, the measured shortfall from it at this work is
    latency, carried as time (x the clock ratio)."""
    if ev.same_card or not e_big or e_big <= 0:
        return roof / e
    return max(roof / max(e, e_big), roof / e_big + (roof_sys / e - roof_sys / e_big) * ratio)


# ---------------------------------------------------------------- elementwise kernels between operators
def elementwise_time(gpu: GpuSpec, rows: float, width: int, *, engine: str | None = None,
                     evidence: Evidence | None = None, folder: Path | None = None) -> Measured:
    """One small elementwise kernel over ``rows`` x ``width`` 16-bit activations (a norm, rotary, activation,
    residual add): the measured stand-in kernel (vLLM's static_scaled_fp8_quant: read 16 bits, write 8 per
    element) of the card's nearest measured system at those bytes."""
    ev = evidence or evidence_for(gpu, None, folder)
    if ev.system is None:
        return _none(ev.why)
    table = next((t for t in mt.elementwise_tables(folder) if t.system == ev.system.system), None)
    if table is None:
        return _none(f"no elementwise kernel measured on {ev.system.system}")
    bw = ev.bandwidth_gbs()
    if not bw:
        return _none(f"{gpu.id} has no bandwidth in the GPU table")
    ratio, _ = ev.clock_ratio()
    work = max(rows, 1.0) * width * 3.0
    roof, roof_sys = work / (bw * 1e9), work / (ev.measured_system.bandwidth_gbs * 1e9)
    e = table.efficiency(work)
    fixed = table.floor_us * 1e-6 * ratio
    busy = _carried_busy(ev, roof, roof_sys, e, table.e[-1], ratio)
    note = (f"{table.kernel} stands in for every kernel between the measured operators"
            + (f"; {table.engine}'s kernel stands in for {engine}'s" if engine and engine != table.engine else ""))
    return Measured(fixed + busy, fixed, roof / busy if busy else e, roof, "memory", f"{table.src}: {table.label}",
                    ev.scaling(), note, roof, 0.0)


# ---------------------------------------------------------------- all-reduce


def allreduce_time(gpu: GpuSpec, tp: int, nbytes: float, *, link_kind: str, link_gbs: float | None = None,
                   engine: str | None = None, graph: bool = True, evidence: Evidence | None = None,
                   folder: Path | None = None) -> Measured:
    """One all-reduce of ``nbytes`` across ``tp`` GPUs over ``link_kind`` (nvlink | pcie). ``link_gbs``: the
    card's per-direction link bandwidth; the bandwidth part of the measured curve is scaled to it."""
    if tp <= 1:
        return Measured(0.0, 0.0, source="no tensor parallelism")
    ev = evidence or evidence_for(gpu, None, folder)
    # an engine whose all-reduce is a library's (EngineSpec.allreduce) is measured as that library
    lib = spec if (spec := engines.find(engine or "")) and spec.allreduce else None
    asked, engine = engine, lib.allreduce if lib else engine
    systems = mt.systems(folder)
    curves = [c for c in mt.comm_curves(folder) if c.tp == tp and systems[c.system].link_kind == link_kind]
    if not curves:
        return _none(f"no all-reduce over {link_kind} measured at TP {tp}")
    mode = "graph" if graph else "eager"

    def rank(c: mt.CommCurve):
        s = systems[c.system]
        # the engine's own collective, else NCCL (what an engine without a custom all-reduce calls)
        return (ev.system is None or c.system != ev.system.system, s.arch != gpu.arch, abs(s.sm - gpu.sm),
                c.engine != engine, c.engine != "nccl", c.mode != mode)

    curve = min(curves, key=rank)
    s = systems[curve.system]
    t_sys, alpha = curve.seconds(nbytes), curve.latency_s
    scale, scaling = 1.0, f"measured on {s.system} ({s.link_kind} {s.link_gbs:g} GB/s per direction)"
    if s.gpu != gpu.id and link_gbs:
        scale = s.link_gbs / link_gbs
        scaling += f"; bandwidth part x {s.link_gbs:g}/{link_gbs:g} GB/s for {gpu.id}, latency kept"
    seconds = alpha + max(t_sys - alpha, 0.0) * scale
    notes = []
    if lib and engine:
        notes.append(f"{asked} all-reduces with {engine.upper()} ({lib.allreduce_source})")
    if engine and curve.engine != engine:
        notes.append(f"no {engine} all-reduce measured: {curve.label.split(' on ')[0]} stands in")
    if curve.mode != mode:
        notes.append(f"only {curve.mode}-mode timings measured")
    return Measured(seconds, alpha, None, None, "link", f"{curve.src}: {curve.label}", scaling, _join(*notes))


# ---------------------------------------------------------------- what the cost model asks for
@dataclass(frozen=True)
class Ops:
    """The measured evidence one plan costs its operators with: the card's nearest measured system,
    the engine whose kernels to prefer, and the link its all-reduces cross."""

    evidence: Evidence
    engine: str
    link_kind: str = ""                # nvlink | pcie ("" : one GPU)
    link_gbs: float | None = None      # theoretical per-direction link bandwidth of the card
    bandwidth_scale: float = 1.0       # evidence bandwidth / the plan's DRAM bandwidth (--bandwidth, microbench)

    @property
    def measured(self) -> bool:
        return self.evidence.system is not None


def gemm_dtype(kernel_class: str, scheme: str, granularity: str = "", kernel: str = "") -> str | None:
    """The measured GEMM dtype for a module group's format as it runs (None: no dense measurement of that
    kernel kind, e.g. weight-only Marlin)."""
    if kernel_class == "bf16":
        return "bfloat16"
    if kernel_class == "a4_native":
        return "nvfp4"
    if kernel_class == "a8_native":
        if "INT8" in scheme:
            return "sq"
        blocked = granularity == "block" or "block" in kernel.lower() or "deepgemm" in kernel.lower()
        return "fp8_block" if blocked else "fp8"
    return None


def moe_dtype(kernel_class: str, scheme: str, granularity: str = "") -> str | None:
    """The measured MoE dtype for the experts' format as it runs (None: the nearest by MOE_DTYPES)."""
    if kernel_class == "a8_native" and "FP8" in scheme:
        return "fp8_block" if granularity == "block" else "fp8"
    if kernel_class == "w4a16_nvfp4":
        # the measured MXFP4 MoE kernels are gpt-oss's (clamped SwiGLU with biases, "situ_as_silu"); other
        # 4-bit weight-only experts run the plain Marlin MoE, measured for INT4
        return "w4a16_mxfp4" if "MXFP4" in scheme else "int4_wo"
    return None


# Words of an explained MoE kernel name -> the substring of the measured MoE kernels it runs as.
MOE_KERNEL_WORDS = (("marlin", "marlin"), ("trtllm", "trtllm"), ("flashinfer_cutlass", "flashinfer_cutlass"),
                    ("cutlass", "cutlass"), ("deepgemm", "deepgemm"), ("triton", "triton"))


def moe_kernel(kernel: str) -> str | None:
    """The measured MoE kernel family an explained kernel name ('MARLIN (MarlinExperts)',
    'FLASHINFER_CUTLASS (FlashInferExperts)', 'TRITON (TritonExperts)') belongs to."""
    low = kernel.lower().replace(" ", "_")
    return next((key for word, key in MOE_KERNEL_WORDS if word in low), None)


def median_compute_efficiency(folder: Path | None = None, m: int = 8192, log2_nk: int = 26) -> tuple[float, str]:
    """Median BF16 GEMM efficiency at a large M over every measured system: the compute efficiency a
    card without a measured system of its architecture is given (labelled)."""
    vals = sorted(t.at(m, 2 ** log2_nk)[1] for t in mt.gemm_tables(folder) if t.dtype == "bfloat16")
    if not vals:
        return 0.8, "estimate: no measured BF16 GEMM table"
    mid = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    return mid, (f"median of {len(vals)} measured BF16 GEMMs at M={m}, N*K=2^{log2_nk} over every measured system "
                 f"({mt.PACKAGE} {mt.PACKAGE_VERSION}); no measured system of this card's architecture")


# Marlin's MoE kernels issue the same warp-level mma.sync m16n8k16 inner loop as its dense GEMM (both built
# from vLLM's csrc/quantization/marlin template, SGLang's sgl-kernel copy of it); the measured MoE tables
# are the only measurement of that instruction path on Hopper and Blackwell.
MARLIN_MOE_DTYPES = ("int4_wo", "w4a16_mxfp4")


def marlin_mma_sync_efficiency(ops: Ops | None, folder: Path | None = None) -> tuple[float, str] | None:
    """The compute efficiency (against the BF16 peak) Marlin's mma.sync reached on the card's measured
    system: the Marlin MoE table's e at its largest token count, where every measured shape is compute-bound
    and the fitted per-layer fixed part (routing, permute) is already taken out. None: no Marlin MoE was
    measured there."""
    if ops is None or ops.evidence.system is None:
        return None
    system = ops.evidence.system.system
    table, note = _pick(mt.moe_tables(folder), system, MARLIN_MOE_DTYPES, ops.engine, "marlin")
    if table is None or "marlin" not in table.kernel:
        return None
    e, tokens = table.e[-1], table.tokens[-1]
    return e, _join(f"{table.src}: {table.label}, e = {e:.3g} of the BF16 peak at {tokens:,} tokens "
                    "(compute-bound, its fixed part taken out)", note, ops.evidence.scaling())
