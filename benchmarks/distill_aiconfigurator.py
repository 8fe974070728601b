#!/usr/bin/env python3
"""Distil NVIDIA AIConfigurator's measured OPERATOR tables into profiles/calibration/.

Run it in a venv where ``aiconfigurator-core==0.12.0`` is installed (the test setup puts it in
.venv-quant); the advisor never imports that package at run time, it reads what this writes:

    .venv-quant/bin/python benchmarks/distill_aiconfigurator.py            # rewrite the tables
    .venv-quant/bin/python benchmarks/distill_aiconfigurator.py --out DIR  # write elsewhere
    .venv/bin/python benchmarks/distill_aiconfigurator.py --smoke          # check the shipped tables load

It lives in benchmarks/, not profiles/: it imports the byte and peak conventions from advisor.cost, and
profiles/ is the bottom data layer that imports nothing above it. ``--smoke`` needs neither pandas nor
aiconfigurator: it loads every shipped table through the runtime's readers and checks each row's provenance.

Read: ``aiconfigurator_core/systems/data/<system>/<family>/<engine>/<version>/*_perf.parquet``
(gemm_perf, moe_perf, nccl_perf, custom_allreduce_perf, generation_/context_attention_perf,
gdn_perf, mamba2_perf, quantize/vllm scale_matrix_perf) and
``collection_meta.yaml`` beside them. Never read: ``systems/silicon_sample.csv`` and
``systems/support_matrix/`` (end-to-end serving runs: kept for independent validation), the Rust
estimator, the model configs. The package's own figures (systems/*.yaml) are not used either:
every efficiency is relative to OUR GPU table (profiles/gpus.yaml), so that scaling a measured
system to another card uses the same kind of figure on both sides.

The time model each table feeds (advisor/cost/measured.py):
  GEMM       t = floor + roofline / e(M, log2 N*K)        roofline = max(bytes / BW, FLOPs / peak)
  MoE layer  t = fixed(T) + roofline / e(T)               bytes = touched experts' weights
  decode attention  t = floor + KV bytes / (BW x e)       context attention  t = floor + FLOPs / (peak x e)
  all-reduce  the measured latency curve per message size, TP and engine
  GDN layer   decode t = floor + state bytes / (BW x e)
              prefill t = floor + tokens x (ns/token + heads x ns/token/head)   (one sequence)
  Mamba2 conv  decode t = floor + conv window bytes / (BW x e)   (causal_conv1d_update, TRT-LLM)
  elementwise t = floor + bytes / (BW x e)   (the kernels between measured operators)

Over ~400 lines on purpose: an offline script run once per AIConfigurator release, one distiller per table
family above sharing the roofline and provenance helpers, plus the --smoke check of what they wrote: the
families are read and changed together when a release changes its table layout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import yaml
from packaging.version import Version

try:
    import pandas as pd                  # the distillation only: --smoke reads the shipped JSON
except ImportError:
    pd = None

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from advisor.cost.gpu_efficiency import FP16_FLOP_PER_CLK_SM, PEAK_UPPER_BOUND  # noqa: E402  (pure modules)
# Byte and peak conventions: one definition, shared with the runtime that reads these tables.
from advisor.cost.measured_tables import (ACT_BYTES, KV_BYTES, PACKAGE, PACKAGE_VERSION, PEAK_KEY,  # noqa: E402
                                          SCHEMA, WEIGHT_BYTES)

DEFAULT_OUT = ROOT / "profiles" / "calibration" / f"aiconfigurator-{PACKAGE_VERSION}"
COLLECTOR = "ai-dynamo/aiconfigurator@095f58a51c4c collector/"   # the collector source we read

# AIConfigurator system -> our GPU table entry whose figures are the efficiency denominators.
# Left out: gb300 (no entry in our table), b60 (Intel), a100_pcie / a30 / h100_pcie / l4 (their
# data folders are empty in 0.12.0).
SYSTEMS = {
    "a100_sxm": "a100-80gb-sxm",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "l40s": "l40s",
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",
    "rtx_pro_6000_server": "rtx-pro-6000-bw-server",
}
ENGINES = ("vllm", "sglang", "trtllm")

# Our kernel classes (advisor.cost.efficiency.KERNEL_CLASS values) per measured dtype.
KERNEL_CLASS = {
    "bfloat16": "bf16", "fp8": "a8_native", "fp8_block": "a8_native", "sq": "a8_native",
    "w4a8_mxfp4_mxfp8": "a8_native", "nvfp4": "a4_native", "int4_wo": "w4a16_int4",
    "int8_wo": "w8a16_fp8", "w4a16_mxfp4": "w4a16_nvfp4",
}
# Tables timed without CUDA graphs: their floor is host dispatch, not the kernel a served
# (graph-captured) decode step pays. collector/vllm/collect_gemm.py: use_cuda_graph=gemm_type != "fp8_block".
EAGER_GEMM = {("vllm", "fp8_block")}

GEMM_M = tuple(2 ** i for i in range(16))          # 1 .. 32768
GEMM_MIN_DIM = 128                                 # smaller N or K are not LLM layers
GEMM_MIN_LOG2_NK = 18                              # efficiency columns from 256K weight elements up
FLOOR_MAX_LOG2_NK = 20                             # shapes whose work is negligible: their time is the floor
MOE_TOKENS = tuple(2 ** i for i in range(15))      # 1 .. 16384
MOE_MIN_SHAPES = 3                                 # rows a per-token-count fit needs
E_MAX = 1.0                                        # a work efficiency above the roofline is clipped


# ---------------------------------------------------------------- inputs
def data_root(override: str | None) -> Path:
    if override:
        return Path(override)
    spec = importlib.util.find_spec("aiconfigurator_core")     # located, not imported (Rust extension)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{PACKAGE} is not installed here: pip install '{PACKAGE}=={PACKAGE_VERSION}' or pass --data-root")
    version = importlib.metadata.version(PACKAGE)
    if version != PACKAGE_VERSION:
        sys.exit(f"{PACKAGE} {version} is installed; these tables are distilled from {PACKAGE_VERSION}")
    return Path(spec.submodule_search_locations[0]) / "systems" / "data"


def reference_figures(gpus_yaml: Path) -> dict[str, dict]:
    """Per system: the GPU-table figures its efficiencies are relative to (and where each came from)."""
    entries = {e["id"]: e for e in yaml.safe_load(gpus_yaml.read_text(encoding="utf-8"))["gpus"]}
    out = {}
    for system, gpu_id in SYSTEMS.items():
        e = entries[gpu_id]
        bound_id, why = PEAK_UPPER_BOUND.get(gpu_id, (None, ""))
        fig = entries[bound_id] if bound_id else e
        peaks = fig["dense_tensor_peak"]
        cc = tuple(int(x) for x in e["compute_capability"].split("."))
        clock = fig.get("boost_clock_mhz") or fig.get("tensor_peak_clock_mhz")
        clock_src = f"GPU table {fig['id']}"
        if not clock:
            clock = round(peaks["fp16_fp16acc"] * 1e6 / (e["sm_count"] * FP16_FLOP_PER_CLK_SM[cc]))
            clock_src = f"implied by GPU table {fig['id']} fp16_fp16acc peak / (SMs x FP16 FLOP/clk/SM)"
        nvlink = e.get("nvlink_gbs")
        out[system] = {
            "system": system, "gpu": gpu_id, "cc": list(cc), "arch": e["arch"],
            "bandwidth_gbs": e["bandwidth_gbs"], "l2_mb": e.get("l2_mb"),
            "peaks_tflops": {"bf16": peaks["bf16"] or peaks["fp16_fp32acc"], "fp8": peaks["fp8_fp32acc"],
                             "fp4": peaks["fp4"], "int8": peaks["int8"]},
            "peaks_from": fig["id"] + (f" (upper bound: {why})" if bound_id else ""),
            "clock_mhz": clock, "clock_from": clock_src,
            "link": ({"kind": "nvlink", "gbs_per_direction": nvlink / 2} if nvlink else
                     {"kind": "pcie", "gbs_per_direction": _pcie_gbs(e.get("pcie_gen"), e.get("pcie_lanes"))}),
        }
    return out


def _pcie_gbs(gen: int | None, lanes: int | None) -> float:
    from advisor.cost.interconnect import PCIE_LANE_GBS

    return round(PCIE_LANE_GBS[gen or 4] * (lanes or 16), 1)


def versions(folder: Path) -> list[Path]:
    """Version folders, newest first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: Version(p.name), reverse=True)


def newest_per_dtype(root: Path, system: str, family: str, engine: str, table: str, dtype_col: str):
    """(version folder, frame) pairs: the newest version's rows, plus older versions' rows only for
    dtypes the newer ones lack (one measurement per engine and dtype)."""
    seen: set[str] = set()
    for vdir in versions(root / system / family / engine):
        f = vdir / f"{table}.parquet"
        if not f.is_file():
            continue
        df = pd.read_parquet(f)
        df = df[~df[dtype_col].isin(seen)]
        if len(df):
            seen.update(df[dtype_col].unique())
            yield f, df


def rel(root: Path, f: Path) -> str:
    return f"{PACKAGE} {PACKAGE_VERSION} aiconfigurator_core/systems/data/{f.relative_to(root).as_posix()}"


def sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


# ---------------------------------------------------------------- GEMM
def gemm_roofline(df: pd.DataFrame, ref: dict, dtype: str) -> np.ndarray:
    m, n, k = (df[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    nbytes = n * k * WEIGHT_BYTES[dtype] + m * k * ACT_BYTES.get(dtype, 2.0) + m * n * 2
    peak = ref["peaks_tflops"][PEAK_KEY[dtype]]
    t_mem = nbytes / (ref["bandwidth_gbs"] * 1e9)
    t_comp = 2 * m * n * k / (peak * 1e12) if peak else np.zeros_like(m)
    return np.maximum(t_mem, t_comp)


def work_efficiency(t: np.ndarray, floor: float, roof: np.ndarray) -> float:
    """Median of roofline / (time - floor): how fast the kernel does its work once its fixed cost is paid."""
    busy = t - floor
    e = np.where(busy > 0, roof / np.where(busy > 0, busy, 1.0), E_MAX)
    return min(E_MAX, float(np.median(e)))


def distill_gemm(root: Path, refs: dict) -> list[dict]:
    rows = []
    for system, ref in refs.items():
        for engine in ENGINES:
            for f, df in newest_per_dtype(root, system, "gemm", engine, "gemm_perf", "gemm_dtype"):
                df = df[(df.n >= GEMM_MIN_DIM) & (df.k >= GEMM_MIN_DIM) & df.m.isin(GEMM_M)]
                for (kernel, dtype), d in sorted(df.groupby(["kernel_source", "gemm_dtype"])):
                    if (engine, dtype) in EAGER_GEMM or dtype not in WEIGHT_BYTES:
                        continue
                    rows.append(_gemm_row(root, f, system, ref, engine, kernel, dtype, d))
    return rows


def _gemm_row(root, f, system, ref, engine, kernel, dtype, d) -> dict:
    t = d.latency.to_numpy() * 1e-3
    roof = gemm_roofline(d, ref, dtype)
    lnk = np.log2(d.n.to_numpy(dtype=float) * d.k.to_numpy(dtype=float))
    nk = np.round(lnk / 2) * 2
    m = d.m.to_numpy()
    buckets = sorted({int(x) for x in nk if x >= GEMM_MIN_LOG2_NK})
    ms = [int(x) for x in GEMM_M if (m == x).any()]
    floors, eff = [], []
    for mi in ms:
        at_m = m == mi
        # The fixed cost of a call at this M: the shapes whose weight work is negligible, less the
        # roofline time of what they still move (at large M, the activations).
        small = at_m & (lnk <= FLOOR_MAX_LOG2_NK)
        floor = float(np.median(np.maximum(t[small] - roof[small], 0.0)))
        floors.append(sig(floor * 1e6, 3))
        eff.append([(sig(work_efficiency(t[sel], floor, roof[sel]), 3) if (sel := at_m & (nk == b)).any() else None)
                    for b in buckets])
    return {"system": system, "engine": engine, "version": f.parent.name, "kernel": kernel, "dtype": dtype,
            "kernel_class": KERNEL_CLASS[dtype], "src": rel(root, f), "m": ms, "floor_us": floors,
            "log2_nk": buckets, "e": eff}


# ---------------------------------------------------------------- MoE
def moe_roofline(d: pd.DataFrame, ref: dict, dtype: str, gated: bool) -> np.ndarray:
    tokens, hidden, topk, experts = (d[c].to_numpy(dtype=float)
                                     for c in ("num_tokens", "hidden_size", "topk", "num_experts"))
    inter = d.inter_size.to_numpy(dtype=float) / d.moe_tp_size.to_numpy(dtype=float)
    mats = 3 if gated else 2
    touched = np.minimum(experts, tokens * topk)          # balanced routing: distinct experts hit
    nbytes = touched * mats * hidden * inter * WEIGHT_BYTES[dtype] + tokens * hidden * 4
    peak = ref["peaks_tflops"][PEAK_KEY[dtype]]
    t_comp = 2 * tokens * topk * mats * hidden * inter / (peak * 1e12) if peak else 0 * tokens
    return np.maximum(nbytes / (ref["bandwidth_gbs"] * 1e9), t_comp)


def fit_fixed_and_efficiency(t: np.ndarray, roof: np.ndarray) -> tuple[float, float] | None:
    """t = fixed + roof / e over the measured shapes (least squares); fixed >= 0."""
    if len(t) < MOE_MIN_SHAPES or np.ptp(roof) <= 0:
        return None
    slope, fixed = np.polyfit(roof, t, 1)
    if fixed < 0 or slope <= 0:
        fixed = 0.0
        slope = float(np.median(t / roof))
    return float(fixed), min(E_MAX, 1.0 / float(slope))


# Gating of the measured rows. No moe_perf column says it; the collector that wrote a row decides it:
# - TRT-LLM labels its non-gated rows: source = "moe_torch_flow_nongated" when not is_gated, is_gated False for
#   the models in NON_GATED_MOE_MODELS = ["Nemotron-3"] (collector/trtllm/collect_moe.py:42, 364-377, 783-784).
# - SGLang 0.5.14 and vLLM 0.24.0 keep one kernel_source for both and take the gating from the model case: SGLang's
#   collector reads sglang_moe_is_gated (collector/case_generator.py:1560), false for every MoE entry of
#   collector/cases/models/NemotronHForCausalLM_cases.yaml (the only case file that sets it), and sizes the
#   experts with it (collector/sglang/collect_moe.py:283, 1132: (2 if is_gated else 1) x inter; FusedMoE(is_gated=)
#   :583); vLLM's collector gives nemotron_h the activation "<mlp_hidden_act>_no_mul" (collector/vllm/
#   collect_moe.py:141-146), which vLLM's MoEActivation.is_gated reads as non-gated (not value.endswith("_no_mul"),
#   vllm/model_executor/layers/fused_moe/activation.py). Both collectors came with their version's data
#   (ai-dynamo/aiconfigurator e23be5a79, SGLang 0.5.14; d5bad971c, vLLM 0.24.0).
# - Older versions' collectors built every expert gated: SGLang before 0.5.14 passed 2 x inter to its Triton
#   benchmark for every model (collect_moe.py:1492, 1517@e23be5a79^), vLLM before 0.24 allocated
#   w1 [experts, 2 x inter, hidden] (collect_moe.py:115@5ef50c9b9, vLLM 0.14).
# So a row at a Nemotron-H case shape (hidden, inter, topk, experts), as those case files list it, is non-gated
# from SGLang >= 0.5.14 and vLLM >= 0.24.0. Checked against the rows themselves: in every mixed table, the
# Nemotron-H rows time at 0.9-1.2x a fit over the table's other shapes with 2 matrices, 0.65-0.9x with 3.
NEMOTRON_H_MOE_SHAPES = {(2688, 1856, 6, 128), (4096, 2688, 22, 512), (1024, 2688, 22, 512),
                         (8192, 5120, 22, 512), (2048, 5120, 22, 512)}
NON_GATED_FROM = {"sglang": Version("0.5.14"), "vllm": Version("0.24.0")}
# Rows no collector source we can read accounts for, left out of the fits: SGLang 0.5.14's Nemotron-3-Super
# latent shape in BF16/FP8-block, appended 2026-08-24 from AIConfigurator revision 1982d8d4 (h100_sxm and
# h200_sxm collection_meta.yaml), which is not in the source; the 0.5.14 case file lists that shape for SGLang
# in NVFP4 only (NemotronHForCausalLM_cases.yaml, allowed_modes [nvfp4]).
GATING_UNKNOWN = {("sglang", "0.5.14", (1024, 2688, 22, 512), "bfloat16"),
                  ("sglang", "0.5.14", (1024, 2688, 22, 512), "fp8_block")}
GATING_SRC = {
    "kernel": "kernel_source names the gating (collector/trtllm/collect_moe.py:783-784)",
    "gated": "gated: a gated model's shapes",
    "old_gated": ("gated: Nemotron-H shapes collected gated by this version's collector (SGLang < 0.5.14: "
                  "collector/sglang/collect_moe.py:1492, 1517@e23be5a79^; vLLM < 0.24: collect_moe.py:115@5ef50c9b9)"),
    "trtllm_nemotron": "non-gated: a Nemotron-3 model (collector/trtllm/collect_moe.py:42, 364-374)",
    "left_out": ("SGLang 0.5.14 rows at (hidden 1024, inter 2688, top 22, 512 experts) in bfloat16 and fp8_block "
                 "(h100_sxm, h200_sxm): appended from AIConfigurator revision 1982d8d4 (collection_meta.yaml), not in "
                 "the collector source read; the 0.5.14 case file lists that shape for SGLang in nvfp4 only"),
    "nemotron_h": ("non-gated: Nemotron-H case shapes (collector/cases/models/NemotronHForCausalLM_cases.yaml), "
                   "ReLU^2 experts as this engine version's collector ran them (SGLang: sglang_moe_is_gated false, "
                   "collector/sglang/collect_moe.py:283, 1132; vLLM: relu2_no_mul, collector/vllm/collect_moe.py:"
                   "141-146)"),
}


def moe_row_gating(engine: str, version: str, kernel: str, dtype: str, shape: tuple) -> tuple[bool | None, str]:
    """(gated, why) of one measured row; gated None: no source accounts for it (left out)."""
    if "nongated" in kernel:
        return False, "kernel"
    if shape not in NEMOTRON_H_MOE_SHAPES:
        return True, "gated"
    if (engine, version, shape, dtype) in GATING_UNKNOWN:
        return None, ""
    if engine in NON_GATED_FROM and Version(version) >= NON_GATED_FROM[engine]:
        return False, "nemotron_h"
    return (False, "trtllm_nemotron") if engine == "trtllm" else (True, "old_gated")


def distill_moe(root: Path, refs: dict) -> list[dict]:
    rows = []
    for system, ref in refs.items():
        for engine in ENGINES:
            for f, df in newest_per_dtype(root, system, "moe", engine, "moe_perf", "moe_dtype"):
                df = df[(df.moe_ep_size == 1) & df.num_tokens.isin(MOE_TOKENS)]
                for (kernel, dtype), d in sorted(df.groupby(["kernel_source", "moe_dtype"])):
                    if dtype not in WEIGHT_BYTES:
                        continue
                    dist = "balanced" if (d.distribution == "balanced").any() else "power_law_1.01"
                    d = d[d.distribution == dist]
                    gating = [moe_row_gating(engine, f.parent.name, kernel, dtype, (int(h), int(i), int(k), int(e)))
                              for h, i, k, e in zip(d.hidden_size, d.inter_size, d.topk, d.num_experts)]
                    for gated in (True, False):
                        sel = np.array([g == gated for g, _ in gating], dtype=bool)
                        why = sorted({w for g, w in gating if g == gated})
                        row = _moe_row(root, f, system, ref, engine, kernel, dtype, dist, d[sel], gated, why) \
                            if sel.any() else None
                        if row:
                            rows.append(row)
    return rows


def _moe_row(root, f, system, ref, engine, kernel, dtype, dist, d, gated, why) -> dict | None:
    roof = moe_roofline(d, ref, dtype, gated)
    t = d.latency.to_numpy() * 1e-3
    tok = d.num_tokens.to_numpy()
    pts = []
    for T in MOE_TOKENS:
        sel = tok == T
        fit = fit_fixed_and_efficiency(t[sel], roof[sel]) if sel.any() else None
        if fit:
            pts.append((T, sig(fit[0] * 1e6, 3), sig(fit[1], 3), int(sel.sum())))
    if not pts:
        return None
    return {"system": system, "engine": engine, "version": f.parent.name, "kernel": kernel, "dtype": dtype,
            "kernel_class": KERNEL_CLASS[dtype], "gated": gated, "gating": "+".join(why),
            "distribution": dist, "src": rel(root, f), "tokens": [p[0] for p in pts],
            "fixed_us": [p[1] for p in pts], "e": [p[2] for p in pts], "n": [p[3] for p in pts]}


# ---------------------------------------------------------------- all-reduce
def distill_allreduce(root: Path, refs: dict) -> list[dict]:
    rows = []
    for system in refs:
        nccl = versions(root / system / "comm" / "nccl")
        sources = [("nccl", v / "nccl_perf.parquet") for v in nccl[:1]]
        for engine in ENGINES:
            sources += [(engine, v / "custom_allreduce_perf.parquet")
                        for v in [v for v in versions(root / system / "comm" / engine)
                                  if (v / "custom_allreduce_perf.parquet").is_file()][:1]]
        for engine, f in sources:
            if not f.is_file():
                continue
            df = pd.read_parquet(f)
            df = df[df.op_name == "all_reduce"]
            if engine == "nccl":
                df = df[df.nccl_dtype == "half"].assign(mode="graph")
            else:
                df = df.assign(mode=df["backend"].str.rsplit("_", n=1).str[-1] if "backend" in df else "graph")
            for (mode, tp), d in sorted(df.groupby(["mode", "num_gpus"])):
                nbytes = d.message_size.to_numpy() * 2                  # bf16/half elements -> bytes
                keep = (nbytes & (nbytes - 1)) == 0
                d, nbytes = d[keep], nbytes[keep]
                order = np.argsort(nbytes)
                rows.append({"system": system, "engine": engine, "version": f.parent.name, "mode": mode, "tp": int(tp),
                             "src": rel(root, f),
                             "log2_bytes": [int(math.log2(b)) for b in nbytes[order]],
                             "us": [sig(x * 1e3, 3) for x in d.latency.to_numpy()[order]]})
    return rows


# ---------------------------------------------------------------- attention
def distill_attention(root: Path, refs: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"decode": [], "context": []}
    for system, ref in refs.items():
        for engine in ENGINES:
            for phase, table in (("decode", "generation_attention_perf"), ("context", "context_attention_perf")):
                for f, df in newest_per_dtype(root, system, "attention", engine, table, "kv_cache_dtype"):
                    df = df[df.head_dim == 128]
                    if "window_size" in df:
                        df = df[df.window_size == 0]
                    for (kernel, adt, kvdt), d in sorted(df.groupby(["kernel_source", "attn_dtype", "kv_cache_dtype"])):
                        if kvdt not in KV_BYTES:
                            continue
                        row = _attn_row(root, f, system, ref, engine, phase, kernel, adt, kvdt, d)
                        if row:
                            out[phase].append(row)
    return out


def _attn_row(root, f, system, ref, engine, phase, kernel, adt, kvdt, d) -> dict | None:
    b, isl, step, heads, kvh, hd = (d[c].to_numpy(dtype=float) for c in
                                    ("batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim"))
    t = d.latency.to_numpy() * 1e-3
    if phase == "decode":
        work = b * (isl + step) * kvh * hd * 2 * KV_BYTES[kvdt]               # K and V read once
        roof = work / (ref["bandwidth_gbs"] * 1e9)
    else:
        peak = ref["peaks_tflops"]["fp8" if adt == "fp8" else "bf16"]
        work = 2 * b * heads * hd * isl * isl                                # QK^T + PV, causal half
        roof = work / (peak * 1e12)
    bucket = (np.round(np.log2(np.maximum(work, 1)) / 2) * 2).astype(int)
    floor = float(np.median(t[bucket == bucket.min()]))     # the smallest work measured: the fixed cost
    cells = [(int(x), sig(work_efficiency(t[bucket == x], floor, roof[bucket == x]), 3))
             for x in sorted(set(bucket)) if (bucket == x).sum() >= 3]
    if not cells:
        return None
    return {"system": system, "engine": engine, "version": f.parent.name, "kernel": kernel, "attn_dtype": adt,
            "kv_dtype": kvdt, "src": rel(root, f), "floor_us": sig(floor * 1e6, 3),
            "work": "kv_bytes" if phase == "decode" else "flops",
            "log2_work": [c[0] for c in cells], "e": [c[1] for c in cells]}


# ---------------------------------------------------------------- linear attention (GDN)
# The collector times a GDN layer as two kernels per phase (aiconfigurator_core/sdk/models/qwen35.py builds
# each linear_attention layer from them): decode = causal_conv1d_update + the recurrent step, prefill =
# causal_conv1d_fn + the chunked scan. Its recurrent state is float32, what every Qwen3.5/3.6 config pins
# (sdk/models/qwen35.py: _resolve_mamba_ssm_dtype, "float32" default); the conv window is 16-bit.
GDN_STATE_BYTES = 4
GDN_CONV_BYTES = 2
GDN_KEY = ["batch_size", "seq_len", "d_model", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"]
GDN_PHASE = {"generation": "decode", "context": "prefill"}
GDN_MIN_CELL = 3                                   # measured shapes a work bucket needs
GDN_FLOOR_MAX_TOKENS = 16                          # prefill rows this short: the layer's fixed cost
GDN_SCAN_MIN_TOKENS = 256                          # prefill rows this long: the per-token scan rate


def gdn_work(d: pd.DataFrame, phase: str = "decode") -> np.ndarray:
    """The state bytes a decode step loads and stores (per layer, per GPU)."""
    b, dc, nk, hk, nv, hv = (d[c].to_numpy(dtype=float) for c in
                             ("batch_size", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"))
    conv = (2 * nk * hk + nv * hv) * (dc - 1) * GDN_CONV_BYTES
    return b * 2 * (nv * hk * hv * GDN_STATE_BYTES + conv)


def distill_linear_attention(root: Path, refs: dict) -> list[dict]:
    rows = []
    for system, ref in refs.items():
        for engine in ENGINES:
            found = [v / "gdn_perf.parquet" for v in versions(root / system / "linear_attention" / engine)
                     if (v / "gdn_perf.parquet").is_file()]
            if not found:
                continue
            f = found[0]                                  # the newest version measured
            df = pd.read_parquet(f)
            for raw_phase, phase in GDN_PHASE.items():
                d = df[df.phase == raw_phase]
                if phase == "prefill":
                    # one sequence, as a served prompt's chunk is scanned: the chunks of one sequence run one
                    # after another, so a batch of short sequences scans the same tokens much faster
                    d = d[d.batch_size == 1]
                kernels = sorted(d.kernel_source.unique())
                if not any("delta_rule" in k for k in kernels):
                    continue                              # the conv alone is not a layer (a100 sglang prefill)
                # one layer = the phase's kernels together: rows whose every kernel was timed
                g = d.groupby(GDN_KEY).agg(latency=("latency", "sum"), n=("latency", "size")).reset_index()
                g = g[g.n == len(kernels)]
                row = _gdn_row(root, f, system, ref, engine, phase, kernels, g) if len(g) else None
                if row:
                    rows.append(row)
    return rows


def _gdn_row(root, f, system, ref, engine, phase, kernels, g) -> dict | None:
    t = g.latency.to_numpy() * 1e-3
    head = {"system": system, "engine": engine, "version": f.parent.name, "phase": phase, "kind": "gdn",
            "kernels": list(kernels), "src": rel(root, f), "state_dtype": "float32", "n": int(len(g))}
    if phase == "prefill":
        return _gdn_prefill(head, g, t)
    work = gdn_work(g, phase)
    roof = work / (ref["bandwidth_gbs"] * 1e9)
    bucket = (np.round(np.log2(np.maximum(work, 1)) / 2) * 2).astype(int)
    floor = float(np.median(t[bucket == bucket.min()]))   # the smallest work measured: the layer's fixed cost
    cells = [(int(x), sig(work_efficiency(t[bucket == x], floor, roof[bucket == x]), 3))
             for x in sorted(set(bucket)) if (bucket == x).sum() >= GDN_MIN_CELL]
    if not cells:
        return None
    return {**head, "floor_us": sig(floor * 1e6, 3), "work": "state_bytes",
            "log2_work": [c[0] for c in cells], "e": [c[1] for c in cells]}


def _gdn_prefill(head: dict, g, t: np.ndarray) -> dict | None:
    """One sequence's scan is latency-bound on its length (time hardly depends on the heads: the chunks run
    one after another): t = floor + tokens x (ns_per_token + value heads x ns_per_token_head), least squares
    over the rows of GDN_SCAN_MIN_TOKENS tokens and more; floor = median time at GDN_FLOOR_MAX_TOKENS or fewer."""
    s, h = g.seq_len.to_numpy(dtype=float), g.num_v_heads.to_numpy(dtype=float)
    small, big = s <= GDN_FLOOR_MAX_TOKENS, s >= GDN_SCAN_MIN_TOKENS
    if not small.any() or big.sum() < GDN_MIN_CELL:
        return None
    floor = float(np.median(t[small]))
    y = t[big] - floor
    (a, b), *_ = np.linalg.lstsq(np.column_stack([s[big], s[big] * h[big]]), y, rcond=None)
    if b < 0 or a < 0:
        a, b = float(np.median(y / s[big])), 0.0
    return {**head, "floor_us": sig(floor * 1e6, 3), "work": "tokens", "ns_per_token": sig(a * 1e9, 3),
            "ns_per_token_head": sig(b * 1e9, 3), "log2_work": [], "e": []}


# ---------------------------------------------------------------- Mamba2 (decode: the conv update only)
# mamba2_perf holds TRT-LLM 1.3.0rc20 rows only, and of the four kernels its model builder charges a Mamba2
# layer (aiconfigurator_core/sdk/models/nemotron_h.py: causal_conv1d_fn + mamba_chunk_scan_combined in
# context, causal_conv1d_update + selective_state_update in generation) only the two conv kernels were
# collected on every system. Distilled: the decode conv update (a step's conv window load + store at the
# conv channels), as the GDN decode rows; the selective_state_update and the prefill scan are not measured,
# so the runtime charges them as estimates (advisor.cost.attention_cost.linear_decode says how).
MAMBA2_CONV_BYTES = 2                              # 16-bit conv window
MAMBA2_KEY = ["batch_size", "d_model", "d_state", "d_conv", "nheads", "head_dim", "n_groups"]
MAMBA2_DECODE_KERNEL = "causal_conv1d_update"


def mamba2_conv_work(d: pd.DataFrame) -> np.ndarray:
    """The conv window bytes one decode step loads and stores (per layer): batch x 2 x (conv kernel - 1) x
    (heads x head dim + 2 x groups x state size) x 2."""
    b, dc, nh, hd, ng, ds = (d[c].to_numpy(dtype=float) for c in
                             ("batch_size", "d_conv", "nheads", "head_dim", "n_groups", "d_state"))
    return b * 2 * (dc - 1) * (nh * hd + 2 * ng * ds) * MAMBA2_CONV_BYTES


def _mamba2_decode(root: Path, system: str, engine: str) -> tuple[Path, pd.DataFrame] | None:
    found = [v / "mamba2_perf.parquet" for v in versions(root / system / "linear_attention" / engine)
             if (v / "mamba2_perf.parquet").is_file()]
    if not found:
        return None
    df = pd.read_parquet(found[0])                    # the newest version measured
    d = df[(df.phase == "generation") & (df.kernel_source == MAMBA2_DECODE_KERNEL)]
    return found[0], d.groupby(MAMBA2_KEY).agg(latency=("latency", "median")).reset_index()


def distill_mamba2(root: Path, refs: dict) -> list[dict]:
    rows = []
    for system, ref in refs.items():
        for engine in ENGINES:
            got = _mamba2_decode(root, system, engine)
            if got is None or not len(got[1]):
                continue
            f, g = got
            t = g.latency.to_numpy() * 1e-3
            work = mamba2_conv_work(g)
            roof = work / (ref["bandwidth_gbs"] * 1e9)
            bucket = (np.round(np.log2(np.maximum(work, 1)) / 2) * 2).astype(int)
            full = [int(x) for x in sorted(set(bucket)) if (bucket == x).sum() >= GDN_MIN_CELL]
            if not full:
                continue
            floor = float(np.median(t[bucket == full[0]]))   # the smallest work with 3+ shapes: one row is noise
            cells = [(x, sig(work_efficiency(t[bucket == x], floor, roof[bucket == x]), 3)) for x in full]
            if cells:
                rows.append({"system": system, "engine": engine, "version": f.parent.name, "phase": "decode",
                             "kind": "mamba2", "kernels": [MAMBA2_DECODE_KERNEL], "src": rel(root, f),
                             "state_dtype": "bfloat16", "n": int(len(g)), "floor_us": sig(floor * 1e6, 3),
                             "work": "conv_bytes", "log2_work": [c[0] for c in cells], "e": [c[1] for c in cells]})
    return rows


def _mamba2_sample(root: Path, system: str, engine: str) -> dict[str, list]:
    """Mamba2 decode conv updates as the plan uses them: [heads, conv bytes, ms] of every measured shape."""
    got = _mamba2_decode(root, system, engine)
    if got is None or not len(got[1]):
        return {}
    g = got[1]
    return {f"mamba2/{system}/{engine}/decode": np.column_stack([g.nheads, mamba2_conv_work(g), g.latency]).tolist()}


# ---------------------------------------------------------------- elementwise (the kernels between operators)
# The stand-in for the small kernels a layer runs between its measured operators (RMSNorm, rotary, KV-cache
# write, activation, residual add): vLLM's static_scaled_fp8_quant, one CUDA kernel that reads a 16-bit
# M x K activation, scales it and writes it back in 8 bits (quantize/vllm/<version>/scale_matrix_perf). Not
# SGLang's table of the same op (kernel "sglang": ~8 us at one row and about ten times vLLM's time at
# 4096 x 4096 on H200, not one fused kernel) nor TRT-LLM's (torch ops).
ELEMENTWISE_ENGINE = "vllm"
ELEMENTWISE_BYTES = 2 + 1                          # bytes per element: 16-bit read, 8-bit write


def distill_elementwise(root: Path, refs: dict) -> list[dict]:
    rows = []
    for system, ref in refs.items():
        found = [v / "scale_matrix_perf.parquet" for v in versions(root / system / "quantize" / ELEMENTWISE_ENGINE)
                 if (v / "scale_matrix_perf.parquet").is_file()]
        if not found:
            continue
        f = found[0]
        df = pd.read_parquet(f)
        for kernel, d in sorted(df[df.latency > 0].groupby("kernel_source")):
            t = d.latency.to_numpy() * 1e-3
            work = d.m.to_numpy(dtype=float) * d.k.to_numpy(dtype=float) * ELEMENTWISE_BYTES
            roof = work / (ref["bandwidth_gbs"] * 1e9)
            bucket = (np.round(np.log2(work) / 2) * 2).astype(int)
            floor = float(np.median(t[bucket == bucket.min()]))
            cells = [(int(x), sig(work_efficiency(t[bucket == x], floor, roof[bucket == x]), 3))
                     for x in sorted(set(bucket)) if (bucket == x).sum() >= GDN_MIN_CELL]
            if cells:
                rows.append({"system": system, "engine": ELEMENTWISE_ENGINE, "version": f.parent.name,
                             "kernel": kernel, "src": rel(root, f), "floor_us": sig(floor * 1e6, 3), "work": "bytes",
                             "log2_work": [c[0] for c in cells], "e": [c[1] for c in cells], "n": int(len(d))})
    return rows


# ---------------------------------------------------------------- raw rows for checks
SAMPLE_M = (1, 4, 16, 64, 256, 1024, 4096)
SAMPLE_NK = (1024, 2048, 4096, 8192, 16384)


def sample_rows(root: Path) -> dict[str, list]:
    """Measured rows of realistic shapes, for tests that check the distilled model reproduces them
    (on the measured system and carried to a sibling one)."""
    out: dict[str, list] = {}
    for system in SYSTEMS:
        for engine in ENGINES:
            for _f, df in newest_per_dtype(root, system, "gemm", engine, "gemm_perf", "gemm_dtype"):
                df = df[df.m.isin(SAMPLE_M) & df.n.isin(SAMPLE_NK) & df.k.isin(SAMPLE_NK)]
                df = df[[(engine, d) not in EAGER_GEMM and d in WEIGHT_BYTES for d in df.gemm_dtype]]
                out.setdefault(f"gemm/{system}/{engine}", []).extend(
                    df[["kernel_source", "gemm_dtype", "m", "n", "k", "latency"]].values.tolist())
            for _f, df in newest_per_dtype(root, system, "moe", engine, "moe_perf", "moe_dtype"):
                df = df[(df.moe_ep_size == 1) & (df.moe_tp_size == 1) & (df.distribution == "balanced")
                        & df.num_tokens.isin(SAMPLE_M) & df.moe_dtype.isin(list(WEIGHT_BYTES))]
                rows = df[["kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
                           "num_experts", "latency"]].values.tolist()
                gated = [moe_row_gating(engine, _f.parent.name, r[0], r[1], tuple(int(x) for x in r[3:7]))[0]
                         for r in rows]
                out.setdefault(f"moe/{system}/{engine}", []).extend(
                    [*r, g] for r, g in zip(rows, gated) if g is not None)
            out.update(_gdn_sample(root, system, engine))
            out.update(_mamba2_sample(root, system, engine))
    return {k: [[x.item() if hasattr(x, "item") else x for x in r] for r in v] for k, v in out.items() if v}


def _gdn_sample(root: Path, system: str, engine: str) -> dict[str, list]:
    """GDN layers as the plan uses them: decode [value heads, state bytes, ms] of rows whose state exceeds
    twice the L2 (as in a served step, where every layer's state streams from DRAM); prefill of one sequence
    [tokens, value heads, ms] from 256 tokens up."""
    found = [v / "gdn_perf.parquet" for v in versions(root / system / "linear_attention" / engine)
             if (v / "gdn_perf.parquet").is_file()]
    if not found:
        return {}
    df = pd.read_parquet(found[0])
    l2 = (reference_figures(ROOT / "profiles" / "gpus.yaml")[system].get("l2_mb") or 0) * 2**20
    out = {}
    for raw_phase, phase in GDN_PHASE.items():
        d = df[df.phase == raw_phase]
        k = d.kernel_source.nunique()
        g = d.groupby(GDN_KEY).agg(latency=("latency", "sum"), n=("latency", "size")).reset_index()
        g = g[g.n == k]
        if phase == "decode":
            g = g[gdn_work(g) > 2 * l2]
            out[f"gdn/{system}/{engine}/decode"] = np.column_stack([g.num_v_heads, gdn_work(g), g.latency]).tolist()
        else:
            g = g[(g.batch_size == 1) & (g.seq_len >= GDN_SCAN_MIN_TOKENS)]
            out[f"gdn/{system}/{engine}/prefill"] = np.column_stack([g.seq_len, g.num_v_heads, g.latency]).tolist()
    return out


# ---------------------------------------------------------------- output
HEADER = {
    "schema": SCHEMA, "package": PACKAGE, "package_version": PACKAGE_VERSION,
    "generated_by": "benchmarks/distill_aiconfigurator.py",
    "license": "Apache-2.0 (aiconfigurator-core measurements, distilled)",
    "collector": COLLECTOR,
}
NOTES = {
    "gemm": ("t = floor_us + roofline / e, roofline = max((N*K*weight_bytes + M*K*act_bytes + 2*M*N) / bandwidth, "
             "2*M*N*K / peak) with the system's figures in systems.json; e per M (rows) and log2(N*K) rounded to "
             "an even number (columns); act_bytes = 2, or 4 for FP8/INT8 activations and 3.125 for NVFP4 (the quantize "
             "pass writes the quantized copy, the GEMM reads it); median over the measured shapes with N, K >= 128; "
             "floor_us per M = the "
             "median of time - roofline over the shapes with N*K <= 2^20 (the fixed cost of a call). "
             "Timed as the engine's Linear module under CUDA graphs (activation quantization included). "
             "vLLM fp8_block is left out: the collector times it eagerly (host dispatch, not the served kernel)."),
    "moe": ("t = fixed_us(T) + roofline / e(T) per token count T, fitted by least squares over the measured "
            "shapes (expert-parallel 1; moe_tp splits the intermediate size); roofline = max(touched experts' "
            "weight bytes / bandwidth, FLOPs / peak), touched = min(experts, T x topk). The MoE op includes top-k "
            "routing from given router logits, permute, the grouped GEMMs and the weighted combine; not the router "
            "GEMM. distribution 'balanced' unless only power-law rows exist. gated: 3 weight matrices per expert "
            "(gate, up, down), else 2; where one kernel_source holds rows of both, each gating is its own table "
            "(a row's 'gating' names how its rows' gating is known, spelled out in the header's 'gating'; rows "
            "no collector source accounts for are left out)."),
    "allreduce": ("measured latency (us) per message size in bytes (bf16 elements x 2), per TP size; 'nccl' is "
                  "nccl-tests (newest NCCL per system), an engine name is that engine's custom all-reduce path "
                  "(mode graph = captured in a CUDA graph, eager = launched from Python)."),
    "attention": ("decode: t = floor_us + KV bytes / (bandwidth x e), KV bytes = batch x (isl + step) x kv_heads x "
                  "head_dim x 2 x element bytes; context: t = floor_us + 2 x batch x heads x head_dim x isl^2 / "
                  "(peak x e); head_dim 128, no sliding window; e per log2(work) rounded to an even number."),
    "elementwise": ("one small elementwise kernel: vLLM's static_scaled_fp8_quant over an M x K 16-bit activation "
                    "(scale_matrix_perf), the measured stand-in for the kernels between the measured operators "
                    "(norms, rotary + cache write, activation, residual); t = floor_us + bytes / (bandwidth x e), "
                    "bytes = M x K x 3 (16-bit read, 8-bit write); floor_us = median time of the smallest work bucket "
                    "(M x K x 3 <= 2^9 bytes); e per log2(bytes) rounded to an even number."),
    "linear_attention": ("one Gated-DeltaNet layer per phase, the sum of the collector's kernels for it (decode: "
                         "causal_conv1d_update + the recurrent step; prefill: causal_conv1d_fn + the chunked scan), "
                         "heads per GPU as measured. decode: t = floor_us + state bytes / (bandwidth x e), state "
                         "bytes = batch x 2 (load + store) x (value heads x key dim x value dim x 4 (float32 state) "
                         "+ (2 x key heads x key dim + value heads x value dim) x (conv kernel - 1) x 2); floor_us = "
                         "median time of the smallest work bucket; e per log2(bytes) rounded to an even number "
                         "(median over the measured shapes), clipped at 1: rows whose state fits in L2 (the "
                         "collector re-reads one layer's state) time below the DRAM roofline a served step, reading "
                         "every layer's state, pays. prefill (batch-1 rows: one prompt's chunk): t = floor_us + "
                         "tokens x (ns_per_token + value heads x ns_per_token_head) / 1000, least squares over rows "
                         "of 256 tokens and more, floor_us = median time at 16 tokens or fewer; the scan's chunks "
                         "run one after another, so its time is latency per token, nearly independent of the heads. "
                         "kind mamba2 (TRT-LLM rows only, mamba2_perf): the decode conv update alone "
                         "(causal_conv1d_update; the collector has no selective_state_update or chunk-scan rows), "
                         "t = floor_us + conv bytes / (bandwidth x e), conv bytes = batch x 2 (load + store) x "
                         "(conv kernel - 1) x (heads x head dim + 2 x groups x state size) x 2, e as for GDN decode, "
                         "floor_us = median time of the smallest work bucket with 3 or more shapes; the median over "
                         "repeated shapes."),
}


def dump(path: Path, key: str, rows, extra: dict | None = None) -> None:
    """One table per line: small diffs when a measurement changes."""
    head = {**HEADER, **(extra or {}), **({"model": NOTES[key]} if key in NOTES else {})}
    lines = ["{", *[f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()], f'  "{key}": [']
    lines += [f"    {json.dumps(r, sort_keys=True)}{',' if i < len(rows) - 1 else ''}" for i, r in enumerate(rows)]
    lines += ["  ]", "}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- smoke: the shipped tables load
LIST_KEY = {"attention_decode": "attention", "attention_context": "attention"}
LINEAR_KIND_FILE = {"gdn": "gdn_perf.parquet", "mamba2": "mamba2_perf.parquet"}


def smoke(folder: Path) -> int:
    """Load every table in ``folder`` through the runtime's readers (advisor.cost.measured_tables) and check
    the header and every row's provenance; print one line per file. No pandas, no aiconfigurator."""
    from advisor.cost import measured_tables as mt

    problems: list[str] = []
    for name in mt.FILES:
        data = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        for k, v in HEADER.items():
            if data.get(k) != v:
                problems.append(f"{name}.json: header {k} = {data.get(k)!r}, not {v!r}")
        rows = data[LIST_KEY.get(name, name)]
        for i, r in enumerate(rows):
            src = r.get("src")
            if src is None:
                continue                                  # systems.json: our GPU table's figures, no source file
            want = f"{PACKAGE} {PACKAGE_VERSION} aiconfigurator_core/systems/data/{r['system']}/"
            if not (src.startswith(want) and f"/{r['version']}/" in src
                    and (r["engine"] in src or r["engine"] == "nccl")):
                problems.append(f"{name}.json row {i}: provenance {src!r} does not name its system/engine/version")
            if name == "linear_attention" and not src.endswith(f"/{LINEAR_KIND_FILE.get(r.get('kind'), '?')}"):
                problems.append(f"{name}.json row {i}: kind {r.get('kind')!r} not from its table ({src!r})")
        print(f"{name}.json: {len(rows)} rows, {len({r['system'] for r in rows})} systems")
    typed = {"systems": len(mt.systems(folder)), "gemm": len(mt.gemm_tables(folder)),
             "moe": len(mt.moe_tables(folder)), "allreduce": len(mt.comm_curves(folder)),
             "attention": sum(len(mt.attention_tables(p, folder)) for p in ("decode", "context")),
             "linear_attention": sum(len(mt.linear_tables(p, folder)) for p in ("decode", "prefill")),
             "mamba2": sum(t.kind == "mamba2" for t in mt.linear_tables("decode", folder)),
             "elementwise": len(mt.elementwise_tables(folder))}
    problems += [f"{k}: no rows read" for k, n in typed.items() if not n]
    print("read by advisor.cost.measured_tables: " + ", ".join(f"{k} {n}" for k, n in typed.items()))
    for p in problems:
        print(f"PROBLEM {p}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", help="aiconfigurator_core/systems/data (default: the installed package)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: %(default)s)")
    ap.add_argument("--sample-rows", metavar="FILE", help="also write measured rows of realistic shapes (JSON) to FILE")
    ap.add_argument("--smoke", action="store_true",
                    help="check the tables in --out load and name their sources (no pandas, no aiconfigurator)")
    args = ap.parse_args(argv)
    if args.smoke:
        return smoke(Path(args.out))
    if pd is None:
        sys.exit("pandas is not installed here: run the distillation in .venv-quant (or pass --smoke)")
    root, out = data_root(args.data_root), Path(args.out)
    if args.sample_rows:
        Path(args.sample_rows).write_text(json.dumps(sample_rows(root)), encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    refs = reference_figures(ROOT / "profiles" / "gpus.yaml")
    dump(out / "systems.json", "systems", list(refs.values()),
         {"peak_basis": "profiles/gpus.yaml dense tensor peaks (TFLOPS) and theoretical bandwidth (GB/s) of each "
                        "system's entry: every efficiency in this folder is relative to these figures"})
    dump(out / "gemm.json", "gemm", distill_gemm(root, refs))
    dump(out / "moe.json", "moe", distill_moe(root, refs), {"gating": GATING_SRC})
    dump(out / "allreduce.json", "allreduce", distill_allreduce(root, refs))
    att = distill_attention(root, refs)
    dump(out / "attention_decode.json", "attention", att["decode"])
    dump(out / "attention_context.json", "attention", att["context"])
    dump(out / "linear_attention.json", "linear_attention",
         distill_linear_attention(root, refs) + distill_mamba2(root, refs))
    dump(out / "elementwise.json", "elementwise", distill_elementwise(root, refs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
