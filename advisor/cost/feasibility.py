"""Can a configuration run at all, and where: TP sizes the model allows, layers an engine leaves on
the CPU, and the fewest GPUs whose memory holds the weights. A plan reports N/A, never a GPU speed,
for a configuration that fails one of these."""

from __future__ import annotations

from advisor.checkpoint.model import ArchInfo
from advisor.errors import UsageError
from advisor.kernel_path.model import Explanation

TP_SIZES = (1, 2, 4, 8, 16)
# vLLM refuses a TP size that does not divide the attention heads (ModelConfig.verify_with_parallel_config:
# "Total number of attention heads (32) must be divisible by tensor parallel size (3).") and
# QKVParallelLinear shards KV heads (kv % tp == 0) or replicates them (tp % kv == 0).
TP_SOURCE = ("vllm/config/model.py ModelConfig.verify_with_parallel_config; "
             "vllm/model_executor/layers/linear.py QKVParallelLinear")


def tp_problem(tp: int, arch: ArchInfo) -> str | None:
    """Why the model cannot be split ``tp`` ways (None: it can)."""
    heads = arch.num_attention_heads or 0
    if heads and heads % tp:
        return f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp})"
    kv = arch.num_kv_heads or 0
    if kv and kv % tp and tp % kv:
        return (f"{kv} KV heads can be neither split nor replicated over tensor parallel size {tp} "
                f"(needs {kv} % {tp} == 0 or {tp} % {kv} == 0)")
    return None


def check_tp(tp: int | None, gpus: int, arch: ArchInfo | None) -> None:
    """Reject an impossible --tp with one usage line (exit 2), as the engine would refuse it."""
    if tp is None:
        return
    if tp < 1:
        raise UsageError(f"--tp must be at least 1 (got {tp})")
    why = tp_problem(tp, arch) if arch is not None else None
    if why and arch is not None:
        ok = [n for n in TP_SIZES if n <= max(gpus, 1) and tp_problem(n, arch) is None]
        raise UsageError(f"--tp {tp}: {why} (usable here: {', '.join(map(str, ok)) or '1'})")
    if tp > gpus:
        raise UsageError(f"--tp {tp} needs {tp} GPUs but the selection has {gpus}: pass --gpus {tp} or a smaller --tp")


def tp_candidates(gpus: int, arch: ArchInfo) -> list[int]:
    return [n for n in TP_SIZES if n <= gpus and tp_problem(n, arch) is None] or [1]


def cpu_layers(explanation: Explanation) -> tuple[str, ...]:
    """Layer classes the explained path runs on the CPU (FastLLM's INT4 TP fallback, CPU experts)."""
    return tuple(dict.fromkeys(d.layer_class for d in explanation.decisions if d.dequant == "cpu"))


def refusal(explanation: Explanation, kv_runs: bool = True) -> str:
    """Why the engine refuses or crashes on the explained path, in the engine's words ('' = it runs).
    ``kv_runs``: the KV dtype the plan recommends runs (the tuner replaced a default that does not)."""
    why: dict[str, list[str]] = {}
    for d in explanation.decisions:
        if d.runs or (d.layer_class == "attention_kv" and kv_runs):
            continue
        msg = d.error or "; ".join(d.reasons) or "no kernel"
        why.setdefault(msg, []).append(d.layer_class)
    if not why:
        return ""
    parts = [f"{', '.join(dict.fromkeys(layers))}: {msg}" for msg, layers in why.items()]
    return f"{explanation.engine} cannot run this path ({'; '.join(parts)}); `explain` shows why"


def cpu_reason(layers: tuple[str, ...], tp: int) -> str:
    return (f"{', '.join(layers)} run on the CPU at TP {tp}: the advisor has no host-memory bandwidth "
            "figure to cost them, and GPU figures would be wrong by orders of magnitude")


def fewest_gpus_that_fit(ctx, settings_at) -> tuple[int, bool] | None:
    """(TP size, holds the workload's context) of the smallest TP whose per-GPU memory holds the
    weights, or None when even 16 do not. ``settings_at(tp)`` gives the settings to try."""
    arch = ctx.checkpoint.arch
    for n in TP_SIZES:
        if tp_problem(n, arch) is not None:
            continue
        s = settings_at(n)
        if ctx.budget(s).pool_bytes.value > 0:
            return n, ctx.max_context(s, 1) > 0
    return None


def does_not_fit_note(ctx, settings_at) -> str:
    have = f"{ctx.gpus} x {ctx.vram_bytes / 2**30:.0f} GiB"
    hit = fewest_gpus_that_fit(ctx, settings_at)
    if hit is None:
        return f"the weights do not fit in {have}, nor split over up to {TP_SIZES[-1]} such GPUs"
    n, _ = hit
    if n <= ctx.gpus:
        return f"the weights do not fit in {have} at the TP sizes tried"
    return (f"the weights do not fit in {have}: they need at least {n} such GPUs "
            f"(--gpus {n}, TP {n})")
