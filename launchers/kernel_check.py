"""Kernel check: what the engine logged at start-up vs what `explain` predicted, and the KV pool vs
the plan.

Parsed lines (exact text from engine logs):
  vLLM   "Using FLASHINFER attention backend out of potential backends: [...]"
         "Using 'MARLIN' NvFp4 MoE backend out of potential backends: [...]"  / "Using 'MARLIN' WNA16 MoE backend."
         "Using FlashInferCutlassNvFp4LinearKernel for NVFP4 GEMM", "Using %s for mixed-precision linear"
         the Marlin FP4/FP8 weight-only warnings (vllm-kernel-selection.md §2)
         "GPU KV cache size: 686,320 tokens", "Available KV cache memory: 52.36 GiB"
  SGLang "max_total_num_tokens=..." (scheduler.py L1268-1276@0.5.23)
  FastLLM "FastLLM NVFP4 Marlin: repacked ..." (needs FASTLLM_CUDA_NVFP4_MARLIN_TRACE=1)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advisor.kernel_path.model import Explanation

_RULES = (  # (layer class, regex, group with the kernel name)
    ("attention_kv",
     re.compile(r"Using (?:AttentionBackendEnum\.)?([A-Z0-9_]+) (?:attention )?backend(?: out of|\.)"), 1),
    ("moe_experts", re.compile(r"Using '([A-Za-z0-9_]+)' \S+ MoE backend"), 1),
    ("dense_linear", re.compile(r"Using ([A-Za-z0-9_]+Kernel) for (?!MMEncoder)"), 1),
    ("dense_linear", re.compile(r"Using ([A-Za-z0-9_]+) for mixed-precision linear"), 1),
    ("dense_linear", re.compile(r"(Weight-only FP4 compression) will be used leveraging the Marlin kernel"), 1),
    ("dense_linear", re.compile(r"(Weight-only FP8 compression) will be used leveraging the Marlin kernel"), 1),
    ("dense_linear", re.compile(r"NVFP4 linear falling back to the slow and unoptimized (emulation) backend"), 1),
    ("dense_linear", re.compile(r"FastLLM NVFP4 (Marlin): repacked"), 1),
)
_MARLIN_ALIASES = {"weightonlyfp4compression": "marlin", "weightonlyfp8compression": "marlin"}
_KV_TOKENS = (
    re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    re.compile(r"max_total_num_tokens=(\d+)"),
)
_KV_GIB = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_NOISE = ("linearkernel", "kernel", "backend", "moe", "nvfp4", "fp4", "fp8", "linear")


@dataclass(frozen=True)
class Observed:
    kernels: dict                        # layer class -> tuple of kernel names, in log order
    kv_tokens: int | None
    kv_gib: float | None
    lines: dict                          # layer class -> first matching line


def parse_log(lines) -> Observed:
    kernels: dict[str, list[str]] = {}
    first: dict[str, str] = {}
    kv_tokens = kv_gib = None
    for line in lines:
        for cls, rx, g in _RULES:
            m = rx.search(line)
            if m:
                name = m.group(g)
                if name not in kernels.setdefault(cls, []):
                    kernels[cls].append(name)
                first.setdefault(cls, line.strip())
        for rx in _KV_TOKENS:
            m = rx.search(line)
            if m:
                kv_tokens = (kv_tokens or 0) + int(m.group(1).replace(",", ""))  # one line per engine core
        m = _KV_GIB.search(line)
        if m and kv_gib is None:
            kv_gib = float(m.group(1))
    return Observed({k: tuple(v) for k, v in kernels.items()}, kv_tokens, kv_gib, first)


def norm(name: str | None) -> str:
    n = re.sub(r"[^a-z0-9]", "", (name or "").lower())
    n = _MARLIN_ALIASES.get(n, n)
    for noise in _NOISE:
        if n.endswith(noise) and len(n) > len(noise):
            n = n[: -len(noise)]
    return n


def _names(text: str | None) -> list[str]:
    """'MARLIN (MarlinExperts)' -> ['marlin', 'marlinexperts']: rule files name a backend and its class."""
    if not text:
        return []
    head, _, rest = text.partition("(")
    return [n for n in (norm(head), norm(rest.rstrip(")"))) if n]


def same_kernel(predicted: str | None, observed: str) -> bool:
    for a in _names(predicted):
        for b in _names(observed):
            if a == b or a.startswith(b) or b.startswith(a):
                return True
    return False


@dataclass(frozen=True)
class CheckRow:
    layer_class: str
    predicted: str | None
    observed: tuple[str, ...]
    status: str                          # "match" | "mismatch" | "not logged"
    line: str | None

    @property
    def mark(self) -> str:
        return {"match": "✓", "mismatch": "✗", "observed": "·"}.get(self.status, "?")


@dataclass(frozen=True)
class KvCheck:
    predicted_tokens: int | None
    observed_tokens: int | None

    @property
    def error_pct(self) -> float | None:
        p, o = self.predicted_tokens, self.observed_tokens
        return (o - p) / p * 100.0 if p and o is not None else None


@dataclass(frozen=True)
class KernelCheck:
    rows: tuple[CheckRow, ...]
    kv: KvCheck
    observed: Observed

    @property
    def mismatches(self) -> tuple[CheckRow, ...]:
        return tuple(r for r in self.rows if r.status == "mismatch")


# Kernels engines do not announce in their start-up log (plain BF16 layers): never a mismatch.
_SILENT = ("unquantized",)


def check(lines, explanation: Explanation | None = None, predicted_kv_tokens: int | None = None) -> KernelCheck:
    """One row per predicted (layer class, kernel); without a prediction, one row per logged class."""
    obs = parse_log(lines)
    rows = []
    if explanation is None:
        for cls, seen in obs.kernels.items():
            rows.append(CheckRow(cls, None, seen, "observed", obs.lines.get(cls)))
        return KernelCheck(tuple(rows), KvCheck(predicted_kv_tokens, obs.kv_tokens), obs)
    done = set()
    for d in explanation.decisions:
        key = (d.layer_class, d.kernel)
        if key in done:
            continue
        done.add(key)
        seen = obs.kernels.get(d.layer_class, ())
        label = d.layer_class + (f" [{', '.join(d.roles[:3])}{', …' if len(d.roles) > 3 else ''}]" if d.roles else "")
        # a checkpoint mixing schemes runs several kernels of one class, and the engine announces only some
        # (vLLM logs its NVFP4 and mixed-precision choice, not its FP8 one): a kernel is a mismatch only
        # when the announced ones match nothing explain predicts for the class
        siblings = [x.kernel for x in explanation.decisions if x.layer_class == d.layer_class and x.kernel]
        if d.kernel and any(same_kernel(d.kernel, o) for o in seen):
            status = "match"
        elif not seen or not d.kernel or norm(d.kernel).startswith(_SILENT) or \
                any(same_kernel(k, o) for k in siblings for o in seen):
            status = "not logged"
        else:
            status = "mismatch"
        rows.append(CheckRow(label, d.kernel, seen, status, obs.lines.get(d.layer_class)))
    return KernelCheck(tuple(rows), KvCheck(predicted_kv_tokens, obs.kv_tokens), obs)
