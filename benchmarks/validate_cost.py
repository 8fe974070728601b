"""Compare `plan` with published end-to-end measurements (benchmarks/validation_points.yaml).

Every point is a measurement someone published (link + exact quote + conditions); `plan` is run
through the Python API on a config-only checkpoint of the same model (benchmarks/validation_configs/
or a bundled demo). Prints case, measured, predicted and error, the median absolute error on the
absolute figures and on the ratios between points of one source (FP8 vs NVFP4, TP 1 vs 2, ...),
and every point off by more than 25 %. Nothing is fitted to these points: a miss is a finding about
the model, written up with its mechanism in benchmarks/README.md.

Like with like: `plan` predicts with the newest engine rules (e.g. vLLM 0.33). A point whose source
shows that its engine ran another kernel path for the layers that dominate (an older version's log,
a patched build, another checkpoint) carries `set_apart: <why>`; it is still predicted and shown, but
kept out of the headline medians (and so is every ratio it is part of). The medians over all points
are printed too.

Serving conditions: where the source states how its server ran, the point says so and `plan` is run
under the same flags instead of tuning them (FLAGS below: memory share, max running requests, CUDA
graphs on/off, chunked-prefill size, speculation off, NVLink or PCIe only, KV-cache dtype). Where the
source is silent the engine ran its defaults, not plan's recommendation, so those are pinned too: the
chunked-prefill size of the engine's batch-default tier for the card, CUDA graphs as the engine's
default, the engine's KV dtype, max running requests = the concurrency; only the memory share is left to
plan (the engine default, raised only where the workload would not fit at it).

Kernels the measured version ran by default: where the source's engine version defaults to another kernel
than the rules plan encodes, and the newest rules reach that same kernel through an engine flag, the point
pins it (any flag of that engine's rule file, `flags:` in profiles/engines/*.yaml: vLLM's `moe_backend`,
SGLang's `moe_runner_backend`, ...) and says why from the older version's source (`<flag>_why`): plan then
costs the kernel the measurement ran instead of being set apart.

Usage: python benchmarks/validate_cost.py [--points FILE] [--markdown] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POINTS = ROOT / "benchmarks" / "validation_points.yaml"
CONFIGS = ROOT / "benchmarks" / "validation_configs"
METRICS = ("decode_tok_s", "request_output_tok_s", "aggregate_output_tok_s", "prefill_tok_s")
OUTLIER = 0.25
# optional serving conditions a point may state: field -> (Overrides field, type, what the source's flag is)
FLAGS = {
    "memory_share": ("memory_share", float, "--gpu-memory-utilization / --mem-fraction-static (0 < x <= 1)"),
    "max_num_seqs": ("max_batch", int, "--max-num-seqs / --max-running-requests (default: the concurrency)"),
    "cuda_graphs": ("cuda_graphs", bool, "false for --enforce-eager / --disable-cuda-graph"),
    "async_scheduling": ("host_overlap", bool, "false: each step waits for its host work (vLLM before 0.14, "
                         "--no-async-scheduling; SGLang --disable-overlap-schedule)"),
    "chunked_prefill": ("chunked_prefill", int, "--max-num-batched-tokens / --chunked-prefill-size"),
    "draft_tokens": ("draft_tokens", int, "0: speculative decoding off"),
    "nvlink": ("nvlink", bool, "the GPUs are NVLink-bridged (false: PCIe only)"),
    "kv_cache_dtype": ("kv_cache_dtype", str, "--kv-cache-dtype (default: auto, the engine's default)"),
}


def kernel_flags() -> dict[str, dict[str, str]]:
    """The engine flags a point may pin (kernels the measured engine version ran by default, reached through
    the newest rules' flag): flag name -> {engine: its CLI spelling}, from each engine's rule file (`flags:`),
    the table explain checks install flags against. A pin needs `<flag>_why` (the older version's source
    lines); a flag of another engine than the point's would reach no rule, so the loader refuses it."""
    from advisor.kernel_path.rule_files import load_rules
    from advisor.kernel_path.rule_versions import ENGINES

    out: dict[str, dict[str, str]] = {}
    for engine in ENGINES:
        for name, spec in load_rules(engine)[0].flags.items():
            out.setdefault(name, {})[engine] = spec.cli
    return out


REQUIRED = ("id", "url", "quote", "gpu", "engine", "model", "config", "tp", "concurrency", "input_tokens",
            "output_tokens", "metric", "measured")


@dataclass(frozen=True)
class Result:
    point: dict
    predicted: float | None
    note: str = ""

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.point["measured"] - 1

    @property
    def like_for_like(self) -> bool:
        """The measured engine ran the kernel path `plan` costs (no `set_apart` reason)."""
        return not self.point.get("set_apart")


def load_points(path: Path) -> list[dict]:
    from advisor.errors import BadInput
    from advisor.yamlio import load_yaml_file

    data = load_yaml_file(path, "validation points file")
    points = data.get("points") if isinstance(data, dict) else None
    if not isinstance(points, list) or not points:
        raise BadInput("expected a top-level 'points:' list", path=str(path))
    ids = set()
    flags = kernel_flags()
    for p in points:
        missing = [k for k in REQUIRED if k not in p] if isinstance(p, dict) else list(REQUIRED)
        if missing:
            raise BadInput(f"point {p.get('id', '?') if isinstance(p, dict) else p!r}: missing {', '.join(missing)}",
                           path=str(path))
        if p["metric"] not in METRICS:
            raise BadInput(f"point {p['id']}: metric must be one of {', '.join(METRICS)}", path=str(path))
        for name, (_, kind, what) in FLAGS.items():
            if name in p and not _flag_ok(p[name], kind):
                raise BadInput(f"point {p['id']}: {name} must be {kind.__name__} ({what}), got {p[name]!r}",
                               path=str(path))
        for name, owners in flags.items():
            if name not in p:
                continue
            what = ", ".join(f"{e} {cli}" for e, cli in owners.items())
            if not _flag_ok(p[name], str):
                raise BadInput(f"point {p['id']}: {name} must be str ({what}), got {p[name]!r}", path=str(path))
            if not (isinstance(p.get(f"{name}_why"), str) and p[f"{name}_why"].strip()):
                raise BadInput(f"point {p['id']}: {name} needs {name}_why (the measured version's source lines)",
                               path=str(path))
            if p["engine"] not in owners:
                raise BadInput(f"point {p['id']}: {name} is {' and '.join(owners)}'s flag ({what}); this point's "
                               f"engine is {p['engine']}", path=str(path))
        # an older engine's default (vLLM before 0.14: no async scheduling) is pinned with its source, as kernels are
        if "async_scheduling" in p and not (isinstance(p.get("async_scheduling_why"), str)
                                            and p["async_scheduling_why"].strip()):
            raise BadInput(f"point {p['id']}: async_scheduling needs async_scheduling_why (the measured version's "
                           "source lines)", path=str(path))
        if "set_apart" in p and not (isinstance(p["set_apart"], str) and p["set_apart"].strip()):
            raise BadInput(f"point {p['id']}: set_apart must say why (a sentence)", path=str(path))
        ids.add(p["id"])
    for p in points:
        if p.get("ratio_to") and p["ratio_to"] not in ids:
            raise BadInput(f"point {p['id']}: ratio_to {p['ratio_to']!r} is not a point", path=str(path))
    return points


def _flag_ok(value, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is str:
        return isinstance(value, str) and bool(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        return False
    if kind is float:
        return 0 < value <= 1
    return value >= 0


def engine_defaults(p: dict) -> dict:
    """What the point's engine runs when the source sets nothing (Overrides fields): its chunked-prefill
    size for the card's memory (the engine profile's batch-default tier) and its CUDA-graph default."""
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.gpu_table import get_gpu

    eng, gpu = load_engine_memory(p["engine"], None), get_gpu(p["gpu"])
    tier = eng.batch_default(float(gpu.memory_gb or 0), gpu.id)
    return {"chunked_prefill": int(tier["chunked_prefill"]), "cuda_graphs": eng.cuda_graphs_default}


def serving_overrides(p: dict, defaults: dict | None = None):
    """The Overrides `plan` runs the point under: TP, the workload's prompt, every serving condition the
    source stated (FLAGS), and for the rest the engine's defaults (``defaults``, see engine_defaults; the
    max batch is the concurrency, the KV cache the engine's default) so the tuner cannot pick others."""
    from advisor.cost.overrides import Overrides

    conc, n_in = int(p["concurrency"]), int(p["input_tokens"])
    fixed: dict = {"tp": int(p["tp"]), "max_batch": conc, "prompt_tokens": n_in, "kv_cache_dtype": "auto",
                   **(defaults or {})}
    for name, (field, kind, _) in FLAGS.items():
        if name in p:
            fixed[field] = kind(p[name])
    return Overrides(**fixed)


def install_options(p: dict, overrides):
    """The engine flags `plan` explains the kernel path under: the kernels the point pins (kernel_flags()),
    else None (plan's own default: the install as shipped, the overrides' KV dtype and TP)."""
    from advisor.kernel_path.options import InstallOptions

    flags = tuple((name, str(p[name])) for name in kernel_flags() if name in p)
    if not flags:
        return None
    return InstallOptions(kv_cache_dtype=overrides.kv_cache_dtype, tp=overrides.tp, flags=flags)


def checkpoint_path(config: str) -> str:
    return config if config.startswith("demo:") else str(CONFIGS / config)


def predict(p: dict) -> Result:
    """The figure `plan` gives for the point's metric under its conditions."""
    from advisor.services.analysis import explain_and_plan
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.cost.workload import Workload
    from advisor.gpu_table import get_gpu

    conc, n_in, n_out = int(p["concurrency"]), int(p["input_tokens"]), int(p["output_tokens"])
    workload = Workload("validation", p["id"], conc, n_in, n_out, n_in + n_out,
                        "latency" if conc == 1 else "throughput")
    overrides = serving_overrides(p, engine_defaults(p))
    checkpoint = inspect_checkpoint(checkpoint_path(p["config"]))
    _, plan = explain_and_plan(checkpoint, get_gpu(p["gpu"]), gpus=int(p["tp"]), engine=p["engine"],
                               workload=workload, overrides=overrides, options=install_options(p, overrides))
    pr = plan.predictions
    metric = p["metric"]
    if metric == "decode_tok_s":
        return Result(p, pr.decode_tok_s, pr.na.get("decode_tok_s", ""))
    if metric == "prefill_tok_s":
        return Result(p, pr.prefill_tok_s, pr.na.get("prefill_tok_s", ""))
    if metric == "request_output_tok_s":
        if pr.decode_tok_s is None or pr.serving is None:
            return Result(p, None, "decode or prefill is N/A")
        return Result(p, n_out / (pr.serving.ttft_isolated_s + (n_out - 1) / pr.decode_tok_s))
    # all streams' output over the whole run: decode steps plus every request's prefill mixed into them
    if pr.serving is None:
        return Result(p, None, pr.na.get("serving", "no served figure"))
    b = pr.serving.concurrency
    return Result(p, pr.serving.output_tok_s, "" if b == conc else f"the pool holds {b} streams")


def ratios(results: list[Result]) -> list[tuple[Result, Result, float, float | None]]:
    by_id = {r.point["id"]: r for r in results}
    out = []
    for r in results:
        base = by_id.get(r.point.get("ratio_to") or "")
        if base is None:
            continue
        measured = r.point["measured"] / base.point["measured"]
        predicted = (r.predicted / base.predicted) if r.predicted and base.predicted else None
        out.append((r, base, measured, predicted))
    return out


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{x * 100:+.0f} %"


def _num(x: float | None) -> str:
    return "N/A" if x is None else f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def _median_line(what: str, errs: list[float], unit: str) -> str:
    if not errs:
        return f"no {what} could be predicted"
    return f"median |error|, {what}: {_pct(statistics.median(errs)).lstrip('+')} over {len(errs)} {unit}"


def report(results: list[Result], markdown: bool) -> str:
    rows = [("case", "GPU x TP", "engine (measured)", "metric", "measured", "predicted", "error")]
    for r in results:
        p = r.point
        rows.append((p["id"] + ("" if r.like_for_like else " (set apart)"), f"{p['gpu']} x{p['tp']}",
                     f"{p['engine']} {p.get('engine_version', '')}".strip(),
                     p["metric"], _num(p["measured"]), _num(r.predicted), _pct(r.error)))
    like = [abs(r.error) for r in results if r.error is not None and r.like_for_like]
    every = [abs(r.error) for r in results if r.error is not None]
    rat = ratios(results)
    rat_like = [abs(pr / m - 1) for r, b, m, pr in rat if pr is not None and r.like_for_like and b.like_for_like]
    rat_every = [abs(pr / m - 1) for _, _, m, pr in rat if pr is not None]
    lines = [_table(rows, markdown), ""]
    lines.append(_median_line("absolute figures, like with like", like, "points"))
    lines.append(_median_line("absolute figures, every point", every, "points"))
    rrows = [("ratio", "measured", "predicted", "error")]
    for r, base, m, pr in rat:
        apart = "" if r.like_for_like and base.like_for_like else " (set apart)"
        rrows.append((f"{r.point['id']} / {base.point['id']}{apart}", f"{m:.3f}",
                      "N/A" if pr is None else f"{pr:.3f}", _pct(None if pr is None else pr / m - 1)))
    lines += ["", _table(rrows, markdown), ""]
    lines.append(_median_line("ratios, like with like", rat_like, "pairs"))
    lines.append(_median_line("ratios, every pair", rat_every, "pairs"))
    over = [r for r in results if r.error is not None and abs(r.error) > OUTLIER]
    lines += ["", f"points off by more than {OUTLIER:.0%}: " + (", ".join(
        f"{r.point['id']} ({_pct(r.error)}{'' if r.like_for_like else ', set apart'})" for r in over) or "none")]
    apart = [r for r in results if not r.like_for_like]
    if apart:
        lines += ["", "set apart (another kernel path than the one plan costs):"]
        lines += [f"- {r.point['id']}: {' '.join(r.point['set_apart'].split())}" for r in apart]
    unknown = [r for r in results if r.predicted is None]
    if unknown:
        lines.append("not predicted: " + ", ".join(f"{r.point['id']} ({r.note})" for r in unknown))
    return "\n".join(lines)


def _table(rows: list[tuple], markdown: bool) -> str:
    if markdown:
        head, *body = rows
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(str(c) for c in row) + " |" for row in body])
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default=str(POINTS), help="validation points YAML (default: %(default)s)")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables (for benchmarks/README.md)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--smoke", action="store_true",
                    help="for CI (benchmarks cannot rot): the same run, already quick and without a gate")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from advisor.errors import AdvisorError

    try:
        results = [predict(p) for p in load_points(Path(args.points))]
    except AdvisorError as err:
        print(f"validate_cost: {err}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps([{"id": r.point["id"], "measured": r.point["measured"], "predicted": r.predicted,
                           "error": r.error, "note": r.note, "set_apart": r.point.get("set_apart")}
                          for r in results], indent=2))
    else:
        print(report(results, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
