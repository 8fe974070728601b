"""explain_kv: explain()'s attention/KV decision alone, equal to the full explain's on every case tried.

The tuner weighs each KV dtype an engine offers; services/analysis asks explain_kv for those instead of a
full explain per dtype. Equality here is the licence for that: same LayerDecision (or the same error, or
no decision when the model has no attention) over real GPUs × tuned engines × bundled demos × every KV
dtype the engine's rules accept, plus install flags, TP sizes and built checkpoints that reach the
config-loading stage's refusals and the start-up warnings.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor import engines
from advisor.checkpoint.demo import list_demos
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.model import ActQuant, ArchInfo, ModuleGroup, WeightQuant
from advisor.errors import AdvisorError
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain, explain_kv
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rule_files import load_rules

from kernel_path_builders import PRESETS, checkpoint, gpu

REAL_GPUS = ("t4", "rtx-3090", "a100-80gb-sxm", "rtx-4090", "l40s", "h100-sxm", "b200", "rtx-5090",
             "dgx-spark-gb10", "jetson-agx-thor")


def _outcome(fn):
    try:
        return "ok", fn()
    except AdvisorError as err:
        return "error", (type(err).__name__, str(err))


def _same(ck, g, engine, options, gpus=1):
    full = _outcome(lambda: explain(ck, g, gpus=gpus, engine=engine, options=options))
    if full[0] == "ok":
        kv = [d for d in full[1].decisions if d.layer_class == "attention_kv"]
        assert len(kv) <= 1
        full = ("ok", kv[0] if kv else None)
    alone = _outcome(lambda: explain_kv(ck, g, gpus=gpus, engine=engine, options=options))
    assert alone == full, (ck.label, g.id, engine, options)
    return alone


def _kv_names(engine):
    rules, _ = load_rules(engine, None, None)
    return (None, *rules.kv_cache_dtypes, "no-such-dtype")


@pytest.mark.parametrize("engine", engines.tuned())
def test_equal_on_the_demos_for_every_kv_dtype(engine):
    demos = list_demos()
    assert demos
    cks = [inspect_checkpoint(f"demo:{name}") for name in demos]
    kinds = set()
    for gid in REAL_GPUS:
        g = get_gpu(gid)
        for ck in cks:
            for kv in _kv_names(engine):
                for tp in (None, 2):
                    got = _same(ck, g, engine, InstallOptions(kv_cache_dtype=kv, tp=tp), gpus=tp or 1)
                    kinds.add(got[0] if got[0] == "error" else ("runs" if got[1].runs else "refused"))
    # the grid reaches accepted, refused and rejected KV dtypes, so equality is not only over one outcome
    assert kinds == {"runs", "refused", "error"}


def _flag_options(engine):
    rules, _ = load_rules(engine, None, None)
    out = [InstallOptions(flashinfer=False, flashinfer_cubin=False), InstallOptions(triton_kernels=False)]
    for name, spec in rules.flags.items():
        out += [InstallOptions(flags=((name, v),)) for v in spec.values]
    return out


@pytest.mark.parametrize("engine", engines.tuned())
def test_equal_under_install_flags(engine):
    cks = [inspect_checkpoint(f"demo:{name}") for name in list_demos()]
    for gid in ("rtx-3090", "h100-sxm", "b200"):        # Turing: the demo and built-checkpoint grids
        g = get_gpu(gid)
        for ck in cks:
            for opts in _flag_options(engine):
                for kv in (None, "nvfp4"):
                    _same(ck, g, engine, replace(opts, kv_cache_dtype=kv))


@pytest.mark.parametrize("engine", engines.tuned())
def test_equal_on_built_checkpoints(engine):
    for preset in PRESETS:
        for moe in (False, True):
            for mla in (False, True):
                for declared in (None, "fp8", "nvfp4"):
                    ck = checkpoint(preset, moe=moe, mla=mla, kv=declared)
                    for gid in ("t4", "rtx-3090", "rtx-4090", "h100", "b200", "rtx-5090"):
                        for kv in (None, "fp8_e4m3", "nvfp4"):
                            _same(ck, gpu(gid), engine, InstallOptions(kv_cache_dtype=kv))


def _attention_only(ck):
    """Only the lm_head is a GEMM: the attention decision heads the list and carries start-up warnings."""
    lm = ModuleGroup(name="lm_head", role="lm_head", scheme="BF16", weight=WeightQuant(), act=ActQuant(),
                     count=1, shape=(256, 64))
    return replace(ck, modules=(lm,))


@pytest.mark.parametrize("engine", engines.tuned())
def test_equal_where_attention_heads_the_decisions_or_is_absent(engine):
    base = checkpoint("nvfp4-w4a4")
    no_attention = replace(base, arch=ArchInfo(model_type="mamba", hidden_size=64, vocab_size=256))
    for gid in ("t4", "rtx-3090", "b200"):
        assert _same(_attention_only(base), gpu(gid), engine, InstallOptions())[0] == "ok"
        assert _same(no_attention, gpu(gid), engine, InstallOptions()) == ("ok", None)


def _real_checkpoints(tmp_path):
    """The real configs (config.json and, where published, hf_quant_config.json), config-only."""
    import shutil
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
    from corpus_files import real_configs_dir, require

    data = require(real_configs_dir)
    for cfg in sorted(data.glob("*_config.json")):
        name = cfg.name[:-len("_config.json")]
        if name.endswith("_hf_quant"):
            continue
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(cfg, folder / "config.json")
        hq = data / f"{name}_hf_quant_config.json"
        if hq.exists():
            shutil.copy(hq, folder / "hf_quant_config.json")
        try:
            yield inspect_checkpoint(str(folder))
        except AdvisorError:
            continue


def test_equal_on_the_real_configs(tmp_path):
    """Real configs reach the config-loading stage: the KV dtype a file declares, refusals, unquantized builds."""
    declared = 0
    for ck in _real_checkpoints(tmp_path):
        declared += ck.kv_cache_quant is not None
        for engine in engines.tuned():
            for gid in ("rtx-3090", "h100-sxm", "b200"):
                for kv in (None, "nvfp4"):
                    _same(ck, get_gpu(gid), engine, InstallOptions(kv_cache_dtype=kv))
    assert declared       # some declare their KV cache quantization
