"""name_columns reads every module name's pattern, layer, expert number and natural-order key in one regex
split: on random names (layer words, expert containers, numbers in and out of components, zero-padded and long
runs, and names that must take the per-name functions: a "*", a NUL, a newline, non-ASCII digits) each column
equals what the per-name functions give, and its keys order the names as natural_order does."""

from __future__ import annotations

import random

import pytest

from advisor.checkpoint import name_columns as nc
from advisor.checkpoint.roles import group_name, layer_index

_PARTS = ["model", "layers", "h", "blocks", "block", "decoder_layers", "mlp", "experts", "shared_experts", "w1",
          "gate_proj", "self_attn", "q_proj", "lm_head", "embed_tokens", "mtp", "fc2", "x7y", "layersx", "hh", ""]
_NUMBERS = ["0", "1", "7", "10", "17", "007", "255", "1000", "99999999999999999999"]


def _name(rng: random.Random, odd: bool) -> str:
    comps = []
    for _ in range(rng.randint(1, 7)):
        comps.append(rng.choice(_NUMBERS) if rng.random() < 0.35 else rng.choice(_PARTS))
    name = ".".join(comps)
    if odd and rng.random() < 0.1:
        name = name.replace(".", rng.choice([".*.", "\n", "\x00", ".\u0663."]), 1)
    return name


@pytest.mark.parametrize("chunk", [1, 5, 2048])
@pytest.mark.parametrize("odd", [False, True])
def test_name_columns_equal_the_per_name_functions(monkeypatch, chunk, odd):
    monkeypatch.setattr(nc, "_CHUNK", chunk)
    rng = random.Random(chunk * 2 + odd)
    for _ in range(300):
        names = [_name(rng, odd) for _ in range(rng.randint(0, 40))]
        cols = nc.name_columns(names)
        assert cols.patterns == [group_name(n) for n in names]
        assert cols.layers == [layer_index(n) for n in names]
        assert cols.experts == [nc.expert_number(n) for n in names]
        assert cols.order == sorted(range(len(names)), key=lambda i: nc.natural_order(names[i]))
        # one string per distinct pattern and expert number (the rows keep them)
        assert len({id(p) for p in cols.patterns}) == len(set(cols.patterns))
        assert len({id(e) for e in cols.experts}) == len(set(cols.experts))


def test_a_layer_and_an_expert_by_their_containers():
    names = ["model.layers.3.mlp.experts.12.w1", "transformer.h.07.attn", "blocks.2.block.5", "x.layers.4",
             "m.shared_experts.3.up", "m.experts.3", "layers.9.experts.1.x.experts.2.y", "m.layersx.1.y"]
    cols = nc.name_columns(names)
    assert cols.layers == [3, 7, 2, 4, None, None, 9, None]
    assert cols.experts == ["12", "", "", "", "3", "", "1", ""]
    assert cols.patterns[0] == "model.layers.*.mlp.experts.*.w1"


def test_experts_per_layer_counts_the_same_from_the_headers_numbers_as_from_the_names():
    # rows from headers carry their expert number as name_columns read it; rows without one are read by name
    from dataclasses import replace

    from advisor.checkpoint.modules import ModuleRow, experts_per_layer
    from advisor.checkpoint.schemes import BF16, NO_ACT

    rng = random.Random(3)
    seen = set()
    for _ in range(400):
        rows = []
        for _ in range(rng.randint(0, 30)):
            layer = rng.choice([None, 0, 1, 2])
            name = f"model.layers.{layer}.mlp.experts.{rng.choice(['0', '1', '07', '7', '12'])}.w1" \
                if rng.random() < 0.8 else f"model.layers.{layer}.mlp.experts.w1"
            rows.append(ModuleRow(name, rng.choice(["expert", "expert", "mlp_down"]), BF16, NO_ACT,
                                  rng.choice([1, 1, 1, 4, 8]), 1, 1, None, layer))
        by_name = experts_per_layer(rows)
        numbers = nc.name_columns([m.name for m in rows]).experts
        assert experts_per_layer([replace(m, expert=e) for m, e in zip(rows, numbers)]) == by_name
        seen.add(by_name)
    assert len(seen) >= 5          # stacks, "07" and "7" as one, pruned layers: the counts vary
