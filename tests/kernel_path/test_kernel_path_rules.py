"""Rule files: every candidate explains its rejection, sources are cited, the loader rejects bad
files with the file named, versions fall back to the nearest older file."""

from __future__ import annotations

import itertools
import re
import shutil
from dataclasses import replace

import pytest

from advisor.errors import BadInput, UsageError
from advisor.kernel_path.explain import explain, explain_all_gpus
from advisor.kernel_path.options import DEPENDENCY_FACTS, InstallOptions
from advisor.kernel_path.rule_files import all_rule_files, load_rule_file, load_rules
from advisor.kernel_path.rule_versions import engines_dir, parse_engine_spec, resolve_version
from advisor.kernel_path.gates import Context, LayerFacts
from advisor.kernel_path.select import select

from kernel_path_builders import PRESETS, checkpoint, gpu

RULE_FILES = all_rule_files()
SMS = (60, 70, 75, 86, 89, 90, 100, 103, 110, 120)
_SOURCE = re.compile(r"\S+(:\d+[-\d, ]*)?.*@\S+")


def _option_variants(rules, path):
    none = InstallOptions(**{f: False for f in DEPENDENCY_FACTS})
    out = [InstallOptions(), none, InstallOptions(flashinfer_cubin=False), InstallOptions(tp=2)]
    if path.backend_flag:
        for value in rules.flags[path.backend_flag].values:
            out.append(replace(none, flags=((path.backend_flag, value),)))
    if path.disable_env:
        names = ",".join(c.kernel for c in path.candidates)
        out.append(InstallOptions(env=((path.disable_env, names),)))
    return out


def _layer_variants(path):
    if path.layer_class == "attention_kv":
        for scheme, mla, sinks, hd, mt in itertools.product(path.schemes, (False, True), (False, True), (64, 128),
                                                             ("llama", "qwen3_5")):
            yield LayerFacts(layer_class="attention_kv", scheme=scheme, mla=mla, attention_sinks=sinks,
                             head_dim=hd, model_type=mt)
        return
    for scheme, producer, w, a in PRESETS.values():
        for shape, mt in (((4096, 4096), "llama"), ((96, 100), "qwen3_5_text")):
            yield LayerFacts(layer_class=path.layer_class, scheme=scheme, producer=producer, model_type=mt,
                             weight_format=w.format, weight_granularity=w.granularity, group_size=w.group_size,
                             block=w.block, symmetric=w.symmetric, act_format=a.format,
                             act_granularity=a.granularity, act_dynamic=a.dynamic, shape=shape)


@pytest.mark.parametrize("path_file", RULE_FILES, ids=[p.name for p in RULE_FILES])
def test_every_candidate_is_rejected_somewhere_with_a_reason(path_file):
    rules = load_rule_file(path_file)
    for path in rules.paths:
        rejected: dict[str, list[str]] = {c.kernel: [] for c in path.candidates}
        for sm, opts, layer in itertools.product(SMS, _option_variants(rules, path), list(_layer_variants(path))):
            ctx = Context(sm=sm, gpu_name="test GPU", rules=rules, options=opts,
                          tp=opts.tp or 1, layer=layer)
            d = select(path, ctx, checkpoint_scheme=layer.scheme)
            for r in d.rejected:
                rejected[r.kernel].append(r.reason)
            if not d.runs:
                assert d.error and not re.search(r"\{(gpu_name|sm|cc|kv16|method)\}", d.error), (path.id, d.error)
        last = path.candidates[-1].kernel
        for kernel, reasons in rejected.items():
            # only a path's final fallback may be unreachable-to-reject (nothing comes after it)
            assert reasons or kernel == last, f"{path_file.name} {path.id}: {kernel} is never rejected in the sweep"
            for reason in reasons:
                assert reason.strip() and "None" not in reason, (path.id, kernel, reason)


@pytest.mark.parametrize("path_file", RULE_FILES, ids=[p.name for p in RULE_FILES])
def test_every_rule_cites_a_versioned_source(path_file):
    rules = load_rule_file(path_file)
    for path in rules.paths:
        for c in path.candidates:
            assert _SOURCE.match(c.source) and "@" in c.source, (path.id, c.kernel, c.source)
            for w in c.warnings:
                assert w.meaning and "@" in w.source or "field notes" in w.source
        assert "@" in path.none_error.source
    for d in rules.downgrades:
        assert "@" in d.source


def test_all_three_engines_have_rules():
    assert {load_rule_file(p).engine for p in RULE_FILES} == {"vllm", "sglang", "fastllm"}


def _copy_rules(tmp_path, engine, version, new_version):
    src = engines_dir() / f"{engine}-{version}.yaml"
    text = src.read_text().replace(f'version: "{version}"', f'version: "{new_version}"', 1)
    (tmp_path / f"{engine}-{new_version}.yaml").write_text(text)


def test_version_fallback_uses_nearest_older(tmp_path):
    shutil.copy(engines_dir() / "vllm-0.33.yaml", tmp_path / "vllm-0.33.yaml")
    _copy_rules(tmp_path, "vllm", "0.33", "0.35")
    assert resolve_version("vllm", None, tmp_path) == ("0.35", None)
    assert resolve_version("vllm", "0.35", tmp_path) == ("0.35", None)
    chosen, note = resolve_version("vllm", "0.34.2", tmp_path)
    assert chosen == "0.33" and "0.34.2" in note and "nearest older" in note
    assert resolve_version("vllm", "0.40", tmp_path)[0] == "0.35"
    with pytest.raises(UsageError, match="oldest rule file is 0.33"):
        resolve_version("vllm", "0.30", tmp_path)


def test_explain_reports_version_note():
    exp = explain(checkpoint("nvfp4-w4a4"), gpu("rtx-3090"), engine="vllm", version="0.34")
    assert exp.engine_version == "0.33" and exp.requested_version == "0.34"
    assert "using 0.33 (nearest older)" in exp.version_note
    assert explain(checkpoint(), gpu("rtx-3090"), engine="vllm").version_note is None


def test_engine_spec_parsing():
    assert parse_engine_spec("vllm") == ("vllm", None)
    assert parse_engine_spec("SGLang@0.5.23") == ("sglang", "0.5.23")
    with pytest.raises(UsageError):
        parse_engine_spec("tensorrt")


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t + "\nunexpected_key: 1\n", "Extra inputs are not permitted"),
    (lambda t: t.replace("dequant: registers", "dequant: somewhere", 1), "dequant"),
    (lambda t: t.replace("mma: hmma_bf16", "mma: hmma_tf32", 1), "mma class"),
    (lambda t: t.replace("- sm_min: 75\n", "- sm_min: 75\n        sm_max: 90\n", 1), "exactly one condition"),
    (lambda t: t.replace("requires: flashinfer", "requires: flashinfr", 1), "not declared"),
    (lambda t: "engine: [vllm\n", "not valid YAML"),
    (lambda t: "- a\n- b\n", "a rule file is a mapping"),
])
def test_loader_rejects_bad_rule_files_naming_the_file(tmp_path, mutate, message):
    text = (engines_dir() / "vllm-0.33.yaml").read_text()
    bad = tmp_path / "vllm-0.33.yaml"
    bad.write_text(mutate(text))
    with pytest.raises(BadInput) as info:
        load_rule_file(bad)
    assert str(bad) in str(info.value)
    assert message in str(info.value)
    assert info.value.exit_code == 3


def test_loader_checks_file_name(tmp_path):
    shutil.copy(engines_dir() / "vllm-0.33.yaml", tmp_path / "vllm-9.9.yaml")
    with pytest.raises(BadInput, match="file name must be vllm-0.33.yaml"):
        load_rules("vllm", "9.9", tmp_path)


def test_unknown_flag_and_value_are_usage_errors():
    with pytest.raises(UsageError, match="no flag"):
        explain(checkpoint(), gpu("h100"), engine="fastllm",
                options=InstallOptions(flags=(("linear_backend", "marlin"),)))
    with pytest.raises(UsageError, match="not valid"):
        explain(checkpoint(), gpu("h100"), options=InstallOptions(flags=(("linear_backend", "bogus"),)))
    with pytest.raises(UsageError, match="kv-cache-dtype"):
        explain(checkpoint(), gpu("h100"), options=InstallOptions(kv_cache_dtype="int3"))


def test_summary_for_rtx_3090_w4a4_reads_like_the_issue_example():
    s = explain(checkpoint("nvfp4-w4a4"), gpu("rtx-3090")).summary
    assert s.startswith("On your GeForce RTX 3090 this W4A4 NVFP4 checkpoint runs weight-only")
    assert "unpacked in registers" in s and "BF16 tensor cores (HMMA)" in s
    assert "memory bandwidth" in s and "not FP4" in s


def test_summary_explains_a_failure_with_its_remedy():
    exp = explain(checkpoint("bf16"), gpu("t4"), options=InstallOptions(kv_cache_dtype="fp8"))
    assert not exp.runs
    assert "cannot run" in exp.summary and "Remedy:" in exp.summary


def test_explain_reads_no_environment(monkeypatch):
    base = explain(checkpoint("int8-w8a8"), gpu("rtx-5090"))
    monkeypatch.setenv("VLLM_DISABLED_KERNELS", "CutlassInt8ScaledMMLinearKernel")
    assert explain(checkpoint("int8-w8a8"), gpu("rtx-5090")) == base


def test_gpt_oss_dense_layers_stay_bf16_and_moe_is_mxfp4():
    from advisor.checkpoint.model import ActQuant, WeightQuant

    ck = checkpoint("bf16", moe=True, model_type="gpt_oss")
    expert = replace(ck.modules[-1], scheme="W4A16-MXFP4",
                     weight=WeightQuant(format="mxfp4", bits=4, granularity="mxfp4", group_size=32), act=ActQuant())
    ck = replace(ck, producer="mxfp4", label="W4A16-MXFP4", modules=ck.modules[:-1] + (expert,))
    by = {("rtx-5090", "dense_linear"): "UnquantizedLinearMethod (cuBLAS)",
          ("rtx-5090", "moe_experts"): "MARLIN (MarlinExperts)",
          ("h100", "moe_experts"): "TRITON (OAITritonMxfp4ExpertsMonolithic)",
          ("b200", "moe_experts"): "FLASHINFER_TRTLLM_MXFP4_BF16 (TrtLlmMxfp4ExpertsMonolithic)",
          ("a100", "moe_experts"): "MARLIN (MarlinExperts)"}
    for (g, cls), kernel in by.items():
        d = next(d for d in explain(ck, gpu(g)).decisions if d.layer_class == cls)
        assert d.kernel == kernel, (g, cls, d.kernel)
    dense = next(d for d in explain(ck, gpu("h100")).decisions if d.layer_class == "dense_linear")
    assert "UnquantizedLinearMethod" in dense.reasons[0]
    att = next(d for d in explain(ck, gpu("rtx-5090"), options=InstallOptions(kv_cache_dtype="nvfp4")).decisions
               if d.layer_class == "attention_kv")
    assert not att.runs and any("sinks" in r.reason for r in att.rejected)


def test_explain_all_gpus_covers_the_table():
    from advisor.gpu_table import load_gpu_table

    table = load_gpu_table()
    exps = explain_all_gpus(checkpoint("nvfp4-w4a4"), "vllm")
    assert [e.gpu_id for e in exps] == [g.id for g in table]
    by_id = {e.gpu_id: e for e in exps}
    dense = {gid: next(d for d in e.decisions if d.layer_class == "dense_linear") for gid, e in by_id.items()}
    assert dense["t4"].kernel == "MarlinNvFp4LinearKernel" and dense["t4"].mma == "hmma_f16"
    assert dense["rtx-5090"].effective_scheme == "W4A4-NVFP4"
    assert dense["b200"].effective_scheme == "W4A4-NVFP4"
    assert dense["h100-sxm"].kernel == "HummingNvFp4LinearKernel"


def test_mla_attention_paths():
    ck = checkpoint("fp8-block", mla=True, model_type="deepseek_v3")
    att = {g: next(d for d in explain(ck, gpu(g), options=InstallOptions(kv_cache_dtype="fp8")).decisions
                   if d.layer_class == "attention_kv") for g in ("h100", "b200", "rtx-3090", "rtx-4090")}
    assert att["h100"].kernel == "FLASHMLA"
    assert att["b200"].kernel == "FLASHINFER_MLA"
    assert not att["rtx-3090"].runs
    assert att["rtx-4090"].kernel == "TRITON_MLA"


def test_summary_names_fp8_tensor_cores_left_unused_on_ada():
    from advisor.gpu_table import get_gpu

    ada = get_gpu("rtx-4090")
    s = explain(checkpoint("fp8-block"), ada).summary
    assert "runs weight-only" in s
    assert "This GPU does have FP8 tensor cores, but vLLM 0.33 does not use them here" in s
    s = explain(checkpoint("fp8-block"), ada, engine="sglang").summary
    assert "runs natively" in s and "does not use them" not in s
    assert "does not use them" not in explain(checkpoint("fp8-block"), get_gpu("rtx-3090")).summary


def test_disabled_flashinfer_is_announced_once_on_any_gpu():
    opts = InstallOptions(flashinfer_cubin=False, nvcc_ninja=False)
    for g in ("rtx-3090", "t4", "rtx-5090"):
        exp = explain(checkpoint("gptq-int4"), gpu(g), options=opts)
        texts = [w.text for d in exp.decisions for w in d.warnings]
        assert sum("FlashInfer kernels are disabled" in t for t in texts) == 1, g
    exp = explain(checkpoint("gptq-int4"), gpu("rtx-3090"))
    assert not any("FlashInfer" in w.text for d in exp.decisions for w in d.warnings)
