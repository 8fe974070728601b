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
