"""What SGLang 0.5.23 itself chose for every corpus config, GPU and install, cached in a committed file.

The engine side (SGLang's own selection chain, run by sglang_probe.py inside .venv-sglang) costs about a
minute per process to import, so its answers are kept in ``sglang_results.json``: one row per (config, GPU,
install). A row is valid while its key holds: the SGLang version, the hash of the config files, the GPU and
install, and the hash of the harness (sglang_probe.py, sglang_stubs.py and .ci/venv-sglang.sh, which pins
what is installed), and while it holds every layer the advisor's view of the checkpoint asks about (a
checkpoint whose module names change asks for new prefixes). The advisor side (``explain``) is cheap and is
compared against every row on every run (test_sglang_conformance.py).

Refresh (after changing the harness or the venv, or to add many configs at once):

    bash .ci/venv-sglang.sh                                             # first, if .venv-sglang is missing
    .venv/bin/python tests/conformance/sglang/sglang_cache.py status    # how many rows are stale or missing
    .venv/bin/python tests/conformance/sglang/sglang_cache.py refresh   # stale and missing rows only
    .venv/bin/python tests/conformance/sglang/sglang_cache.py refresh --all

A full refresh is 2 installs x 10 GPUs processes (about an hour on 2 busy cores). Runs in the main venv
(it needs the advisor's inspector and GPU table), never inside .venv-sglang.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CACHE_FILE = HERE / "sglang_results.json"
VENV_SCRIPT = ROOT / ".ci" / "venv-sglang.sh"
HARNESS_FILES = (HERE / "sglang_probe.py", HERE / "sglang_stubs.py", VENV_SCRIPT)
VENV_PYTHON = Path(os.environ.get("NVFP4_ADVISOR_SGLANG_PYTHON", ROOT / ".venv-sglang" / "bin" / "python"))
ENGINE_VERSION = "0.5.23"          # what .ci/venv-sglang.sh installs; the rule file it checks: sglang-0.5.23.yaml
CORPUS_CODE = ROOT / "tests" / "checkpoint"          # corpus_files.py: the labelled corpus and its manifest
sys.path.insert(0, str(CORPUS_CODE))
from corpus_files import ConfigFiles as Config, conformance_configs  # noqa: E402

# One GPU per compute capability from sm_75 to sm_121, from the advisor's GPU table.
GPU_IDS = {75: "t4", 80: "a100-80gb-sxm", 86: "rtx-3090", 89: "l40s", 90: "h100-sxm", 100: "b200", 103: "b300",
           110: "jetson-agx-thor", 120: "rtx-5090", 121: "dgx-spark-gb10"}
# Installs: SGLang's real one (flashinfer-python and sgl-deep-gemm are hard dependencies) and one without
# both (a trimmed install, or a platform where neither loads).
MODES = ("default", "no-flashinfer-deepgemm")
# Dense roles whose model code passes the quant config to the layer (routers, vision towers and MTP heads
# are built by each model file, often with quant_config=None: not comparable with a bare layer).
DENSE_ROLES = ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down", "shared_expert", "gdn_in_proj", "gdn_out_proj")


def corpus() -> list[Config]:
    """The corpus configs and demos (tests/checkpoint/corpus_files.py): new entries join by themselves."""
    return conformance_configs()


def harness_digest() -> str:
    h = hashlib.sha256()
    for p in HARNESS_FILES:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def row_key(config: str, sm: int, mode: str) -> str:
    return f"{config}|sm_{sm}|{mode}"


# ---------------------------------------------------------------- which layers to build

def layer_specs(checkpoint) -> list[dict]:
    """The layers to build in SGLang for CHECKPOINT (an advisor CheckpointInfo): one per (role, scheme)
    among the dense roles, and the experts of the first MoE layer per scheme. Prefixes are the checkpoint's
    own module names with a layer index that holds that module."""
    specs: dict[str, dict] = {}
    moe = checkpoint.arch.moe
    quantized = checkpoint.producer not in ("none", "unknown")
    for m in checkpoint.modules:
        if m.shape is None or "*" not in m.name:
            continue
        if quantized and m.scheme in ("BF16", "FP16"):
            continue   # 16-bit modules of a quantized model: each model file decides (often quant_config=None)
        layer = m.layers[0] if m.layers else 0
        if m.role in DENSE_ROLES:
            prefix = m.name.replace("*", str(layer), 1)
            key = f"dense|{m.role}|{m.scheme}"
            if key not in specs:
                specs[key] = {"kind": "dense", "prefix": prefix, "module": m.name, "scheme": m.scheme,
                              "n": m.shape[0], "k": m.shape[1]}
        elif m.role == "expert" and moe is not None and ".experts" in m.name:
            base = m.name[: m.name.index(".experts") + len(".experts")]
            key = f"moe|{m.scheme}"
            # the experts' (hidden, intermediate) come from down_proj: N = hidden, K = intermediate
            if key not in specs or m.name.endswith("down_proj"):
                n, k = m.shape if m.name.endswith("down_proj") else (m.shape[1], m.shape[0])
                specs[key] = {"kind": "moe", "prefix": base.replace("*", str(layer), 1), "module": m.name,
                              "scheme": m.scheme, "n": k, "k": n, "num_experts": moe.num_experts, "top_k": moe.top_k}
    return [specs[k] for k in sorted(specs)]


def wanted_layers(checkpoint) -> list[str]:
    return [s["prefix"] for s in layer_specs(checkpoint)]


# ---------------------------------------------------------------- cache file

def load() -> dict:
    if not CACHE_FILE.exists():
        return {"engine": "sglang", "rows": {}}
    return json.loads(CACHE_FILE.read_text())


def save(cache: dict) -> None:
    rows = dict(sorted(cache["rows"].items()))
    # one row per line: reviewable diffs
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in rows.items())
    CACHE_FILE.write_text('{"engine": "sglang", "rows": {\n' + body + "\n}}\n")


def is_stale(row: dict | None, config: Config, layers: list[str]) -> bool:
    if row is None:
        return True
    built = {lay.get("prefix") for lay in (row.get("result") or {}).get("layers", [])}
    refused = (row.get("result") or {}).get("stage") is not None
    return (row.get("config_hash") != config.digest or row.get("harness") != harness_digest()
            or row.get("sglang") != ENGINE_VERSION or (not refused and not set(layers) <= built))


def stale_keys(cache: dict, configs: list[Config], layers: dict[str, list[str]]) -> list[str]:
    """Rows that are missing or whose key no longer holds (config, harness, SGLang version, layer set)."""
    return [row_key(c.name, sm, mode) for c in configs for sm in GPU_IDS for mode in MODES
            if is_stale(cache["rows"].get(row_key(c.name, sm, mode)), c, layers[c.name])]


def gpu_facts(sm: int) -> tuple[str, float]:
    from advisor.gpu_table import get_gpu

    g = get_gpu(GPU_IDS[sm])
    return g.name, float(g.memory_gb or 80)


def checkpoints(configs: list[Config], folder: Path) -> dict:
    """name -> (materialized folder, CheckpointInfo) through the advisor's own inspector."""
    from advisor.checkpoint.inspect import inspect_checkpoint

    out = {}
    for c in configs:
        d = c.materialize(folder)
        try:
            out[c.name] = (d, inspect_checkpoint(str(d)))
        except Exception:  # noqa: BLE001 - the advisor cannot read it: SGLang still answers the model level
            out[c.name] = (d, None)
    return out


def run(keys: list[str], configs: list[Config], *, parallel: int = 2, log=print, on_rows=None) -> dict[str, dict]:
    """Run SGLang's selection for KEYS (one process per GPU and install); rows by key. ON_ROWS receives
    each process's rows as they come (a long refresh keeps what finished)."""
    if not keys:
        return {}
    if not VENV_PYTHON.exists():
        raise RuntimeError(f"{VENV_PYTHON} is missing: run bash .ci/venv-sglang.sh first")
    by_name = {c.name: c for c in configs}
    groups: dict[tuple[int, str], list[str]] = {}
    for k in keys:
        name, sm, mode = k.split("|")
        groups.setdefault((int(sm[3:]), mode), []).append(name)
    harness = harness_digest()
    with tempfile.TemporaryDirectory(prefix="sglang-conformance-") as tmp:
        tmp = Path(tmp)
        needed = sorted({n for names in groups.values() for n in names})
        cks = checkpoints([by_name[n] for n in needed], tmp / "ck")

        def one(group):
            (sm, mode), names = group
            jobs = [{"key": n, "model_path": str(cks[n][0]),
                     "layers": layer_specs(cks[n][1]) if cks[n][1] is not None else []} for n in names]
            gpu_name, mem = gpu_facts(sm)
            cmd = [str(VENV_PYTHON), str(HERE / "sglang_probe.py"), "--sm", str(sm), "--name", gpu_name,
                   "--memory-gb", str(mem)]
            if mode != "default":
                cmd += ["--no-flashinfer", "--no-deepgemm"]
            errlog = tmp / f"sm{sm}-{mode}.log"
            with open(errlog, "w") as err:
                proc = subprocess.run(cmd, input=json.dumps(jobs), stdout=subprocess.PIPE, stderr=err, text=True,
                                      cwd=tmp, env={**os.environ, "PYTHONNOUSERSITE": "1"})
            results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            if proc.returncode != 0 or len(results) != len(jobs):
                raise RuntimeError(f"the SGLang harness failed for sm_{sm} {mode} (exit {proc.returncode}):\n"
                                   + errlog.read_text()[-4000:])
            log(f"  sm_{sm} {mode}: {len(results)} configs")
            rows = {row_key(r["key"], sm, mode): {
                "sglang": ENGINE_VERSION, "harness": harness, "config_hash": by_name[r["key"]].digest,
                "result": {k: v for k, v in r.items() if k not in ("key", "sm", "trace")}} for r in results}
            if on_rows is not None:
                with lock:
                    on_rows(rows)
            return rows

        out: dict[str, dict] = {}
        lock = threading.Lock()
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            for rows in pool.map(one, sorted(groups.items())):
                out.update(rows)
        return out


def layers_by_config(configs: list[Config]) -> dict[str, list[str]]:
    with tempfile.TemporaryDirectory(prefix="sglang-layers-") as tmp:
        cks = checkpoints(configs, Path(tmp))
        return {n: (wanted_layers(ck) if ck is not None else []) for n, (_, ck) in cks.items()}


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="sglang_cache.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("refresh", help="re-run SGLang for stale/missing rows (or --all) and rewrite the cache")
    r.add_argument("--all", action="store_true")
    r.add_argument("--parallel", type=int, default=2)
    r.add_argument("--only", default="", help="comma-separated config names")
    r.add_argument("--sm", default="", help="comma-separated compute capabilities (e.g. 86,120)")
    sub.add_parser("status", help="how many rows are stale or missing")
    args = ap.parse_args(argv)
    configs = corpus()
    cache = load()
    layers = layers_by_config(configs)
    if args.cmd == "status":
        print(f"{len(stale_keys(cache, configs, layers))} stale or missing of "
              f"{len(configs) * len(GPU_IDS) * len(MODES)}")
        return 0
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in configs if c.name in wanted]
    sms = {int(s) for s in args.sm.split(",") if s} or set(GPU_IDS)
    keys = ([row_key(c.name, sm, m) for c in configs for sm in GPU_IDS for m in MODES] if args.all
            else stale_keys(cache, configs, layers))
    keys = [k for k in keys if int(k.split("|")[1][3:]) in sms]
    print(f"running SGLang for {len(keys)} rows ...", flush=True)

    def keep(rows):
        cache["rows"].update(rows)
        save(cache)

    run(keys, configs, parallel=args.parallel, on_rows=keep)
    known = {row_key(c.name, sm, m) for c in corpus() for sm in GPU_IDS for m in MODES}
    cache["rows"] = {k: v for k, v in cache["rows"].items() if k in known}   # configs removed from the corpus
    save(cache)
    print(f"wrote {CACHE_FILE.relative_to(ROOT)} ({len(cache['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
