"""ShardGrouper fills each module's dict in C where every name of a shard is "module.suffix" (a defaultdict and
setitem mapped over the columns), and sends the tensors of modules begun in an earlier shard through its
per-tensor loop. Compared here with the loop alone on random checkpoints: names in header order or shuffled,
modules split over shards, a module's tensors not adjacent, repeats across shards (refused, or kept apart for
a hub snapshot), odd names in a later shard; the same modules, order, shards, renamed keys, or message."""

from __future__ import annotations

import random

import pytest

from advisor.checkpoint.safetensors_header import HeaderColumns
from advisor.checkpoint.shards import ShardGrouper
from advisor.errors import BadInput

_SUFFIXES = ["weight", "weight_scale", "weight_scale_2", "input_scale", "bias", "k_scale", "v_scale", "qweight"]


def _columns(path: str, names: list[str]) -> HeaderColumns:
    n = len(names)
    return HeaderColumns(path, 100, 108 + 4 * n, {}, names, ["F32"] * n, [(1,)] * n,
                         list(range(0, 4 * n, 4)), list(range(4, 4 * n + 4, 4)))


def _checkpoint(rng: random.Random) -> list[list[str]]:
    mods = [f"model.layers.{rng.randint(0, 3)}.{rng.choice(['mlp', 'self_attn', 'mlp.experts.7'])}.m{i}"
            for i in range(rng.randint(1, 14))]
    names = [f"{m}.{s}" for m in mods for s in rng.sample(_SUFFIXES, rng.randint(1, 4))]
    if rng.random() < 0.3:
        rng.shuffle(names)                      # a module's tensors not adjacent
    elif rng.random() < 0.3 and len(names) > 2:
        i = rng.randrange(len(names) - 1)
        names[i], names[i + 1] = names[i + 1], names[i]
    cuts = sorted(rng.sample(range(1, len(names)), min(rng.randint(0, 4), len(names) - 1)))
    shards = [names[a:b] for a, b in zip([0, *cuts], [*cuts, len(names)])]
    for _ in range(rng.choice((0, 0, 0, 1, 2))):       # a name again in another shard, perhaps the same
        rng.choice(shards).append(rng.choice(names))
    if rng.random() < 0.15:
        rng.choice(shards).append(rng.choice(mods) + "_bias")          # an odd name: that shard waits for finish()
    return [list(dict.fromkeys(s)) for s in shards]                    # unique within a shard, as a header is


def _group(shards: list[list[str]], *, loop_only: bool, refuse: bool):
    grouper = ShardGrouper(folder="f", index=False, refuse_duplicates=refuse)
    if loop_only:
        grouper._group = grouper._group_loop            # type: ignore[method-assign]
    try:
        for i, names in enumerate(shards):
            grouper.add(_columns(f"s{i}.safetensors", names), f"s{i}.safetensors", local=refuse)
        got = grouper.finish()
    except BadInput as err:
        return "refused", str(err)
    return ([(m, [(k, tuple(e)) for k, e in t.items()]) for m, t in got.tensors.items()], got.paths,
            [(m, list(s.items())) for m, s in got.shards.items()], list(grouper.renamed.items()))


@pytest.mark.parametrize("refuse", [True, False])
def test_grouping_in_c_gives_what_the_loop_gives(refuse):
    rng = random.Random(4242 + refuse)
    refused = split = 0
    for _ in range(600):
        shards = _checkpoint(rng)
        fast = _group(shards, loop_only=False, refuse=refuse)
        assert fast == _group(shards, loop_only=True, refuse=refuse), shards
        refused += fast[0] == "refused"
        split += fast[0] != "refused" and bool(fast[2])
    assert split > 100 and (refused > 20) is refuse


def test_a_repeat_is_refused_at_the_first_repeated_name_in_header_order():
    # two repeats in the second shard, in modules begun in the first: the loop names the first in header order
    shards = [["a.weight", "b.weight", "a.bias"], ["c.weight", "b.weight", "a.bias"]]
    assert _group(shards, loop_only=False, refuse=True) == \
        ("refused", "f: tensor 'b.weight' is in both s0.safetensors and s1.safetensors: two copies of the weights? "
                    "inspect one file, or add a model.safetensors.index.json")
