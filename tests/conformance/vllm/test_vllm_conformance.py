"""explain agrees with vLLM 0.33.0's own selection code, for every corpus config x GPU x install.

vLLM's answers come from vllm_results.json (see vllm_cache.py for what a row holds and how to refresh it).
Each run re-runs vLLM, inside .venv-vllm, for a sample (one config per checkpoint label and GPU) and for
every row whose key is stale or missing (a new config, a changed harness); the sample must reproduce the
cached rows exactly. Then every row is compared with `explain`: a difference fails unless
accepted_differences.yaml lists it with the vLLM source line that explains it.
"""

from __future__ import annotations

import fnmatch
import functools
import shutil
from pathlib import Path

import pytest
import yaml

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

from . import vllm_cache, vllm_compare

pytestmark = pytest.mark.conformance

ACCEPTED = Path(__file__).parent / "accepted_differences.yaml"
MIN_ROWS = 150
# Re-running more rows than this belongs in a refresh, not in CI (about 20 s per process + 1-2 s per build).
MAX_RERUN = 200


@functools.lru_cache(maxsize=1)
def _corpus() -> dict:
    return {c.name: c for c in vllm_cache.corpus()}


@functools.lru_cache(maxsize=None)
def _info(name: str, tmp: str):
    return inspect_checkpoint(str(_corpus()[name].materialize(Path(tmp))))


def sample_keys(configs, cache: dict) -> list[str]:
    """One config per (checkpoint label, producer) on every GPU with FlashInfer, and on sm_90 and sm_100
    (where FlashInfer decides most) without it. A config vLLM builds is preferred as the representative."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="vllm-sample-")
    seen: dict[tuple[str, str], str] = {}
    for c in configs:
        info = _info(c.name, tmp)
        row = cache["rows"].get(vllm_cache.row_key(c.name, 90, "flashinfer"), {})
        built = row.get("result", {}).get("stage") == "built"
        key = (info.label, info.producer)
        if key not in seen or (built and not seen[key][1]):
            seen[key] = (c.name, built)
    keys = []
    for name in sorted({n for n, _ in seen.values()}):
        for sm in vllm_cache.GPU_IDS:
            keys.append(vllm_cache.row_key(name, sm, "flashinfer"))
            if sm in (90, 100):
                keys.append(vllm_cache.row_key(name, sm, "no-flashinfer"))
    shutil.rmtree(tmp, ignore_errors=True)
    return keys


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """(rows by key, the rows re-run now by key): the cached rows with every stale one replaced."""
    configs = vllm_cache.corpus()
    cache = vllm_cache.load()
    stale = vllm_cache.stale_keys(cache, configs)
    if len(stale) > MAX_RERUN:
        pytest.fail(f"{len(stale)} cached vLLM rows are stale or missing (harness, venv pins or corpus changed): "
                    "refresh them with `python3 tests/conformance/vllm/vllm_cache.py refresh` and commit "
                    "tests/conformance/vllm/vllm_results.json")
    if not vllm_cache.VENV_PYTHON.exists():
        if stale:
            pytest.fail(f"{len(stale)} vLLM rows need a run and {vllm_cache.VENV_PYTHON} is missing: "
                        "bash .ci/venv-vllm.sh")
        return cache["rows"], {}
    problem = vllm_cache.venv_problem()
    if problem:     # a half-built venv would answer for vLLM with whatever it happens to hold
        pytest.fail(f"{problem}: rebuild it with `bash .ci/venv-vllm.sh`")
    rerun = sorted(set(stale) | set(sample_keys(configs, cache)))
    fresh = vllm_cache.run(rerun, configs)
    rows = {**cache["rows"], **{k: fresh[k] for k in stale}}
    return rows, fresh


def test_cached_rows_reproduce(engine):
    """The sample re-run now gives exactly the cached answers: the cache is vLLM's, not a stale copy."""
    rows, fresh = engine
    if not fresh:
        pytest.skip(".venv-vllm is not set up: the cached rows are compared, none is re-run")
    drift = [k for k, row in fresh.items() if k in rows and _decided(rows[k]) != _decided(row)]
    assert not drift, f"vLLM answers differently from the cache for {drift[:5]}: refresh vllm_results.json"


def _decided(row: dict) -> dict:
    """A row without vLLM's log lines: vLLM logs some choices once per process (its attention selector is
    cached), so which lines a config gets depends on the configs built before it in the same process."""
    return {k: v for k, v in row["result"].items() if k != "log"}


def _accepted() -> list[dict]:
    return yaml.safe_load(ACCEPTED.read_text()) or [] if ACCEPTED.exists() else []


def _is_accepted(row: vllm_compare.Row, acc: dict) -> bool:
    config, sm, mode = row.key.split("|")
    return (fnmatch.fnmatch(config, acc["config"]) and (not acc.get("sm") or int(sm[3:]) in acc["sm"])
            and (not acc.get("install") or mode == acc["install"])
            and f"{row.layer_class}/{row.role}" == acc["layer"]
            and (set(row.vllm) == set(row.advisor) | set(acc["vllm_extra"]) if "vllm_extra" in acc
                 else set(row.vllm) == set(acc["vllm"]) and set(row.advisor) == set(acc["advisor"])))


def _explain_rows(rows: dict, tmp: Path, rules_dir: Path | None = None) -> dict:
    """key -> (row, explanation, checkpoint label), explain run with the install facts vLLM reported."""
    out = {}
    version = vllm_cache.ENGINE_VERSION.rsplit(".", 1)[0]
    for key, row in sorted(rows.items()):
        name, sm, _mode = key.split("|")
        info = _info(name, str(tmp))
        gpu = get_gpu(vllm_cache.GPU_IDS[int(sm[3:])])
        exp = explain(info, gpu, engine="vllm", version=version, options=vllm_compare.install_options(row),
                      rules_dir=rules_dir)
        out[key] = (row, exp, info.label)
    return out


def compare_all(rows: dict, tmp: Path, rules_dir: Path | None = None) -> vllm_compare.Comparison:
    comp = vllm_compare.Comparison()
    for key, (row, exp, label) in _explain_rows(rows, tmp, rules_dir).items():
        vllm_compare.compare_row(key, row, exp, comp, label=label)
    return comp


@pytest.fixture(scope="module")
def explained(engine, tmp_path_factory):
    rows, _ = engine
    return _explain_rows(rows, tmp_path_factory.mktemp("ck"))


def test_explain_agrees_with_vllm(explained):
    comp = vllm_compare.Comparison()
    for key, (row, exp, label) in explained.items():
        vllm_compare.compare_row(key, row, exp, comp, label=label)
    assert len(comp.rows) >= MIN_ROWS, f"only {len(comp.rows)} (config, GPU, layer) rows compared"
    accepted = _accepted()
    unexplained = [r for r in comp.differences if not any(_is_accepted(r, a) for a in accepted)]
    unused = [a for a in accepted if not any(_is_accepted(r, a) for r in comp.differences)]
    lines = [f"{r.key} {r.layer_class}/{r.role}: vLLM {list(r.vllm)} vs explain {list(r.advisor)} {r.detail}"
             for r in unexplained]
    assert not unexplained, f"{len(unexplained)} of {len(comp.rows)} rows disagree:\n" + "\n".join(lines[:60])
    assert not unused, f"accepted differences that no longer occur (remove them): {unused}"


def test_launch_kernel_check_agrees_with_vllm_log_lines(explained):
    """The kernel check a launch runs (launchers/kernel_check.py) reads vLLM's own "Using ..." lines and finds
    no mismatch with explain: the class names it compares are the ones vLLM logs."""
    from launchers import kernel_check

    matched, mismatched = 0, []
    for key, (row, exp, _label) in explained.items():
        lines = row["result"].get("log") or []
        if row["result"].get("stage") != "built" or not lines:
            continue
        kc = kernel_check.check(lines, exp)
        matched += sum(r.status == "match" for r in kc.rows)
        mismatched += [f"{key} {r.layer_class}: explain {r.predicted} vs logged {r.observed}" for r in kc.mismatches]
    assert matched > 100 and not mismatched, mismatched[:20]


def test_a_rule_change_breaks_agreement(engine, tmp_path):
    """Moving Marlin ahead of every NVFP4 kernel (a plausible wrong edit) must make the suite fail."""
    rows, _ = engine
    from profiles import PROFILES_DIR

    rules = tmp_path / "engines"
    rules.mkdir()
    src = (PROFILES_DIR / "engines" / "vllm-0.33.yaml").read_text()
    assert "      - *humming_nvfp4_sm90\n      - *marlin_nvfp4\n" in src
    edited = src.replace("    candidates:\n      - kernel: FlashInferCuteDslNvFp4LinearKernel\n",
                         "    candidates:\n      - *marlin_nvfp4\n"
                         "      - kernel: FlashInferCuteDslNvFp4LinearKernel\n", 1)
    assert edited != src
    (rules / "vllm-0.33.yaml").write_text(edited)
    picked = {k: v for k, v in rows.items() if k.startswith("demo--qwen3-8b-nvfp4|sm_100|")}
    assert picked
    assert compare_all(picked, tmp_path / "ck", rules_dir=rules).differences
    assert not compare_all(picked, tmp_path / "ck2").differences


def test_the_newest_vllm_rule_file_is_the_one_checked():
    """A rule file for a new vLLM version needs its own run: install that version in .ci/venv-vllm.sh and
    refresh the cache (its rows are then all stale, so the suite cannot pass on the old answers)."""
    from advisor.kernel_path.rule_versions import available_versions

    newest = available_versions("vllm")[-1]
    checked = vllm_cache.ENGINE_VERSION.rsplit(".", 1)[0]
    assert newest == checked, (f"profiles/engines/vllm-{newest}.yaml is newer than the vLLM {checked} the "
                               f"conformance harness installs: pin vllm=={newest}.x in .ci/venv-vllm.sh and "
                               "refresh tests/conformance/vllm/vllm_results.json")


def _vllm_tree() -> Path:
    tree = vllm_cache.VENV_PYTHON.parents[1] / "lib"
    found = sorted(tree.glob("python3*/site-packages/vllm"))
    if not found:
        pytest.skip(".venv-vllm is not set up: the installed vLLM source is not here to read")
    return found[0]


def _rule_sources() -> list[str]:
    from advisor.yamlio import load_yaml_file
    from profiles import PROFILES_DIR

    out = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("source", "files_source") and isinstance(v, str):
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(load_yaml_file(PROFILES_DIR / "engines" / "vllm-0.33.yaml", "rule file"))
    return out


def test_every_cited_vllm_python_line_exists():
    """Each path:line@0.33.0 citation of a vLLM Python file names a file of the installed 0.33.0 wheel and
    lines inside it (C++/CMake sources are not in the wheel and are not checked here)."""
    import re

    tree = _vllm_tree()
    cite = re.compile(r"((?:vllm/)?[\w./]+\.py):([\d, -]+)@0\.33\.0")
    bad, seen = [], 0
    for text in _rule_sources():
        for path, lines in cite.findall(text):
            rel = path.removeprefix("vllm/")
            candidates = [tree / rel] + list(tree.glob(f"**/{rel}"))
            f = next((c for c in candidates if c.is_file()), None)
            if f is None:
                bad.append(f"{path}: no such file in vLLM 0.33.0")
                continue
            seen += 1
            last = max(int(x) for x in re.findall(r"\d+", lines))
            n = f.read_text(errors="replace").count("\n") + 1
            if last > n:
                bad.append(f"{path}:{lines}: the file has {n} lines")
    assert seen > 100
    assert not bad, bad[:20]


def test_every_vllm_kernel_name_is_a_vllm_class():
    """Kernel names as vLLM 0.33 logs them (users grep their logs; launch's kernel check compares them): every
    class name in the rule file's kernels is defined in vLLM 0.33.0, every backend name is one of its enums."""
    import re

    from advisor.yamlio import load_yaml_file
    from profiles import PROFILES_DIR

    tree = _vllm_tree()
    names = set()
    for p in tree.rglob("*.py"):
        text = p.read_text(errors="replace")
        names |= set(re.findall(r"^class (\w+)", text, re.M))
        names |= set(re.findall(r"^\s+([A-Z][A-Z0-9_]+)\s*=", text, re.M))      # enum members
    raw = load_yaml_file(PROFILES_DIR / "engines" / "vllm-0.33.yaml", "rule file")
    unknown = []
    for path in raw["paths"]:
        for c in path["candidates"]:
            head, _, rest = c["kernel"].partition(" (")
            inner = re.match(r"[A-Za-z_]\w*", rest) if rest else None
            for n in [head] + ([inner.group(0)] if inner and inner.group(0)[0].isupper() else []):
                if n not in names and n not in _DESCRIPTIVE:
                    unknown.append(f"{path['id']}: {c['kernel']} ({n})")
    assert not unknown, unknown


# Parenthesised words that describe a variant rather than name a class.
_DESCRIPTIVE = {"FA2", "FA4", "TRT", "cuBLAS"}
