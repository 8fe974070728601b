"""Static cost of the weight-only kernels: SASS instructions per weight element in the K loop.

No GPU is needed. Every benchmark candidate (advisor/microbench/configs.py) is compiled ahead of
time with this Triton for a target (`GPUTarget("cuda", cc, 32)`), with the runtime's
specialisation of integer arguments (multiples of 16 get `tt.divisibility 16`, as the launcher
does for K x N = 5120 x 17408). The cubin is disassembled with the wheel's `nvdisasm`, the K loop
is found (the longest backward-branch loop that issues global loads) and its instructions are
divided by the weight elements one thread handles per iteration (BLOCK_N * BLOCK_K / threads).
Registers and spills come from the wheel's `ptxas -v` on the same PTX.

Run from the repository root, without TRITON_INTERPRET:

    python benchmarks/kernel_sass.py                          # nvfp4/fp8/int4, M=1 and 16, sm_90a/86/120
    python benchmarks/kernel_sass.py --fmt nvfp4 --m 1 --cc 90 --dump /tmp/sass
    python benchmarks/kernel_sass.py --m 8192 --cc 86 --json out.json
    python benchmarks/kernel_sass.py --cc 90,100 --m 1 --path gemv   # the issue 23 gates

Classes (per weight element): bits = LOP3/SHF/PRMT/IMAD.SHL and other bit ops (decode, address
bits), cvt = conversions (HADD2.F32, F2F, F2FP, I2F...), fp = FFMA/FMUL/FADD/HFMA2/HMUL2/HADD2,
mma = HMMA/HGMMA and warpgroup ops, ldg = global loads, smem = LDS/STS/LDSM/STSM/barriers,
shfl = warp shuffles (the GEMV reduction), other = integer/predicate/branch/everything else.
NOPs (alignment padding) are not counted.

Budgets (kernels/NOTES.md, "Budgets"): a card issues SMs x 4 schedulers x boost clock warp
instructions, 32 thread instructions each, of which a streaming kernel fills about 90 %; at full
bandwidth it streams bandwidth / bytes-per-element weight elements. Their ratio is the most a
kernel may spend per element and keep up: H200 (4.8 TB/s, 132 SMs, 1.98 GHz) 3.5 for NVFP4
(0.5625 B/element with its scales), 6.3 for FP8 (1 B), 3.2 for INT4 with group-128 fp16 scales
(0.516 B). The gates are issue 23's: NVFP4 at M=1
<= 3.5 on sm_90a and sm_100a, and FP8 and INT4 at M=1 within the same issue rate per byte (6.2,
3.2). Each card's own budget is printed beside them (a B200 streams 7.7 TB/s: 2.4 for NVFP4).
Exits 1 when a gate is missed. --smoke: one NVFP4 GEMV for sm_90a, no gates (CI runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

K_DEFAULT, N_DEFAULT, SMS = 5120, 17408, 132
CLASSES = ("bits", "cvt", "fp", "mma", "ldg", "smem", "shfl", "other")

_BITS = {"LOP3", "LOP", "SHF", "SHL", "SHR", "PRMT", "BFE", "BFI", "BMSK", "SGXT", "BREV", "FLO", "POPC"}
_CVT = {"F2F", "F2FP", "I2F", "F2I", "I2FP", "F2IP", "I2I", "FRND"}
_FP = {"FFMA", "FMUL", "FADD", "FFMA2", "FMUL2", "FADD2", "HFMA2", "HMUL2", "HADD2", "FMNMX", "HMNMX2", "FSEL", "FSETP",
       "HSETP2"}
_MMA = {"HMMA", "HGMMA", "IMMA", "QGMMA", "IGMMA", "BGMMA", "UTCHMMA", "UTCQMMA", "UTCMMA", "OMMA", "QMMA",
        "WARPGROUP", "WARPSYNC"}
_LDG = {"LDG", "LDGSTS", "LDGDEPBAR", "LD", "UTMALDG", "UBLKCP"}
_SMEM = {"LDS", "STS", "LDSM", "STSM", "BAR", "SYNCS", "DEPBAR", "ARRIVES", "UTMACCTL", "MEMBAR", "FENCE"}
_SHFL = {"SHFL", "REDUX"}


def classify(ins: str) -> str:
    """Class of one SASS instruction text ("@P0 LOP3.LUT R1, ..." -> "bits")."""
    words = ins.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    full = words[0] if words else ""
    op = full.split(".")[0]
    if op in _CVT or full.startswith("HADD2.F32"):
        return "cvt"
    if op in _BITS or full.startswith("IMAD.SHL") or full.startswith("IMAD.U32") and "0x10000" in ins:
        return "bits"
    if op in _FP:
        return "fp"
    if op in _MMA:
        return "mma"
    if op in _LDG:
        return "ldg"
    if op in _SMEM:
        return "smem"
    if op in _SHFL:
        return "shfl"
    return "other"


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def parse_sass(text: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """[(address, instruction)], {label: address of the next instruction} of one kernel listing."""
    instrs: list[tuple[int, str]] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        m = _LABEL.match(s)
        if m:
            pending.append(m.group(1))
            continue
        m = _LINE.search(line)
        if m:
            addr = int(m.group(1), 16)
            for lab in pending:
                labels[lab] = addr
            pending = []
            instrs.append((addr, m.group(2)))
    return instrs, labels


def k_loop(text: str) -> list[str]:
    """Instructions of the K loop: the longest backward-branch loop that issues global loads."""
    instrs, labels = parse_sass(text)
    best: list[str] = []
    for i, (addr, ins) in enumerate(instrs):
        words = ins.split()
        if (words[1] if words[0].startswith("@") else words[0]).split(".")[0] != "BRA":
            continue
        t = _TARGET.search(ins)
        if not t or labels.get(t.group(1), addr + 1) > addr:
            continue
        start = labels[t.group(1)]
        body = [x for a, x in instrs[: i + 1] if a >= start]
        body = [x for x in body if not x.startswith("NOP")]
        if any(classify(x) == "ldg" for x in body) and len(body) > len(best):
            best = body
    return best


# ----------------------------------------------------------------------------- compile
def _tool(name: str) -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def _int_attrs(fn, ints: dict[str, int]) -> tuple[dict, dict]:
    """The runtime's specialisation: ints equal to 1 become constants, multiples of 16 get divisibility."""
    attrs, consts = {}, {}
    for name, value in ints.items():
        if value == 1:
            consts[name] = 1
        elif value % 16 == 0:
            attrs[(fn.arg_names.index(name),)] = [["tt.divisibility", 16]]
    return attrs, consts


class _Shape:
    """Stands in for a weight tensor where only its shape is asked (W.gemv_even, W.Weight.n/k)."""

    def __init__(self, *shape: int):
        self.shape = shape


def build(fmt: str, m: int, cand, cc: int, k: int = K_DEFAULT, n: int = N_DEFAULT, fn=None, extra=None):
    """Compile one candidate (or `fn`, a kernel with the same arguments, plus `extra` constexprs);
    returns Triton's CompiledKernel."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels import weight_only as W

    p = cand.params
    group = {"nvfp4": 16, "fp8": 1, "int4": 128}[fmt]
    act = "bf16" if cc >= 80 else "fp16"
    ws = {"nvfp4": "*u8", "fp8": "*fp32", "int4": "*fp16"}[fmt]
    split = p["split_k"]
    sig = {"a_ptr": f"*{act}", "wq_ptr": "*i32", "ws_ptr": ws, "gs_ptr": "*fp32",
           "c_ptr": "*fp32" if split > 1 else f"*{act}"}
    k_iters = triton.cdiv(triton.cdiv(k, p["block_k"]), split)
    words = k // (4 if fmt == "fp8" else 8)
    s_stride = {"nvfp4": k // 16, "fp8": 0, "int4": k // group}[fmt]
    ints = {"N": n, "K": k, "K_ITERS": k_iters, "stride_am": k, "stride_wn": words, "stride_sn": s_stride,
            "stride_cm": n}
    consts = {"FORMAT": W.FORMATS[fmt], "GROUP": group, "BLOCK_N": p["block_n"], "BLOCK_K": p["block_k"],
              "ATOMIC": split > 1}
    if cand.path == "gemv":
        fn = fn or W.weight_only_gemv_kernel
        # as kernels.weight_only.gemv on a GPU of this capability, for these sizes
        weight = W.Weight(fmt, _Shape(n, k if fmt == "fp8" else k // 2), None, group=group)
        gcfg = W.GemvConfig(**{f: p[f] for f in W.GemvConfig.__dataclass_fields__ if f in p})
        launch = {"F16X2_ASM": True, "F32X2": cc >= 100, "H2": W.gemv_h2(weight, gcfg, divmod(cc, 10)),
                  "EVEN": W.gemv_even(weight, p["block_n"], p["block_k"])}
        consts.update({name: value for name, value in launch.items() if name in fn.arg_names})
    else:
        fn = fn or W.weight_only_gemm_kernel
        ints = {"M": m, **ints}
        consts.update(BLOCK_M=p["block_m"], GROUP_M=p["group_m"], SWAP_AB=p["swap_ab"],
                      DOT_DTYPE=tl.bfloat16 if act == "bf16" else tl.float16)
        if "W_BF16" in fn.arg_names:
            consts["W_BF16"] = fmt == "nvfp4" and act == "bf16"     # as kernels.weight_only.gemm does
    consts.update(extra or {})
    attrs = {(fn.arg_names.index(x),): [["tt.divisibility", 16]] for x in sig}
    int_attrs, int_consts = _int_attrs(fn, ints)
    attrs.update(int_attrs)
    consts.update(int_consts)
    sig.update({x: ("constexpr" if x in int_consts else "i32") for x in ints})
    sig.update({x: "constexpr" for x in consts})
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", cc, 32),
                          options={"num_warps": p["num_warps"], "num_stages": p["num_stages"]})


def ptxas_info(ptx: str) -> dict:
    """Registers, spill bytes and the arch ptxas reports for the PTX."""
    arch = re.search(r"\.target\s+(\S+)", ptx).group(1)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    try:
        err = subprocess.run([_tool("ptxas-blackwell"), "-v", f"--gpu-name={arch}", f.name, "-o", os.devnull],
                             capture_output=True, text=True).stderr
    finally:
        os.unlink(f.name)
    regs = re.search(r"Used (\d+) registers", err)
    spill = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)]
    return {"arch": arch, "regs": int(regs.group(1)) if regs else None, "spill": max(spill) if spill else 0}


def disassemble(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        res = subprocess.run([_tool("nvdisasm"), "-c", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if res.returncode:
        raise RuntimeError(res.stderr.strip()[:300])
    return res.stdout


def measure(fmt: str, m: int, cand, cc: int, dump: Path | None = None, fn=None, extra=None) -> dict:
    """One row: regs/spills/smem, MMA kind and SASS per weight element (total and by class)."""
    ck = build(fmt, m, cand, cc, fn=fn, extra=extra)
    ptx = ck.asm["ptx"]
    row = {"cc": cc, "fmt": fmt, "m": m, "kernel": cand.text, **ptxas_info(ptx),
           "smem": ck.metadata.shared,
           "mma": "wgmma" if "wgmma" in ptx else ("tcgen05" if "tcgen05.mma" in ptx else
                                                   ("mma" if "mma.sync" in ptx else "fma"))}
    sass = disassemble(ck.asm["cubin"])
    loop = k_loop(sass)
    p = cand.params
    elems = p["block_n"] * p["block_k"] / (32 * p["num_warps"])
    counts = Counter(classify(x) for x in loop)
    row.update(loop_instrs=len(loop), elems_per_thread=elems, per_elem=round(len(loop) / elems, 2),
               by_class={c: round(counts[c] / elems, 2) for c in CLASSES})
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        stem = f"sm{cc}-{fmt}-m{m}-{cand.text.replace(' ', '_')}"
        (dump / f"{stem}.sass").write_text(sass)
        (dump / f"{stem}.loop.sass").write_text("\n".join(loop) + "\n")
    return row


def _table(rows: list[dict]) -> str:
    head = f"{'target':8} {'fmt':6} {'M':>5} {'kernel':34} {'mma':6} {'regs':>4} {'spill':>5} {'smem':>6} " \
           f"{'/elem':>6} " + " ".join(f"{c:>5}" for c in CLASSES)
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"sm_{r['cc']:<5} {r['fmt']:6} {r['m']:>5} {r['kernel']:34} error: {r['error']}")
            continue
        lines.append(f"{r['arch']:8} {r['fmt']:6} {r['m']:>5} {r['kernel']:34} {r['mma']:6} {r['regs']:>4} "
                     f"{r['spill']:>5} {r['smem']:>6} {r['per_elem']:>6.2f} "
                     + " ".join(f"{r['by_class'][c]:>5.2f}" for c in CLASSES))
    return "\n".join(lines)


BYTES_PER_ELEMENT = {"nvfp4": 0.5 + 1 / 16, "fp8": 1.0, "int4": 0.5 + 2 / 128}
CARD = {75: "rtx-2080-ti", 86: "rtx-3090", 90: "h200-sxm", 100: "b200", 120: "rtx-5090"}
ISSUE_SHARE = 0.9               # issue slots a streaming kernel can fill (scheduling gaps, dependences)
GATE_NVFP4 = 3.5                # issue 23: NVFP4 at M = 1, sm_90a and sm_100a
GATED_TARGETS = (90, 100)


def card_budget(fmt: str, cc: int) -> float | None:
    """Thread instructions per weight element the card can issue (90 % of its slots) while it
    streams weights at its full bandwidth."""
    from advisor.gpu_table import get_gpu

    if cc not in CARD:
        return None
    g = get_gpu(CARD[cc])
    issue = g.sm_count * 4 * g.boost_clock_mhz * 1e6 * 32
    return ISSUE_SHARE * issue / (g.bandwidth_gbs * 1e9 / BYTES_PER_ELEMENT[fmt])


def gate(fmt: str, m: int, cc: int) -> float | None:
    """Issue 23's limit for this row, None where the issue sets none."""
    if m != 1 or cc not in GATED_TARGETS:
        return None
    return round(GATE_NVFP4 * BYTES_PER_ELEMENT[fmt] / BYTES_PER_ELEMENT["nvfp4"], 1)


def verdicts(rows: list[dict]) -> tuple[list[str], bool]:
    """Best candidate per (target, format, M) against its gate and the card's budget."""
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (r["cc"], r["fmt"], r["m"])
        if "error" not in r and (key not in best or r["per_elem"] < best[key]["per_elem"]):
            best[key] = r
    lines, ok = [], True
    for (cc, fmt, m), r in sorted(best.items()):
        limit, budget = gate(fmt, m, cc), card_budget(fmt, cc)
        text = f"{r['arch']:8} {fmt:6} M={m:<5} best {r['per_elem']:5.2f}  {r['kernel']}"
        if budget:
            text += f"; {CARD[cc]} budget {budget:.2f}"
        if limit is not None:
            met = r["per_elem"] <= limit
            ok &= met
            text += f"; gate {limit} -> {'met' if met else 'MISSED'} (ratio {r['per_elem'] / limit:.2f})"
        lines.append(text)
    return lines, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="90,86,120", help="compute capabilities, e.g. 90,86,120,100,75")
    ap.add_argument("--fmt", default="nvfp4,fp8,int4")
    ap.add_argument("--m", default="1,16", help="M values; candidates come from advisor/microbench/configs.py")
    ap.add_argument("--path", choices=("gemv", "gemm", "all"), default="all")
    ap.add_argument("--dump", type=Path, default=None, help="write the full SASS and the K loop per kernel here")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true", help="one NVFP4 GEMV for sm_90a, no gates")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("unset TRITON_INTERPRET: interpreted kernels cannot be compiled", file=sys.stderr)
        return 2
    if args.smoke:
        args.cc, args.fmt, args.m, args.path = "90", "nvfp4", "1", "gemv"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    from advisor.microbench import configs

    rows = []
    for cc in (int(x) for x in args.cc.split(",")):
        for fmt in args.fmt.split(","):
            for m in (int(x) for x in args.m.split(",")):
                group = {"nvfp4": 16, "fp8": 1, "int4": 128}[fmt]
                cands = [c for c in configs.candidates(m, K_DEFAULT, N_DEFAULT, SMS, group)
                         if (args.path == "all" or c.path == args.path) and not (cc < 80 and c.path == "gemm")]
                for cand in cands[:1] if args.smoke else cands:   # sm_75: tl.dot is FMA in Triton 3.9; skipped
                    try:
                        rows.append(measure(fmt, m, cand, cc, args.dump))
                    except Exception as exc:  # noqa: BLE001 - an unsupported target is a row, not a crash
                        msg = str(exc).strip().splitlines()
                        rows.append({"cc": cc, "fmt": fmt, "m": m, "kernel": cand.text,
                                     "error": f"{type(exc).__name__}: {msg[0][:100] if msg else ''}"})
                    print(_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(_table(rows))
    lines, ok = verdicts(rows)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.smoke:
        return 1 if any("error" in r for r in rows) else 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
