"""The verdict of `quality`, with thresholds stated and justified.

Weight error depends on the weights (outliers, tails) as much as on the format, so absolute SNR
bars would misjudge models. Each tensor is instead measured against round-to-nearest (RTN) in its
own format and granularity on the same reference weights (advisor.quality.baseline): a correct
quantizer is near it, an error-compensating one somewhat worse in weight space, a broken one far
worse. Measured on the real producers the tests build (tiny Llama, tests/quality/producers):

    producer / scheme                          SNR - RTN SNR      worst group slope
    ModelOpt 0.47 NVFP4, FP8                   0.00 .. 0.16 dB    |log2| <= 0.19
    llm-compressor 0.14 NVFP4, FP8, INT4 RTN   -0.5 .. 0.65 dB    |log2| <= 0.33 (MXFP4)
    ModelOpt 0.47 INT4 AWQ (smoothing undone)  0.4 .. 1.9 dB      |log2| <= 0.09
    llm-compressor 0.14 GPTQ W4A16             1.6 .. 5.1 dB      |log2| <= 0.14

GPTQ minimises each layer's output error, not its weight error, so its weights sit further from
the reference than RTN's; that is expected and must not read as damage.
"""

from __future__ import annotations

import math

from advisor.quality.results import Finding, ScaleGroupCheck, TensorResult, Verdict

GROUP_FACTOR_LIMIT = math.log2(1.5)
TINY_GROUP = 2.0 ** -10
DEGRADED_DB = 6.0
BROKEN_DB = 12.0

THRESHOLDS: tuple[tuple[str, str], ...] = (
    (f"scale group broken: candidate/reference slope off by >= 1.5x (|log2| > {GROUP_FACTOR_LIMIT:.3f})",
     "a correct quantizer keeps a group's slope near 1: MXFP4's power-of-two scale clips by at most 8/6 "
     "(|log2| 0.415), NVFP4's E4M3 scale rounds by 1/16; measured worst 0.33 over every group of 13 real "
     "checkpoints. A wrong scale byte, a swapped or misread scale layout moves whole groups by 2^k"),
    (f"groups below {TINY_GROUP:g} x the tensor's amax are not judged",
     "their scale underflows by design (NVFP4 clamps block scales at 2^-9 of the global scale, FP8 flushes "
     "subnormals), so their slope says nothing about the quantizer"),
    (f"tensor degraded: SNR more than {DEGRADED_DB:g} dB below round-to-nearest in the same format",
     "twice the error amplitude of plain rounding; the real producers measured stay within 5.1 dB (GPTQ's "
     "error compensation), RTN producers within 0.7 dB"),
    (f"tensor broken: more than {BROKEN_DB:g} dB below round-to-nearest, or non-finite values",
     "four times the error amplitude of plain rounding: a misread layout (nibble order, transposed scales, "
     "wrong zero point) lands near or below 0 dB, far past this"),
    ("fused projections must share one global NVFP4 scale",
     "the engine runs q/k/v (gate/up, fused input projections) as one GEMM with one global scale: vLLM 0.33 "
     "applies the max (ModelOpt) or min (compressed-tensors) of the members' scales to all of them"),
)


def group_text(t: TensorResult, i: int = 0) -> str:
    g = t.broken[i]
    what = "non-finite values" if not math.isfinite(g.factor) else f"values x{g.factor:.3g} of the reference"
    return f"{t.name} row {g.row}, columns {g.col}-{g.col + t.group_size - 1}: {what}"


def findings(tensors: tuple[TensorResult, ...], checks: tuple[ScaleGroupCheck, ...], kept: dict) -> tuple[Finding, ...]:
    out: list[Finding] = []
    for t in sorted(tensors, key=lambda t: -t.broken_groups):
        if t.broken_groups:
            out.append(Finding("broken", f"{t.broken_groups} broken scale group(s) in {t.format}: {group_text(t)}"
                                         + (f" (+{t.broken_groups - 1} more)" if t.broken_groups > 1 else "")))
    for t in tensors:
        if t.nonfinite and not t.broken_groups:
            out.append(Finding("broken", f"{t.name}: {t.nonfinite} non-finite value(s) after dequantization"))
    for t in sorted(tensors, key=lambda t: -t.excess_db):
        if t.excess_db > BROKEN_DB:
            out.append(Finding("broken", f"{t.name}: SNR {t.snr_db:.1f} dB, {t.excess_db:.1f} dB below "
                                         f"round-to-nearest in {t.format} ({t.rtn_snr_db:.1f} dB): suspect the "
                                         "scale layout or packing"))
        elif t.excess_db > DEGRADED_DB:
            out.append(Finding("degraded", f"{t.name}: SNR {t.snr_db:.1f} dB, {t.excess_db:.1f} dB below "
                                           f"round-to-nearest in {t.format} ({t.rtn_snr_db:.1f} dB)"))
    for c in checks:
        if c.shared:
            continue
        worst = min(c.served_snr_db) if c.served_snr_db else float("nan")
        ratio = max(c.scales) / min(c.scales) if min(c.scales) > 0 else math.inf
        sev = "broken" if ratio >= 1.5 else "degraded"
        out.append(Finding(sev, f"{c.rule}: global scales differ by x{ratio:.3g} across {', '.join(c.members)}; "
                                f"served with one scale the worst member falls to {worst:.1f} dB ({c.source})"))
    if kept.get("different"):
        d = kept["different"]
        out.append(Finding("note", f"{len(d)} unquantized tensor(s) differ from the reference, e.g. {d[0]} "
                                   "(smoothing folded into norms, or another reference?)"))
    if kept.get("missing"):
        out.append(Finding("note", f"{len(kept['missing'])} unquantized tensor(s) are not in the reference, "
                                   f"e.g. {kept['missing'][0]}"))
    return tuple(out)


def judge(tensors: tuple[TensorResult, ...], checks: tuple[ScaleGroupCheck, ...], found: tuple[Finding, ...],
          formats: tuple[str, ...]) -> Verdict:
    broken = [f for f in found if f.severity == "broken"]
    degraded = [f for f in found if f.severity == "degraded"]
    n = len(tensors)
    snrs = sorted(t.snr_db for t in tensors)
    med = snrs[len(snrs) // 2] if snrs else float("nan")
    worst = max(tensors, key=lambda t: t.excess_db) if tensors else None
    fused = list(checks)
    scale_text = ("fused global scales shared" if fused and all(c.shared for c in fused) else
                  "no fused NVFP4 groups" if not fused else "fused global scales NOT shared")
    what = f"{n} tensor(s), {' + '.join(formats)}"
    if broken:
        more = f"; {len(broken) - 1} more problem(s)" if len(broken) > 1 else ""
        return Verdict("broken", f"BROKEN: {broken[0].text}" + more, THRESHOLDS)
    if degraded:
        return Verdict("degraded", f"DEGRADED: {degraded[0].text}" + (f"; {len(degraded) - 1} more"
                                                                      if len(degraded) > 1 else ""), THRESHOLDS)
    assert worst is not None, "compare() refuses a candidate with no quantized tensors"
    return Verdict("ok", f"OK: {what} within {max(0.0, worst.excess_db):.2f} dB of round-to-nearest "
                         f"(median SNR {med:.1f} dB, worst {worst.name} {worst.snr_db:.1f} dB); {scale_text}; "
                         "no broken scale groups", THRESHOLDS)
