"""Shards kept as columns (advisor/checkpoint/shards.py): the same modules as grouping whole headers did.

The oracle is the grouping over name-keyed headers that shards.group_shards replaced (issue 23: it kept a
string and an entry per tensor name), run on random checkpoints whose names mix the fast "module.suffix"
form with every odd form split_name handles, spread over shards so modules straddle them.
"""

from __future__ import annotations

import json
import random
import struct

import pytest

from advisor.checkpoint.safetensors_header import read_header, read_header_columns
from advisor.checkpoint.shards import ShardGrouper, header_columns
from advisor.checkpoint.sources import load
from advisor.checkpoint.tensors import _ONE_PART, split_name
from advisor.errors import BadInput


def _oracle(headers):
    """The grouping of stop 33 (tensors.group_tensors at b560395), over (path, {name: entry}) headers."""
    mods, paths, shards = {}, [], {}
    names = {n for _, t in headers for n in t}
    for path, tensors in headers:
        here = {}
        for name, e in tensors.items():
            prefix, _, suffix = name.rpartition(".")
            one = _ONE_PART.get(suffix)
            if prefix and one is not None:
                t = here.get(prefix)
                if t is not None and one not in t:
                    t[one] = e
                    continue
                suffix = one
            else:
                prefix, suffix = split_name(name, names, len(e.shape))
                t = here.get(prefix)
            if t is None:
                t = mods.get(prefix)
                if t is None:
                    t = mods[prefix] = here[prefix] = {}
                    paths.append(path)
                else:
                    while suffix in t:
                        suffix = suffix + "+"
                    t[suffix] = e
                    shards.setdefault(prefix, {})[suffix] = path
                    continue
            while suffix in t:
                suffix = suffix + "+"
            t[suffix] = e
    return mods, paths, shards


# "weight_bias" / "weight_blocks": odd names split against a fast name ("module.weight"), maybe in an earlier shard
_LEAVES = ["weight", "weight_scale", "weight_scale_2", "input_scale", "bias", "A_log", "dt_bias", "k_scale",
           "gate_up_proj_blocks", "gate_up_proj_scales", "e_score_correction_bias", "weight.absmax", "weight_bias",
           "weight_blocks"]


def _write(folder, rng, n_shards):
    """Random names (fast and odd forms, a few bare names and their *_bias / *_blocks companions) over shards."""
    names = []
    for m in range(rng.randint(3, 12)):
        mod = f"model.layers.{rng.randint(0, 3)}.{rng.choice(['mlp', 'self_attn', 'mlp.experts'])}.m{m}"
        names += [f"{mod}.{leaf}" for leaf in rng.sample(_LEAVES, rng.randint(1, 5))]
        if rng.random() < 0.3:
            names += [mod, f"{mod}_bias", f"{mod}_weight_scale"]     # a bare parameter and underscore companions
    names = list(dict.fromkeys(names))
    rng.shuffle(names)
    cuts = sorted(rng.sample(range(1, len(names)), min(n_shards - 1, len(names) - 1)))
    out = []
    for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(names)])):
        hdr, pos = {}, 0
        for n in names[a:b]:
            shape = rng.choice([[4, 4], [4], [2, 4, 4], []])
            size = 4
            for d in shape:
                size *= d
            hdr[n] = {"dtype": "F32", "shape": shape, "data_offsets": [pos, pos + size]}
            pos += size
        body = json.dumps(hdr, separators=(",", ":") if rng.random() < 0.5 else (", ", ": ")).encode()
        path = folder / f"s{i}.safetensors"
        path.write_bytes(struct.pack("<Q", len(body)) + body + bytes(pos))
        out.append(str(path))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_grouping_columns_gives_the_modules_grouping_names_gave(tmp_path, seed):
    rng = random.Random(seed)
    paths = _write(tmp_path, rng, rng.randint(1, 4))
    want_mods, want_paths, want_split = _oracle([(p, read_header(p).tensors) for p in paths])
    grouper = ShardGrouper(folder=str(tmp_path), index=False)
    for p in paths:
        grouper.add(read_header_columns(p), p)
    got = grouper.finish()
    assert list(got.tensors) == list(want_mods) and got.paths == want_paths and got.shards == want_split
    for name, t in want_mods.items():
        # the same suffixes in the same order, each entry the same tensor with its suffix in place of its name
        assert [(k, tuple(e)) for k, e in got.tensors[name].items()] == [(k, (k, *e[1:])) for k, e in t.items()]


def _two_shards(tmp_path, first: list[str], second: list[str]) -> str:
    for i, names in enumerate((first, second)):
        hdr, pos = {}, 0
        for n in names:                  # "x" a bare 2x2 parameter, the rest vectors; offsets in header order
            size = 16 if n == "x" else 8
            hdr[n] = {"dtype": "F32", "shape": [2, 2] if n == "x" else [2], "data_offsets": [pos, pos + size]}
            pos += size
        body = json.dumps(hdr).encode()
        (tmp_path / f"s{i}.safetensors").write_bytes(struct.pack("<Q", len(body)) + body + bytes(pos))
    (tmp_path / "config.json").write_text("{}")
    return str(tmp_path)


def test_a_repeated_name_kept_under_a_renamed_key_is_still_refused(tmp_path):
    # "x_bias" takes x's "bias" key, so the first "x.bias" is kept as "bias+": its copy in the second shard
    # must still be found to be the same tensor
    folder = _two_shards(tmp_path, ["x", "x_bias", "x.bias"], ["x.bias"])
    with pytest.raises(BadInput, match=r"'x.bias' is in both s0.safetensors and s1.safetensors: two copies"):
        load(folder)


@pytest.mark.parametrize("second", [["x.weight"], ["x_bias"]])
def test_a_repeated_name_is_refused_whatever_its_form(tmp_path, second):
    folder = _two_shards(tmp_path, ["x", "x.weight", "x_bias"], second)
    with pytest.raises(BadInput, match=f"'{second[0]}' is in both s0.safetensors and s1.safetensors"):
        load(folder)


def test_distinct_names_of_one_key_in_two_shards_are_both_kept(tmp_path):
    # "x_bias" (shard 0) and "x.bias" (shard 1) are two tensors of module x, not one tensor twice
    files = load(_two_shards(tmp_path, ["x", "x_bias"], ["x.bias"]))
    assert list(files.grouped.tensors["x"]) == ["param", "bias", "bias+"]


def test_a_hub_snapshot_keeps_a_repeated_name_apart(tmp_path):
    # hub headers were never refused for it (no folder to point at): both copies stay, as before
    _two_shards(tmp_path, ["a.weight"], ["a.weight"])
    grouper = ShardGrouper(folder="org/x", index=False, refuse_duplicates=False)
    for i in (0, 1):
        grouper.add(header_columns(read_header(str(tmp_path / f"s{i}.safetensors"))), f"s{i}", local=False)
    assert list(grouper.finish().tensors["a"]) == ["weight", "weight+"]


def test_names_are_read_again_only_from_a_local_file(tmp_path):
    _two_shards(tmp_path, ["a.weight", "a.k_scale"], ["b.weight"])
    path = str(tmp_path / "s0.safetensors")
    local = ShardGrouper(folder="x", index=False).add(read_header_columns(path), "s0.safetensors")
    remote = ShardGrouper(folder="x", index=False).add(header_columns(read_header(path)), "s0", local=False)
    assert local.names is None and local.tensor_names() == remote.tensor_names() == ["a.weight", "a.k_scale"]
    assert local.kv_names == remote.kv_names == ["a.k_scale"] and local.data_bytes == remote.data_bytes == 16


def test_an_odd_name_is_split_against_a_name_of_a_shard_grouped_before(tmp_path):
    # shard 0 has only "module.suffix" names, so it is grouped as soon as it is read; shard 1's "a.weight_bias"
    # is split against every name, shard 0's "a.weight" too: a bias of module "a.weight", not "a"'s weight_bias
    files = load(_two_shards(tmp_path, ["a.weight"], ["a.weight_bias"]))
    assert list(files.grouped.tensors) == ["a", "a.weight"] and list(files.grouped.tensors["a.weight"]) == ["bias"]
