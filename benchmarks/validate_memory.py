"""Our KV pool against the start-up figures engines printed in published logs (target: median error <= 10 %).

Each point of benchmarks/memory_logs/points.yaml names a checkpoint config, a GPU, the engine flags and
what the engine logged ("Available KV cache memory", "GPU KV cache size", SGLang's "KV Cache is
allocated. #tokens"). For every point this runs `plan` as a user would (same config, GPU, flags) and
compares: KV memory where the log gives it, else KV tokens. Nothing here is fitted to the points.

Usage: python benchmarks/validate_memory.py [--json] [--points FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET = 0.10
GIB = 2 ** 30


@dataclass(frozen=True)
class Row:
    id: str
    engine: str
    logged_version: str
    profile_version: str
    metric: str             # kv_gib | kv_tokens
    reported: float
    predicted: float
    weights_reported: float | None
    weights_predicted: float
    terms: dict
    link: str

    @property
    def error(self) -> float:
        return (self.predicted - self.reported) / self.reported


def _checkpoint(config: str):
    from advisor.checkpoint.inspect import inspect_checkpoint

    return inspect_checkpoint(config if config.startswith("demo:") else str(ROOT / "benchmarks" / "memory_logs"
                                                                            / "configs" / config))


def predict(point: dict) -> Row:
    from advisor.cost.engine_profile import available_versions, load_engine_memory
    from advisor.cost.overrides import Overrides
    from advisor.errors import UsageError
    from advisor.cost.plan import make_plan
    from advisor.cost.workload import get_workload
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain
    from advisor.kernel_path.options import InstallOptions

    f = point["flags"]
    ck = _checkpoint(point["config"])
    gpu = get_gpu(point["gpu"])
    gpus = int(point.get("gpus", 1))
    engine = point["engine"]
    try:
        eng = load_engine_memory(engine, point["engine_version"])
    except UsageError:
        # a log older than every profile: the oldest profile stands in (its version is shown in the table)
        eng = load_engine_memory(engine, available_versions(engine)[0])
    kv = f.get("kv_cache_dtype")
    ex = explain(ck, gpu, gpus=gpus, engine=engine, options=InstallOptions(kv_cache_dtype=kv, tp=f["tp"]))
    ov = Overrides(vram_gb=point.get("vram_gib"), memory_share=f["memory_share"], max_batch=f["max_batch"],
                   chunked_prefill=f["chunked_prefill"], tp=f["tp"], kv_cache_dtype=kv,
                   cuda_graphs=f["cuda_graphs"], draft_tokens=f.get("draft_tokens", 0))
    plan = make_plan(ck, ex, gpu, gpus=gpus, workload=get_workload("interactive"), overrides=ov, engine_memory=eng)
    rep = point["reported"]
    pool = plan.derivations["kv_pool_bytes"]
    if "kv_gib" in rep:
        metric, reported, predicted = "kv_gib", float(rep["kv_gib"]), pool.value / GIB
    else:
        metric, reported = "kv_tokens", float(rep["kv_tokens"])
        predicted = float(plan.predictions.kv_pool_tokens.get(plan.recommendation.kv_cache_dtype, 0))
    terms = {k.removeprefix("memory."): round(d.value / GIB, 3) for k, d in plan.derivations.items()
             if k.startswith("memory.") and d.unit == "B"}
    return Row(point["id"], engine, point["engine_version"], eng.profile_version, metric, reported, predicted,
               rep.get("weights_gib"), terms.get("weights", 0.0), terms, point["link"])


def load_points(path: Path) -> list[dict]:
    from advisor.yamlio import load_yaml_file

    data = load_yaml_file(path, "memory validation points")
    return list(data["points"])


def markdown(rows: list[Row]) -> str:
    out = ["| point | engine (log / profile) | metric | logged | predicted | error "
           "| weights logged / predicted (GiB) |",
           "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        fmt = "{:,.0f}" if r.metric == "kv_tokens" else "{:.2f}"
        logged = f"{r.weights_reported:.2f}" if r.weights_reported else "-"
        w = f"{logged} / {r.weights_predicted:.2f}"
        out.append(f"| [{r.id}]({r.link}) | {r.engine} {r.logged_version} / {r.profile_version} | {r.metric} | "
                   f"{fmt.format(r.reported)} | {fmt.format(r.predicted)} | {r.error:+.1%} | {w} |")
    med = statistics.median(abs(r.error) for r in rows)
    out.append("")
    out.append(f"median |error| {med:.1%} over {len(rows)} points (target <= {TARGET:.0%}: "
               f"{'met' if med <= TARGET else 'missed'})")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=Path, default=ROOT / "benchmarks" / "memory_logs" / "points.yaml")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="for CI (benchmarks cannot rot): the same run, already quick and without a gate")
    args = ap.parse_args()
    rows = [predict(p) for p in load_points(args.points)]
    med = statistics.median(abs(r.error) for r in rows)
    if args.json:
        print(json.dumps({"median_abs_error": med, "target": TARGET,
                          "points": [{**r.__dict__, "error": r.error} for r in rows]}, indent=1))
    else:
        print(markdown(rows))
        for r in rows:
            print(f"  {r.id}: " + ", ".join(f"{k} {v:g}" for k, v in r.terms.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
