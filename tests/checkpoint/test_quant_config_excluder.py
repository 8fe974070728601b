"""ModelOpt exclude_modules, prepared once per list (quant_modelopt._excluder), decides exactly as the
per-pattern fnmatch loop of vllm modelopt.py is_layer_excluded: the name itself, a parent of it, or a
wildcard match."""

from __future__ import annotations

import fnmatch

import pytest

from advisor.checkpoint.quant_modelopt import _excluder

NAMES = ["lm_head", "model.embed_tokens", "model.layers.0.mlp.gate", "model.layers.0.mlp.gate_proj",
         "model.layers.10.mlp.gate", "model.layers.1.self_attn.q_proj", "mtp.layers.0.mlp.experts.3.up_proj",
         "mtp", "visual.blocks.2.attn.qkv", "model.layers.0", "model.layers.0x", "a[1].b", "a1.b"]
PATTERNS = [[], ["lm_head"], ["model.layers.0"], ["model.layers.0.mlp.gate"], ["mtp*"], ["mtp.layers.0*"],
            ["*.mlp.gate"], ["model.layers.?.mlp.gate"], ["model.layers.[01].*"], ["a[1].b"], ["a[1]"],
            ["[bad"], [""], ["visual"], ["*self_attn*", "lm_head", 3, None],
            [f"model.layers.{i}.mlp.gate" for i in range(48)]]


def _reference(name, patterns):
    return any(isinstance(p, str) and (p == name or name.startswith(p + ".") or fnmatch.fnmatchcase(name, p))
               for p in patterns)


@pytest.mark.parametrize("patterns", PATTERNS, ids=str)
def test_excluder_decides_as_the_fnmatch_loop(patterns):
    excluded = _excluder(patterns)
    got = {n: excluded(n) for n in NAMES}
    assert got == {n: _reference(n, patterns) for n in NAMES}


def test_a_literal_pattern_is_not_a_prefix_of_a_longer_name():
    excluded = _excluder(["model.layers.0.mlp.gate"])
    assert excluded("model.layers.0.mlp.gate") and not excluded("model.layers.0.mlp.gate_proj")
    assert excluded("model.layers.0.mlp.gate.weight")


@pytest.mark.parametrize("patterns", PATTERNS, ids=str)
def test_a_plan_asked_once_per_name_pattern_only_where_no_exclude_can_tell_indexes_apart(patterns):
    """modules_from_headers asks a plan marked by_pattern once per group pattern and role: then every name of
    one pattern must be excluded alike (here, names that differ only in their index runs)."""
    from advisor.checkpoint.quant_config import build_plan
    from advisor.checkpoint.roles import group_name

    plan = build_plan({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                               "ignore": patterns}}, None)
    digits = any(isinstance(p, str) and any(c.isdigit() or c in "?[" for c in p) for p in patterns)
    assert plan.by_pattern is not digits
    excluded = _excluder(patterns)
    names = [f"model.layers.{i}.mlp.{m}" for i in (0, 1, 2, 10, 47) for m in ("gate", "gate_proj")]
    names += [f"mtp.layers.{i}.mlp.experts.{e}.up_proj" for i in (0, 3) for e in (1, 12)]
    by_pattern: dict[str, set] = {}
    for n in names:
        by_pattern.setdefault(group_name(n), set()).add(excluded(n))
    if plan.by_pattern:
        assert all(len(v) == 1 for v in by_pattern.values())


def test_an_exclude_naming_one_layer_keeps_the_plan_asked_per_module():
    from advisor.checkpoint.quant_config import build_plan

    plan = build_plan({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                               "ignore": ["model.layers.1.mlp.gate_proj"]}}, None)
    assert not plan.by_pattern
    assert plan.spec_for("model.layers.1.mlp.gate_proj", "mlp_gate_up") is None
    assert plan.spec_for("model.layers.10.mlp.gate_proj", "mlp_gate_up") is not None
