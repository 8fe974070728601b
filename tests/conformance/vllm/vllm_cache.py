"""What vLLM itself chose for every corpus config, GPU and install, cached in a committed file.

The engine side (vLLM's own selection code, run by harness/vllm_probe.py inside .venv-vllm) is slow to start
(one process per GPU and install), so its answers are kept in ``vllm_results.json``, one row per
(config, GPU, install). A row is valid while its key holds: the vLLM version, the hash of the config files,
the GPU and install, and the hash of the harness (its code and .ci/venv-vllm.sh, which pins what is
installed). The advisor side (``explain``) is cheap and is compared against every row on every run.

Refresh (after changing the harness or the venv pins, or to add many configs at once):

    python3 tests/conformance/vllm/vllm_cache.py refresh            # stale and missing rows only
    python3 tests/conformance/vllm/vllm_cache.py refresh --all      # every row
    bash .ci/venv-vllm.sh                                            # first, if .venv-vllm is missing

This module runs in the main venv (it needs the advisor's GPU table), never inside .venv-vllm.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CACHE_FILE = HERE / "vllm_results.json"
HARNESS = HERE / "harness"
VENV_SCRIPT = ROOT / ".ci" / "venv-vllm.sh"
VENV_PYTHON = Path(os.environ.get("NVFP4_ADVISOR_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
# the vLLM release .ci/venv-vllm.sh installs; the rule file it checks is the matching vllm-X.Y.yaml
ENGINE_VERSION = re.search(r"\bvllm==([0-9.]+)", VENV_SCRIPT.read_text()).group(1)
sys.path.insert(0, str(ROOT / "tests" / "checkpoint"))
from corpus_files import ConfigFiles as Config, conformance_configs  # noqa: E402  (real configs from PyPI, verified)


# One GPU per compute capability the issue names, from the advisor's GPU table.
GPU_IDS = {75: "t4", 80: "a100-80gb-sxm", 86: "rtx-3090", 89: "l40s", 90: "h100-sxm", 100: "b200", 120: "rtx-5090"}
# Installs: vLLM's pip dependencies with FlashInfer usable (flashinfer-cubin or nvcc + ninja), and without
# FlashInfer (which also removes the b12x package its wheel ships).
MODES = ("flashinfer", "no-flashinfer")


def corpus() -> list[Config]:
    """The corpus configs and demos (tests/checkpoint/corpus_files.py): new entries join by themselves."""
    return conformance_configs()


def venv_stamp() -> str:
    """The stamp .ci/venv-vllm.sh writes last into a finished venv: sha1 of the script and its pins."""
    script = VENV_SCRIPT.read_text()
    block = re.search(r"^PINS=\((.*?)^\)", script, re.S | re.M).group(1)
    pins = [w for line in block.splitlines() for w in line.split("#", 1)[0].split()]
    return hashlib.sha1((script + " ".join(pins) + "\n").encode()).hexdigest()[:12]


def venv_problem() -> str | None:
    """Why .venv-vllm cannot be trusted to run vLLM (None: it is the finished build of the current script).
    A venv named by NVFP4_ADVISOR_VLLM_PYTHON is the caller's own and is not checked."""
    if "NVFP4_ADVISOR_VLLM_PYTHON" in os.environ:
        return None
    stamp = VENV_PYTHON.parents[1] / ".stamp"
    if not stamp.exists():
        return f"{stamp.parent} has no .stamp: its build did not finish"
    if stamp.read_text().strip() != venv_stamp():
        return f"{stamp.parent} was built from another version of .ci/venv-vllm.sh"
    return None


def harness_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(HARNESS.glob("*.py")) + [VENV_SCRIPT]:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def row_key(config: str, sm: int, mode: str) -> str:
    return f"{config}|sm_{sm}|{mode}"


def load() -> dict:
    if not CACHE_FILE.exists():
        return {"engine": "vllm", "rows": {}}
    return json.loads(CACHE_FILE.read_text())


def save(cache: dict) -> None:
    rows = dict(sorted(cache["rows"].items()))
    # one row per line: reviewable diffs
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in rows.items())
    CACHE_FILE.write_text('{"engine": "vllm", "rows": {\n' + body + "\n}}\n")


def stale_keys(cache: dict, configs: list[Config]) -> list[str]:
    """Rows that are missing or whose key no longer holds (config, harness or vLLM version changed)."""
    harness = harness_digest()
    out = []
    for c in configs:
        digest = c.digest
        for sm in GPU_IDS:
            for mode in MODES:
                row = cache["rows"].get(row_key(c.name, sm, mode))
                if (row is None or row.get("config_hash") != digest or row.get("harness") != harness
                        or row.get("vllm") != ENGINE_VERSION):
                    out.append(row_key(c.name, sm, mode))
    return out


def gpu_facts(sm: int) -> tuple[str, float]:
    from advisor.gpu_table import get_gpu

    g = get_gpu(GPU_IDS[sm])
    return g.name, float(g.memory_gb or 80) * 1e9 / (1 << 30)


def run(keys: list[str], configs: list[Config], *, parallel: int = 2) -> dict[str, dict]:
    """Run vLLM's selection for KEYS (grouped into one process per GPU and install); rows by key."""
    if not keys:
        return {}
    if not VENV_PYTHON.exists():
        raise RuntimeError(f"{VENV_PYTHON} is missing: run bash .ci/venv-vllm.sh first")
    if (problem := venv_problem()) is not None:
        raise RuntimeError(f"{problem}: run bash .ci/venv-vllm.sh first")
    by_name = {c.name: c for c in configs}
    groups: dict[tuple[int, str], list[str]] = {}
    for k in keys:
        name, sm, mode = k.split("|")
        groups.setdefault((int(sm[3:]), mode), []).append(name)
    harness = harness_digest()
    with tempfile.TemporaryDirectory(prefix="vllm-conformance-") as tmp:
        tmp = Path(tmp)
        folders = {n: c.materialize(tmp / "ck") for n, c in by_name.items()
                   if any(n in names for names in groups.values())}
        jobs = []
        for (sm, mode), names in sorted(groups.items()):
            name, mem = gpu_facts(sm)
            jobs.append({"sm": sm, "name": name, "memory": mem, "flashinfer": mode == "flashinfer",
                         "folders": [str(folders[n]) for n in names], "out": str(tmp / f"sm{sm}-{mode}.json")})
        (tmp / "jobs.json").write_text(json.dumps(jobs))
        log = tmp / "harness.log"
        with open(log, "w") as fh:
            proc = subprocess.run([str(VENV_PYTHON), str(HARNESS / "vllm_probe.py"), str(tmp / "jobs.json"),
                                   "--parallel", str(parallel)], stdout=fh, stderr=subprocess.STDOUT,
                                  cwd=tmp, env={**os.environ, "PYTHONNOUSERSITE": "1"})
        if proc.returncode != 0:
            tail = log.read_text()[-4000:]
            raise RuntimeError(f"the vLLM harness failed (exit {proc.returncode}):\n{tail}")
        return rows_from_jobs(jobs, by_name, harness, tmp / "ck")


def rows_from_jobs(jobs: list[dict], by_name: dict, harness: str, checkpoints: Path) -> dict[str, dict]:
    """Cache rows from the harness's job outputs."""
    out = {}
    for job in jobs:
        res = json.loads(Path(job["out"]).read_text())
        if res.get("foreign_platform_modules"):
            raise RuntimeError(f"vLLM modules kept another platform: {res['foreign_platform_modules']}")
        mode = "flashinfer" if job["flashinfer"] else "no-flashinfer"
        for name, r in res["configs"].items():
            # the run's temporary folder never reaches the cache (messages quote the config path)
            r = json.loads(json.dumps({k: v for k, v in r.items() if k != "seconds"})
                           .replace(str(checkpoints), "<checkpoints>"))
            out[row_key(name, job["sm"], mode)] = {
                "vllm": res["vllm_version"], "harness": harness, "config_hash": by_name[name].digest,
                "install": res["install"], "result": r}
    return out


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="vllm_cache.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("refresh", help="re-run vLLM for stale/missing rows (or --all) and rewrite the cache")
    r.add_argument("--all", action="store_true")
    r.add_argument("--parallel", type=int, default=2)
    r.add_argument("--only", default="", help="comma-separated config names")
    sub.add_parser("status", help="how many rows are stale or missing")
    args = ap.parse_args(argv)
    configs = corpus()
    cache = load()
    if args.cmd == "status":
        print(f"{len(stale_keys(cache, configs))} stale or missing of {len(configs) * len(GPU_IDS) * len(MODES)}")
        return 0
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in configs if c.name in wanted]
    keys = ([row_key(c.name, sm, m) for c in configs for sm in GPU_IDS for m in MODES] if args.all
            else stale_keys(cache, configs))
    print(f"running vLLM for {len(keys)} rows ...", flush=True)
    cache["rows"].update(run(keys, configs, parallel=args.parallel))
    known = {row_key(c.name, sm, m) for c in corpus() for sm in GPU_IDS for m in MODES}
    cache["rows"] = {k: v for k, v in cache["rows"].items() if k in known}   # configs removed from the corpus
    save(cache)
    print(f"wrote {CACHE_FILE.relative_to(ROOT)} ({len(cache['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
