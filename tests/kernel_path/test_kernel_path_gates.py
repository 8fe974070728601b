"""Gate conditions: the registry in advisor.kernel_path.gates covers the rule-file schema's condition keys,
and each condition checks and describes itself in the words explain prints."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from advisor.kernel_path.gates import CONDITIONS, Context, LayerFacts, describe, gate_failure, gates_pass
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rules import GATE_SCOPE_KEYS, Gate
from advisor.kernel_path.rule_files import load_rules


def ctx(sm=89, options=InstallOptions(), tp=1, **layer) -> Context:
    rules, _ = load_rules("vllm")
    facts = LayerFacts(**{"layer_class": "linear", "scheme": "W4A16-NVFP4", **layer})
    return Context(sm=sm, gpu_name="test GPU", rules=rules, options=options, tp=tp, layer=facts)


def gate(**keys) -> Gate:
    return Gate.model_validate(keys)


def test_every_condition_key_of_the_schema_has_one_check_and_description():
    assert list(CONDITIONS) and set(CONDITIONS) == set(Gate.condition_keys())
    assert not GATE_SCOPE_KEYS & set(CONDITIONS)


def test_a_gate_holds_exactly_one_known_condition():
    with pytest.raises(ValidationError, match=r"a gate holds exactly one condition, got \['sm_min', 'sm_max'\]"):
        gate(sm_min=75, sm_max=90)
    with pytest.raises(ValidationError, match="a gate holds exactly one condition, got none"):
        gate(why="scope only", if_sm_min=80)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        gate(sm_minimum=75)


def test_failure_reason_carries_the_gates_why():
    g = gate(sm_min=90, why="wgmma")
    assert gate_failure(g, ctx(sm=89)) == "needs sm_90 or newer; this GPU is sm_89 — wgmma"
    assert gate_failure(g, ctx(sm=90)) is None
    assert gate_failure(gate(sm_min=90), ctx(sm=89)) == "needs sm_90 or newer; this GPU is sm_89"


def test_out_of_scope_gates_pass():
    g = gate(never="FP8 KV only", if_kv_dtype_in=["fp8"])
    assert gate_failure(g, ctx(scheme="bfloat16")) is None
    assert gate_failure(g, ctx(scheme="fp8")) == "FP8 KV only"


def test_first_failing_gate_decides():
    gates = [gate(sm_min=80), gate(tp_max=1), gate(sm_max=90)]
    assert gates_pass(gates, ctx(sm=89, tp=2)) == "only with tensor parallel <= 1 (here: 2)"
    assert gates_pass(gates, ctx(sm=89, tp=1)) is None


@pytest.mark.parametrize("keys, facts, reason", [
    ({"family_not_in": [12]}, {"sm": 120}, "not used on sm_12x (this GPU: sm_120)"),
    ({"env_in": {"VLLM_USE_DEEP_GEMM": ["0"]}}, {}, "needs VLLM_USE_DEEP_GEMM=0 (now: 1)"),
    ({"env_not_in": {"VLLM_MARLIN_INPUT_DTYPE": [""]}}, {}, "disabled by VLLM_MARLIN_INPUT_DTYPE=unset (now: unset)"),
    ({"flag_in": {"linear_backend": ["marlin", "cutlass"]}}, {},
     "needs --linear-backend marlin or cutlass (now: auto)"),
    ({"flag_not_in": {"linear_backend": ["auto"]}}, {}, "not used with --linear-backend auto"),
    ({"group_size_in": [128]}, {"group_size": None}, "needs group size 128 (-1 = per channel; here: -1)"),
    ({"shape_multiple_any": [{"n": 128, "k": 64}, {"n": 64, "k": 128}]}, {"shape": (96, 64)},
     "needs N%128 and K%64 or N%64 and K%128 == 0 (this layer on one GPU: N=96, K=64)"),
    ({"config_in": {"method": ["fp8", ""]}}, {"load": (("method", "awq"),)}, "needs method fp8 or (none) (here: awq)"),
    ({"act_format_in": ["nvfp4"]}, {}, "needs nvfp4 activations (here: 16-bit, unquantized)"),
])
def test_conditions_say_what_they_need_and_what_is_here(keys, facts, reason):
    sm = facts.pop("sm", 89)
    assert gate_failure(gate(**keys), ctx(sm=sm, **facts)) == reason


@pytest.mark.parametrize("keys, described", [
    ({"sm_min": 80}, "sm_89 allowed (sm min 80)"),
    ({"family_in": [8, 9]}, "sm_89 allowed (family in [8, 9])"),
    ({"requires": "flashinfer"}, "FlashInfer available"),
    ({"model_exclusions": [{"model_type": "gpt_oss"}, {"model_type": "qwen3"}]},
     "model exclusions ['gpt_oss', 'qwen3']"),
    ({"shape_multiple": {"n": 64}}, "shape multiple {'n': 64}"),
    ({"tp_max": 4}, "tp max 4"),
])
def test_a_passed_gate_describes_itself_as_explain_prints_it(keys, described):
    assert describe(gate(**keys), ctx()) == described
