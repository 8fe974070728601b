"""The engine memory model per engine version (issue 19 point 1): versioned profiles, every term sized
from the engine's own allocation code with its source, and the terms in the plan's derivation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cost_builders import dense_checkpoint, explanation, moe_checkpoint, rtx3090

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from advisor.cost import context, memory, memory_terms, weights
from advisor.cost.engine_profile import GIB, MIB, available_versions, load_engine_memory, profiles_dir
from advisor.cost.overrides import Overrides
from advisor.errors import BadInput, UsageError

ENGINES = ("vllm", "sglang", "fastllm")
SOURCE = re.compile(r"(\S+\.(py|cpp|cu|h|so)[^@]*@[0-9a-f.]+)|(^estimate)|(util\.py:\d+)")


def _plan(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- versioned profiles
def test_profiles_are_versioned_like_the_rule_files():
    for engine in ENGINES:
        versions = available_versions(engine)
        assert versions, engine
        newest = load_engine_memory(engine)
        assert newest.profile_version == versions[-1] and not newest.version_note
    # a newer engine uses the nearest older profile, and says so
    eng = load_engine_memory("vllm", "0.34.1")
    assert eng.profile_version == "0.33" and "nearest older" in eng.version_note
    # the full version of the profile's own release is that profile, without a note
    assert load_engine_memory("vllm", "0.33.0").version_note == ""
    assert load_engine_memory("fastllm", "1.9.0").profile_version == "1.9"
    with pytest.raises(UsageError, match="oldest is 0.33"):
        load_engine_memory("vllm", "0.20")


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(text)
    return p


def test_a_broken_profile_is_one_line_naming_the_file(tmp_path):
    good = (profiles_dir() / "vllm-0.33.yaml").read_text()
    _write(tmp_path / "a", "vllm-0.40.yaml", good.replace("engine: vllm", "engine: sglang"))
    with pytest.raises(BadInput, match="engine must be 'vllm'") as err:
        load_engine_memory("vllm", folder=tmp_path / "a")
    assert "vllm-0.40.yaml" in str(err.value.path)
    _write(tmp_path / "b", "vllm-0.40.yaml", good.replace("    sampler:\n", "    samplers:\n"))
    with pytest.raises(BadInput, match="unknown term 'samplers'"):
        load_engine_memory("vllm", folder=tmp_path / "b")
    text = re.sub(r"(    non_torch:\n      gib: 0.1\n)      source: .*\n", r"\1", good)
    _write(tmp_path / "c", "vllm-0.40.yaml", text)
    with pytest.raises(BadInput, match="non_torch needs a 'source'"):
        load_engine_memory("vllm", folder=tmp_path / "c")


@pytest.mark.parametrize("engine", ENGINES)
def test_every_memory_term_names_its_engine_source(engine):
    eng = load_engine_memory(engine)
    b = eng.memory["budget"]
    assert b["of"] in memory_terms.BUDGET_OF and b["source"]
    for term, params in eng.memory["terms"].items():
        src = params["source"]
        assert SOURCE.search(src), f"{engine}.{term}: {src}"


def test_the_sizing_covers_exactly_the_terms_a_profile_may_name():
    # the loader accepts memory_terms.TERM_NAMES; a name without a sizing would fail mid-plan, not at load
    assert tuple(memory.TERMS) == memory_terms.TERM_NAMES


# ---------------------------------------------------------------- the terms, each from its engine code
def _inputs(ck, *, share=0.92, tokens=2048, batch=256, tp=1, graphs=True, spec=None, vram=24 * GIB, kv_layers=0):
    return memory.MemoryInputs(ck.arch, weights.build(ck, explanation()), vram, share, tp, tokens, batch, graphs,
                               (8, 6), spec, kv_layers)


def test_vllm_moe_workspace_follows_the_modular_kernel_shapes():
    """modular_kernel._allocate_buffers: common M x topk x max(I, H) + workspace2 M x topk x max(2I, H)."""
    ck = moe_checkpoint(experts=128, top_k=8)
    moe, h = ck.arch.moe, ck.arch.hidden_size
    for tp, tokens in ((1, 2048), (2, 8192)):
        t = dict(memory.terms(load_engine_memory("vllm"), _inputs(ck, tokens=tokens, tp=tp)))
        i = moe.expert_intermediate_size / tp
        assert t["moe_workspace"].value == pytest.approx(tokens * 8 * (max(i, h) + max(2 * i, h)) * 2)
    dense = dict(memory.terms(load_engine_memory("vllm"), _inputs(dense_checkpoint())))
    assert "moe_workspace" not in dense


def test_vllm_sampler_and_graphs_follow_max_num_seqs_and_eager():
    ck = dense_checkpoint()
    eng = load_engine_memory("vllm")
    few = dict(memory.terms(eng, _inputs(ck, batch=2)))
    many = dict(memory.terms(eng, _inputs(ck, batch=256)))
    assert many["sampler"].value == pytest.approx(few["sampler"].value * 128)
    assert many["cuda_graphs"].inputs["graphs"] == 51 and few["cuda_graphs"].inputs["graphs"] == 3
    eager = dict(memory.terms(eng, _inputs(ck, graphs=False)))
    assert "cuda_graphs" not in eager


def test_vllm_loads_the_mtp_head_only_when_it_drafts_with_it():
    ck = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    wm = weights.build(ck, explanation())
    mtp = wm.bytes_of("mtp")
    assert mtp > 0
    eng = load_engine_memory("vllm")
    plain = dict(memory.terms(eng, _inputs(ck)))["weights"].value
    spec = memory.SpecMemory("mtp", 2, 0.0, "")
    drafting = dict(memory.terms(eng, _inputs(ck, spec=spec)))["weights"].value
    assert drafting - plain == pytest.approx(mtp)


def test_fastllm_holds_nvfp4_as_12_byte_blocks_of_16():
    """model.cpp: NVFP4_BLOCK_16 keeps 8 packed bytes + a float scale per 16 weights (0.75 B each)."""
    ck = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    wm = weights.build(ck, explanation())
    nvfp4 = [p for p in wm.parts if "NVFP4" in p.scheme]
    assert nvfp4
    x = _inputs(ck, tp=2)
    fast = dict(memory.terms(load_engine_memory("fastllm"), x))["weights"].value
    vllm = dict(memory.terms(load_engine_memory("vllm"), x))["weights"].value
    delta = sum(p.params * 0.75 - p.stored_bytes for p in nvfp4) / 2
    mtp = wm.bytes_of("mtp") / 2             # vLLM leaves the MTP head out when not drafting; FastLLM loads it
    assert fast - vllm == pytest.approx(delta + mtp)


def test_fastllm_runtime_headroom_reserve_and_snapshots_follow_autowarmup():
    ck = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    eng = load_engine_memory("fastllm")
    state = 40e6
    spec = memory.SpecMemory("dflash", 7, 1e9, "d", 0.5e9, "q", state)
    for tp, slots in ((2, 4 * 8), (1, max(4, 4 * 8))):
        t = dict(memory.terms(eng, _inputs(ck, share=0.95, tp=tp, batch=4, spec=spec, vram=22 * GIB)))
        assert t["spec_snapshots"].value == pytest.approx(slots * state)
        # min(max(512 MiB, 1 % of VRAM), 2 GiB, available / 4); 0 when nothing is left (one GPU: the 27B
        # weights alone exceed 22 GiB x 0.95)
        assert t["runtime_headroom"].value == pytest.approx(512 * MIB if tp == 2 else 0.0)
        assert t["runtime_reserve"].value == pytest.approx(4 * ck.arch.vocab_size * 6 + 4 * 4 + 64 * MIB)
        assert t["draft_weights"].value == pytest.approx(1.5e9 / tp)
    one = memory.SpecMemory("dflash", 7, 0, "", 0, "", state)
    t1 = dict(memory.terms(eng, _inputs(ck, share=0.95, tp=1, batch=1, spec=one, vram=22 * GIB)))
    assert t1["spec_snapshots"].value == pytest.approx(8 * state)       # min(batch, 4) x (drafts + 1)


def test_fastllm_dflash_keeps_the_embedding_on_the_host():
    ck = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    eng = load_engine_memory("fastllm")
    embed = weights.build(ck, explanation()).bytes_of("embed")
    plain = dict(memory.terms(eng, _inputs(ck, tp=2)))["weights"]
    dflash = dict(memory.terms(eng, _inputs(ck, tp=2, spec=memory.SpecMemory("dflash", 7, 0, ""))))["weights"]
    assert plain.value - dflash.value == pytest.approx(embed / 2)
    assert dflash.inputs["on_host"] == pytest.approx(embed) and "util.py:697-706" in dflash.source


def test_fastllm_pages_hold_back_one_more_layer():
    ck = dense_checkpoint()
    t = dict(memory.terms(load_engine_memory("fastllm"), _inputs(ck, kv_layers=16)))
    d = t["delayed_pages"]
    assert d.value == pytest.approx(d.inputs["available"] / 17)


def test_sglang_budget_is_the_share_of_what_was_free_before_the_weights():
    ck = dense_checkpoint()
    eng = load_engine_memory("sglang")
    for tp in (1, 4):
        b = memory.budget(eng, _inputs(ck, share=0.85, tp=tp, vram=80 * GIB))
        ctx_gib = 0.5 + (0.25 if tp > 1 else 0.0)
        w = weights.build(ck, explanation()).resident_bytes(tp)
        assert b.pool_bytes.value == pytest.approx(80 * GIB * 0.85 - w - ctx_gib * GIB * 0.85)


# ---------------------------------------------------------------- the plan shows every term
@pytest.mark.parametrize("engine", ENGINES)
def test_plan_json_traces_the_pool_term_by_term(capsys, engine):
    doc = _plan(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090", "--gpus", "2", "--engine", engine)
    der = doc["derivations"]
    terms = {k: v for k, v in der.items() if k.startswith("memory.") and k != "memory.budget"}
    assert "memory.weights" in terms and all(v["source"] for v in terms.values())
    pool = der["kv_pool_bytes"]["value"]
    assert der["memory.budget"]["value"] - sum(v["value"] for v in terms.values()) == pytest.approx(pool, rel=1e-4)
    assert doc["predictions"]["weights_gib_per_gpu"] == pytest.approx(terms["memory.weights"]["value"] / GIB,
                                                                      rel=1e-4)


def test_the_fastllm_dflash_case_of_the_issue(capsys):
    """27B hybrid NVFP4 on 2 x 22 GB RTX 2080 Ti, TP 2, fp8 KV, share 0.95, chunk 4096, DFlash at 4 streams:
    the draft, its quantized head copy, the rollback snapshots of 4 x (k + 1) states and the 12-byte NVFP4
    blocks all come out of the pool (the old model counted none of them: 651,092 tokens)."""
    doc = _plan(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-2080-ti", "--gpus", "2", "--engine",
                "fastllm", "--vram", "22", "--tp", "2", "--kv-cache-dtype", "fp8_e4m3", "--memory-share", "0.95",
                "--chunked-prefill", "4096", "--spec-method", "dflash", "--max-batch", "4", "--draft-tokens", "7")
    der = doc["derivations"]
    for term in ("weights", "draft_weights", "spec_snapshots", "runtime_headroom", "runtime_reserve", "warmup_cache",
                 "delayed_pages"):
        assert f"memory.{term}" in der, term
    snap = der["memory.spec_snapshots"]["inputs"]
    assert snap["slots"] == 4 * 8
    tokens = doc["predictions"]["kv_pool_tokens"]["fp8_e4m3"]
    assert tokens < 651_092 * 0.7
    assert doc["recommendation"]["env"] == {"FASTLLM_DRAFT_QUANT": "nvfp4_head"}


def test_context_spec_memory_uses_the_engine_state_dtype():
    """FastLLM's snapshot is the linear state in its compute dtype (FP16) with the full conv window."""
    ck = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    eng = load_engine_memory("fastllm")
    ctx = context.build(ck, explanation(), rtx3090(), gpus=2, engine=eng,
                        overrides=Overrides(spec_method="dflash", tp=2))
    from advisor.cost.context import Settings

    s = Settings(eng.kv_dtype("fp8_e4m3"), 4, 0.95, 4096, 2, 7, False)
    sm = ctx.spec_memory(s)
    info = ck.arch.linear_state
    kd, vd = info.n_groups * info.state_size // 2, info.num_heads * info.head_dim // 2
    per_layer = (2 * kd + vd) * info.conv_kernel * 2 + info.num_heads // 2 * info.head_dim * info.state_size * 2
    assert sm.snapshot_bytes == pytest.approx(info.layers * per_layer)
