"""GDN / Mamba per-request recurrent state: bytes per GPU, pool share, concurrency, decode traffic.

Hand-computed numbers follow vLLM 0.33.0 MambaStateShapeCalculator / _align_hybrid_block_size and
SGLang 0.5.23 _handle_max_mamba_cache (the sources cited in profiles/engine_memory/).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cost_builders import rtx3090

from advisor.checkpoint.arch import arch_info
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from advisor.cost import context as ctxmod
from advisor.cost import recurrent_state
from advisor.cost.context import Settings
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.kv import layout
from advisor.cost.overrides import Overrides
from advisor.cost.plan import make_plan
from advisor.cost.workload import Workload
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"
VLLM = load_engine_memory("vllm")
SGLANG = load_engine_memory("sglang")


@pytest.fixture(scope="module")
def qwen36():
    return inspect_checkpoint(DEMO)


def tiny_nemotron_h(**extra) -> dict:
    """A tiny Nemotron-H (Mamba2 hybrid): 3 Mamba2 layers, 1 attention layer, 2 MLPs."""
    return {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hidden_size": 256,
            "hybrid_override_pattern": "M*M-M-", "num_hidden_layers": 6, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1024, "intermediate_size": 512,
            "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 32, "conv_kernel": 4,
            **extra}


def state(rules, arch, tp=1, kv_bytes=None, **kw):
    attn = layout(arch, tp).bytes_per_token_layer(VLLM.kv_dtype("bfloat16")) if kv_bytes is None else kv_bytes
    return recurrent_state.build(rules, arch, tp=tp, attn_token_bytes=attn, **kw)


# ---------------------------------------------------------------- shapes and bytes
def test_arch_reads_the_gdn_state_fields(qwen36):
    info = qwen36.arch.linear_state
    assert (info.kind, info.layers, info.conv_kernel) == ("gdn", 48, 4)
    assert (info.n_groups, info.state_size, info.num_heads, info.head_dim) == (16, 128, 48, 128)
    assert info.intermediate_size == 48 * 128 and info.ssm_dtype == "float32"


def test_qwen36_state_on_vllm_by_hand(qwen36):
    st = state(VLLM.recurrent, qwen36.arch, cc=(8, 6))
    # conv: (4 - 1) rows x (2 x 16 x 128 + 48 x 128 = 10240) channels x 2 B (BF16 model dtype)
    assert st.conv_bytes == 3 * 10240 * 2 == 61_440
    # recurrent: 48 value heads x 128 x 128 x 4 B (the config's mamba_ssm_dtype float32)
    assert st.ssm_bytes == 48 * 128 * 128 * 4 == 3_145_728
    assert st.state_bytes == 48 * (61_440 + 3_145_728) == 153_944_064
    # BF16 KV: 2 x 4 kv heads x 256 x 2 B = 4096 B/token/layer; block = 16 x ceil(3207168 / (16 x 4096)) = 784
    assert st.kv_block_tokens == 784 and st.page_bytes == 784 * 4096 == 3_211_264
    # prefix caching (align mode) keeps 2 states per request; no FlashInfer GDN prefill checkpoint on SM86
    assert st.slots == 2
    assert st.request_bytes == 48 * 3_211_264 * 2 == 308_281_344
    assert st.step_bytes(1) == 2 * 153_944_064            # load + store
    assert st.derived.value == st.request_bytes and "mamba_utils.py" in st.derived.source


def test_draft_tokens_and_hopper_add_state_slots(qwen36):
    hopper = state(VLLM.recurrent, qwen36.arch, cc=(9, 0))
    assert hopper.slots == 3                                 # + the FlashInfer GDN prefill checkpoint
    assert state(VLLM.recurrent, qwen36.arch, cc=(12, 0)).slots == 3     # key head dim 128 on SM120
    small_keys = replace(qwen36.arch, linear_state=replace(qwen36.arch.linear_state, state_size=64))
    assert state(VLLM.recurrent, small_keys, cc=(12, 0)).slots == 2     # FlashInfer GDN prefill needs 128
    assert state(VLLM.recurrent, small_keys, cc=(9, 0)).slots == 3
    spec = state(VLLM.recurrent, qwen36.arch, cc=(8, 6), draft_tokens=2)
    assert spec.slots == 4                                   # + one state per draft token
    assert spec.conv_bytes == (3 + 2) * 10240 * 2            # conv window grows by the draft rows
    assert spec.step_bytes(3) == 4 * spec.state_bytes        # one load + a store per verified position


def test_tp_splits_heads_and_conv_channels(qwen36):
    one, two = state(VLLM.recurrent, qwen36.arch, tp=1), state(VLLM.recurrent, qwen36.arch, tp=2)
    assert two.conv_bytes == 3 * 5120 * 2 and two.ssm_bytes == 24 * 128 * 128 * 4
    assert two.state_bytes * 2 == one.state_bytes
    # KV per token halves too (2 KV heads per rank), so the block stays 784 tokens and the page halves
    assert two.kv_block_tokens == 784 and two.page_bytes == 784 * 2048


def test_tiny_mamba2_by_hand():
    arch = arch_info(tiny_nemotron_h())
    info = arch.linear_state
    assert (info.kind, info.layers, info.n_groups, info.state_size) == ("mamba2", 3, 2, 32)
    st = state(VLLM.recurrent, arch)
    # conv_dim = 8 x 16 + 2 x 2 x 32 = 256; conv = 3 x 256 x 2 B; recurrent = 8 x 16 x 32 x 4 B (Nemotron-H: float32)
    assert (st.conv_bytes, st.ssm_bytes) == (1536, 16384)
    assert st.dtypes.ssm == "float32"
    # KV 2 x 2 x 32 x 2 = 256 B/token/layer: block 16 x ceil(17920 / 4096) = 80, page 20480
    assert (st.kv_block_tokens, st.page_bytes) == (80, 20480)
    assert st.slots == 3                                     # Mamba2 mixers always export a prefill checkpoint
    assert st.request_bytes == 3 * 20480 * 3
    # TP 4 > n_groups 2: each rank holds the groups its heads need (n_groups padded to 4)
    tp4 = state(VLLM.recurrent, arch, tp=4)
    assert tp4.conv_bytes == 3 * ((128 + 2 * 4 * 32) // 4) * 2 and tp4.ssm_bytes == 2 * 16 * 32 * 4


def test_kimi_linear_kda_state():
    cfg = {"model_type": "kimi_linear", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 1024,
           "linear_attn_config": {"kda_layers": [1, 2, 3], "num_heads": 4, "head_dim": 32,
                                  "short_conv_kernel_size": 4}}
    st = state(VLLM.recurrent, arch_info(cfg))
    # vLLM kda_state_shape: conv (3, 4 x 32 x 3), recurrent (4, 32, 32); 'auto' recurrent dtype is float32
    assert (st.layers, st.conv_bytes, st.ssm_bytes) == (3, 3 * 384 * 2, 4 * 32 * 32 * 4)


def test_ssm_dtype_follows_config_then_engine():
    cfg = tiny_nemotron_h(mamba_ssm_cache_dtype="bfloat16")
    assert state(VLLM.recurrent, arch_info(cfg)).ssm_bytes == 8 * 16 * 32 * 2
    # a Falcon-style Mamba2 hybrid without the field: vLLM 'auto' follows the conv (model) dtype,
    # SGLang defaults the recurrent state to float32
    falcon = arch_info({**tiny_nemotron_h(), "model_type": "falcon_h1"})
    assert state(VLLM.recurrent, falcon).dtypes.ssm == "bfloat16"
    assert state(SGLANG.recurrent, falcon).dtypes.ssm == "float32"
    assert state(VLLM.recurrent, falcon, model_dtype="float16").dtypes.conv == "float16"


def test_sglang_split_pool_by_hand(qwen36):
    st = state(SGLANG.recurrent, qwen36.arch, architecture="Qwen3_5ForConditionalGeneration")
    assert st.pool == "split" and st.kv_block_tokens == 1
    assert st.slots == st.max_slots_per_request == 5         # 3 with the radix cache + 2 extra_buffer
    pool = 40 * 2**30
    reserve, cap = st.split_reserve(pool, 64)
    k = int((pool * 0.9 / 1.9 - st.state_bytes) // st.state_bytes)
    assert reserve == (k + 1) * st.state_bytes and cap == k // 5


def test_no_state_without_linear_layers_or_rules(qwen36):
    assert state(VLLM.recurrent, replace(qwen36.arch, linear_state=None)) is None
    assert state({}, qwen36.arch) is None


# ---------------------------------------------------------------- pool, concurrency, decode
@pytest.fixture(scope="module")
def contexts(qwen36):
    gpu = get_gpu("rtx-5090")
    ex = explain(qwen36, gpu, engine="vllm")
    stateless = replace(qwen36, arch=replace(qwen36.arch, linear_state=None))

    def build(ck):
        return ctxmod.build(ck, ex, gpu, gpus=1, engine=VLLM, overrides=Overrides())
    return build(qwen36), build(stateless)


def test_state_lowers_concurrency_pool_and_decode_speed(contexts):
    with_state, without = contexts
    kv = VLLM.kv_dtype("fp8")
    s = Settings(kv, 8, 0.92, 2048, 1, 0, True)
    st = with_state.recurrent(s)
    assert without.recurrent(s) is None
    assert with_state.max_concurrency(s, 32768) < without.max_concurrency(s, 32768)
    assert with_state.kv_pool_bytes(s, 8) == pytest.approx(without.kv_pool_bytes(s, 8) - 8 * st.request_bytes)
    assert with_state.pool_tokens(s) < without.pool_tokens(s)
    assert with_state.max_context(s, 8) % st.kv_block_tokens == 0
    d_with, d_without = with_state.decode(s, 32, 2048), without.decode(s, 32, 2048)
    assert d_with.bytes_read == pytest.approx(d_without.bytes_read + 32 * st.step_bytes(1))
    assert d_with.seconds > d_without.seconds


def test_tuner_batch_fits_pool_with_state(qwen36):
    gpu = get_gpu("rtx-5090")
    ex = explain(qwen36, gpu, engine="vllm")
    w = Workload("many", "", 512, 1024, 256, 8192, "throughput")
    p = make_plan(qwen36, ex, gpu, workload=w, engine_memory=VLLM)
    st = p.predictions.recurrent_state
    assert st is not None and p.recommendation.max_batch <= p.predictions.max_concurrency_at_context
    kv_left = p.derivations["kv_pool_bytes_after_state"].value
    per_token = p.derivations["kv_bytes_per_token"].value
    # the recommended batch holds its states and its KV at the workload's context
    assert kv_left >= p.recommendation.max_batch * 8192 * per_token * 0.99
    stateless = replace(qwen36, arch=replace(qwen36.arch, linear_state=None))
    q = make_plan(stateless, ex, gpu, workload=w, engine_memory=VLLM)
    assert q.predictions.max_concurrency_at_context > p.predictions.max_concurrency_at_context


def test_cost_model_without_engine_rules_warns(qwen36):
    gpu = rtx3090()
    ex = explain(qwen36, gpu, engine="vllm")
    eng = replace(VLLM, recurrent={})
    ctx = ctxmod.build(qwen36, ex, gpu, gpus=1, engine=eng, overrides=Overrides())
    assert any("recurrent_state" in w for w in ctx.warnings)


# ---------------------------------------------------------------- plan CLI
def test_plan_cli_shows_the_state_with_its_source(capsys, monkeypatch):
    assert main(["plan", DEMO, "--gpu", "rtx-3090", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    st = doc["predictions"]["recurrent_state"]
    assert (st["kind"], st["layers"], st["ssm_dtype"], st["pool"]) == ("gdn", 48, "float32", "shared")
    d = doc["derivations"]["recurrent_state_bytes_per_request"]
    assert d["value"] == pytest.approx(st["bytes_per_request"], rel=1e-4)
    assert "vllm/model_executor/layers/mamba/mamba_utils.py" in d["source"]
    assert "@0.33.0" in d["source"] and d["inputs"]["conv_dim"] == 10240
    assert doc["derivations"]["recurrent_state_step_bytes"]["source"]
    assert doc["derivations"]["decode_tok_s"]["inputs"]["recurrent_state_bytes"] > 0
    monkeypatch.setenv("COLUMNS", "400")          # keep the derivation table's rows on one line
    assert main(["plan", DEMO, "--gpu", "rtx-3090"]) == 0
    text = capsys.readouterr().out
    assert "recurrent state" in text and "48 GDN layers" in text
    row = next(line for line in text.splitlines() if "recurrent_state_bytes_per_request" in line)
    assert "MambaStateShapeCalculator" in row


def test_plan_cli_sglang_caps_running_requests(capsys):
    assert main(["plan", DEMO, "--gpu", "h100-sxm", "--engine", "sglang", "--workload", "batch", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    st = doc["predictions"]["recurrent_state"]
    assert st["pool"] == "split" and st["max_requests"] > 0
    assert doc["recommendation"]["max_batch"] <= st["max_requests"]
    assert "kv_cache_configurator.py" in doc["derivations"]["kv_pool_bytes_after_state"]["source"]


def test_non_hybrid_plan_has_no_state(capsys):
    assert main(["plan", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predictions"]["recurrent_state"] is None
    assert "recurrent_state_bytes_per_request" not in doc["derivations"]


def test_draft_tokens_keep_the_context_fitting(capsys):
    # 24 GiB RTX 3090: each MTP draft token adds a state slot per GDN layer (~147 MiB per request)
    assert main(["plan", DEMO, "--gpu", "rtx-3090", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predictions"]["max_context_per_request"] >= doc["workload"]["context_tokens"]
    crowded = [o for o in doc["tradeoffs"] if o["knob"] == "draft_tokens" and "linear-attention state" in o["note"]]
    assert crowded and not any(o["chosen"] for o in crowded)
    assert doc["recommendation"]["draft_tokens"] < min(int(o["value"]) for o in crowded)
    assert doc["predictions"]["recurrent_state"]["slots"] == 2 + doc["recommendation"]["draft_tokens"]
