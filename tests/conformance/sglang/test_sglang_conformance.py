"""The advisor's SGLang 0.5.23 rules against SGLang 0.5.23 itself, for every corpus config, GPU and install.

Engine side: sglang_results.json, what SGLang's own selection chain chose (sglang_probe.py in .venv-sglang;
see sglang_cache.py for the chain and how to refresh it). Advisor side: `explain --engine sglang --all-gpus
--json` for the same config folder and install. Every row must agree, or be listed in ACCEPTED with the
SGLang source line that explains the difference. Each run also re-runs SGLang for every stale or missing
row and for a small rotating sample of cached rows, which must come out the same.
"""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path

import pytest
import yaml

from advisor.cli import build_parser

from . import sglang_cache as cache
from .sglang_compare import Accepted, Row, compare

pytestmark = pytest.mark.conformance


def _listed(name: str) -> tuple[Accepted, ...]:
    return tuple(Accepted.from_yaml(e) for e in yaml.safe_load((Path(__file__).parent / name).read_text()) or [])


# Differences the suite accepts, each with the SGLang line that explains it (accepted_differences.yaml).
ACCEPTED: tuple[Accepted, ...] = _listed("accepted_differences.yaml")
# Differences that are advisor bugs not fixed yet (open_differences.yaml): reported as an expected failure,
# never as agreement; an entry that no longer matches a difference fails (remove it once the rule is fixed).
OPEN: tuple[Accepted, ...] = _listed("open_differences.yaml")

# The sample re-run each time: this many (GPU, install) processes with this many configs each.
SAMPLE_GROUPS, SAMPLE_CONFIGS = 2, 3


def _explain(checkpoint, mode: str) -> dict[str, dict]:
    """explain --engine sglang --json for the suite's GPUs and one install: {gpu id: explanation}, through
    the CLI's own option parsing and JSON encoding (the --all-gpus document, on the ten GPUs compared)."""
    from advisor.commands import explain as explain_cmd
    from advisor.gpu_table import get_gpu
    from advisor.jsonout import to_jsonable
    from advisor.kernel_path.explain import explain_all_gpus

    argv = ["explain", checkpoint.source, "--engine", "sglang", "--all-gpus", "--json"]
    if mode != "default":
        argv += ["--no-flashinfer", "--without", "deepgemm"]
    args = build_parser().parse_args(argv)
    table = [get_gpu(g) for g in cache.GPU_IDS.values()]
    exps = explain_all_gpus(checkpoint, "sglang", options=explain_cmd.options_from_args(args), table=table)
    return {e["gpu_id"]: e for e in to_jsonable(list(exps))}


@pytest.fixture(scope="session")
def corpus():
    configs = cache.corpus()
    with tempfile.TemporaryDirectory(prefix="sglang-conf-") as tmp:
        cks = cache.checkpoints(configs, Path(tmp))
        specs = {name: {s["prefix"]: s for s in (cache.layer_specs(ck) if ck is not None else [])}
                 for name, (_, ck) in cks.items()}
        advisor = {c.name: {mode: _explain(cks[c.name][1], mode) for mode in cache.MODES}
                   for c in configs if cks[c.name][1] is not None}
        yield configs, specs, advisor


def _sample(keys: list[str]) -> list[str]:
    """A rotating sample (changes daily, so every GPU and install is re-checked over time)."""
    groups = sorted({tuple(k.split("|")[1:]) for k in keys})
    if not groups:
        return []
    day = datetime.date.today().toordinal()
    picked = {groups[(day + i * 7) % len(groups)] for i in range(SAMPLE_GROUPS)}
    names = sorted({k.split("|")[0] for k in keys})
    chosen = {names[(day * 3 + i * 11) % len(names)] for i in range(SAMPLE_CONFIGS)}
    return [k for k in keys if tuple(k.split("|")[1:]) in picked and k.split("|")[0] in chosen]


@pytest.fixture(scope="session")
def engine_rows(corpus):
    """The cached rows, with every stale or missing row re-run through SGLang (which must be installed)."""
    configs, specs, _ = corpus
    rows = cache.load()["rows"]
    layers = {name: list(s) for name, s in specs.items()}
    stale = cache.stale_keys({"rows": rows}, configs, layers)
    if stale:
        if not cache.VENV_PYTHON.exists():
            pytest.fail(f"{len(stale)} SGLang rows are stale or missing (e.g. {stale[0]}) and .venv-sglang is not "
                        "built: run bash .ci/venv-sglang.sh, then tests/conformance/sglang/sglang_cache.py refresh")
        rows = {**rows, **cache.run(stale, configs)}
    return rows


def test_every_corpus_row_is_cached(corpus, engine_rows):
    configs, _, _ = corpus
    want = {cache.row_key(c.name, sm, m) for c in configs for sm in cache.GPU_IDS for m in cache.MODES}
    assert want <= set(engine_rows), sorted(want - set(engine_rows))[:5]


def test_sample_rerun_matches_cache(corpus):
    """SGLang re-run now for a sample of cached rows gives the cached answer (harness is deterministic)."""
    configs, specs, _ = corpus
    rows = cache.load()["rows"]
    layers = {name: list(s) for name, s in specs.items()}
    stale = set(cache.stale_keys({"rows": rows}, configs, layers))
    keys = _sample([k for k in rows if k not in stale])
    if not keys:
        pytest.skip("no valid cached rows to sample")
    if not cache.VENV_PYTHON.exists():
        pytest.fail(".venv-sglang is not built: run bash .ci/venv-sglang.sh")
    fresh = cache.run(keys, configs)
    for k in keys:
        assert _reproducible(fresh[k]["result"]) == _reproducible(rows[k]["result"]), k


def _reproducible(result: dict) -> dict:
    """A row without the one field that depends on the configs run before it in the same process: SGLang's
    scheduler seeds the MoE flags only for a config with an experts count (managers/scheduler.py:1007-1008
    @0.5.23), so a dense config keeps the previous config's MoE runner. It builds no experts layer, so no
    comparison reads it."""
    if any(lay.get("kind") == "moe" for lay in result.get("layers") or ()):
        return result
    sched = {k: v for k, v in (result.get("scheduler") or {}).items() if k != "moe_runner_backend"}
    return {**result, "scheduler": sched} if "scheduler" in result else result


def all_rows(corpus, engine_rows) -> list[Row]:
    configs, specs, advisor = corpus
    out: list[Row] = []
    for c in configs:
        for sm, gpu_id in cache.GPU_IDS.items():
            for mode in cache.MODES:
                row = engine_rows.get(cache.row_key(c.name, sm, mode))
                if row is None:
                    continue
                if c.name not in advisor:
                    out.append(Row(c.name, sm, mode, "model", "-", "the advisor cannot read this config", False))
                    continue
                out += compare(c.name, sm, mode, row, advisor[c.name][mode][gpu_id], specs[c.name])
    return out


def _report(rows: list[Row]) -> str:
    return "\n".join(f"{r.config} sm_{r.sm} {r.mode} {r.layer}: SGLang {r.engine!r} / advisor {r.advisor!r}"
                     for r in rows[:60])


def test_advisor_agrees_with_sglang(corpus, engine_rows):
    rows = all_rows(corpus, engine_rows)
    assert len(rows) >= 1000, f"only {len(rows)} comparison rows"
    accepted = [r for r in rows if not r.agree and any(a.covers(r) for a in ACCEPTED)]
    known = [r for r in rows if not r.agree and r not in accepted and any(o.covers(r) for o in OPEN)]
    wrong = [r for r in rows if not r.agree and r not in accepted and r not in known]
    assert not wrong, (f"{len(wrong)} of {len(rows)} rows disagree ({len(accepted)} accepted, {len(known)} open):\n"
                       + _report(wrong))


def test_open_differences(corpus, engine_rows):
    """The advisor rules still known wrong (open_differences.yaml): an expected failure until fixed."""
    rows = all_rows(corpus, engine_rows)
    known = [r for r in rows if not r.agree and not any(a.covers(r) for a in ACCEPTED)
             and any(o.covers(r) for o in OPEN)]
    if known:
        pytest.xfail(f"{len(known)} of {len(rows)} rows are open advisor bugs (open_differences.yaml):\n"
                     + _report(known))


def test_every_listed_difference_is_still_needed(corpus, engine_rows):
    """An ACCEPTED or OPEN entry that no longer covers a disagreement is stale: remove it."""
    rows = all_rows(corpus, engine_rows)
    for a in ACCEPTED + OPEN:
        assert any(not r.agree and a.covers(r) for r in rows), f"listed difference no longer seen: {a}"


def test_every_rule_file_version_has_a_run():
    """A rule file for a newer SGLang needs its own engine run: this suite covers ENGINE_VERSION only."""
    from advisor.kernel_path.rule_versions import available_versions

    versions = available_versions("sglang")
    assert versions == [cache.ENGINE_VERSION], (
        f"rule files for SGLang {versions}, conformance runs for {cache.ENGINE_VERSION} only: build a venv and a "
        "cache for the new version (tests/conformance/sglang/README.md)")
