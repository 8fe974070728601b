"""The fused-global-scale check's first pass (fused_scales._agree) may only ever answer "no group differs" where
the exact check (_differing) finds nothing: on random checkpoints (q/k/v, gate/up, MoE experts' w1/w3, shards
that split modules, unaligned scalars, NaN and signed zeros, compressed-tensors' reciprocal global scales, a
kind given twice, scalars missing or not F32) the findings with the first pass equal those without it. And
scalar_reads.read_values answers what reading each scalar alone gives, whichever way it batches the reads."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from advisor.checkpoint import fused_scales, scalar_reads, sources
from advisor.checkpoint.arch import arch_info
from advisor.checkpoint.modules import modules_from_headers, sort_naturally
from advisor.checkpoint.quant_config import build_plan

from ckpt_builders import LLAMA_CONFIG, write_with_floats

_VALUES = (1.0, 1.0, 1.0, 2.0, 0.5, 0.0, -0.0, math.nan)


_KINDS = (("weight_scale_2", "input_scale"), ("weight_scale_2",), ("weight_global_scale", "input_scale"),
          ("weight_scale_2", "weight_global_scale", "input_scale"),
          ("weight_scale_2", "input_scale", "input_global_scale"))


def _linear(rng: random.Random, name: str, same: float, noise: float,
            kinds: tuple[str, ...] | None) -> list[tuple[str, str, list, int, float | None]]:
    """(name, dtype, shape, bytes, F32 value) of one NVFP4 linear (8 x 16): weight, weight_scale and its scalars
    (``kinds``, or a random choice), each ``same`` but for a random value at the rate ``noise``."""
    out = [(f"{name}.weight", "U8", [8, 8], 64, None), (f"{name}.weight_scale", "F8_E4M3", [8, 1], 8, None)]

    def value() -> float:
        return rng.choice(_VALUES) if rng.random() < noise else same

    for kind in kinds or rng.choice(_KINDS):
        shape = rng.choice([[], [], [1]])
        if noise and rng.random() < 0.05:   # not an F32 scalar: the check skips it
            out.append((f"{name}.{kind}", "BF16", shape, 2, None))
        else:
            out.append((f"{name}.{kind}", "F32", shape, 4, value()))
    if rng.random() < 0.1:                  # a pad before the next module: its scalars sit unaligned
        out.append((f"{name}_pad.weight", "U8", [rng.randint(1, 3)], 0, None))
    return out


def _checkpoint(rng: random.Random, folder) -> None:
    """Half the checkpoints consistent (one kind of scalars, equal within each group), half with random values."""
    layers = rng.randint(1, 3)
    noise = rng.choice([0.0, 0.0, 0.02, 0.15])
    kinds = None if noise else rng.choice(_KINDS[:3])
    values = _VALUES if noise else _VALUES[:-1]
    tensors = []
    for layer in range(layers):
        p = f"model.layers.{layer}"
        same = rng.choice(values)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors += _linear(rng, f"{p}.self_attn.{proj}", same, noise, kinds)
        for e in range(rng.randint(0, 5)):
            same = rng.choice(values)
            for w in ("w1", "w2", "w3"):
                tensors += _linear(rng, f"{p}.block_sparse_moe.experts.{e}.{w}", same, noise, kinds)
        same = rng.choice(values)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            tensors += _linear(rng, f"{p}.mlp.{proj}", same, noise, kinds)
    if rng.random() < 0.5:
        rng.shuffle(tensors)                # header order unlike the natural order of the modules
    cuts = sorted(rng.sample(range(1, len(tensors)), rng.randint(0, 2)))    # shards that split modules
    bounds = list(zip([0, *cuts], [*cuts, len(tensors)]))
    weight_map = {}
    for s, (a, b) in enumerate(bounds):
        fname = f"model-{s + 1:05d}-of-{len(bounds):05d}.safetensors"
        header, floats, pos = {}, {}, 0
        for name, dtype, shape, nbytes, value in tensors[a:b]:
            nbytes = nbytes or shape[0]
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + nbytes]}
            if value is not None:
                floats[pos] = value
            weight_map[name] = fname
            pos += nbytes
        write_with_floats(folder / fname, header, pos, floats)
    if len(bounds) > 1:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps(dict(LLAMA_CONFIG, num_hidden_layers=layers)))


def _rows(folder):
    files = sources.load(str(folder))
    plan = build_plan(files.config, files.hf_quant_config, files.quantize_config)
    mods, _ = modules_from_headers(files, plan, arch_info(files.config))
    sort_naturally(mods)
    return files, mods


def test_the_first_pass_never_hides_a_differing_group(tmp_path, monkeypatch):
    answers = {True: 0, False: 0}
    found = 0
    real_agree = fused_scales._agree

    def agree(*args):
        answer = real_agree(*args)
        answers[answer] += 1
        return answer

    for seed in range(60):
        rng = random.Random(seed)
        folder = tmp_path / f"c{seed}"
        folder.mkdir()
        _checkpoint(rng, folder)
        files, mods = _rows(folder)
        monkeypatch.setattr(fused_scales, "_SCALAR_BATCH", rng.choice([1, 3, 512]))
        monkeypatch.setattr(fused_scales, "_agree", agree)
        with_first_pass = fused_scales.fused_scale_mismatch(files, mods)
        monkeypatch.setattr(fused_scales, "_agree", lambda *args: False)
        exact = fused_scales.fused_scale_mismatch(files, mods)
        assert with_first_pass == exact, seed
        found += bool(exact)
    # both answers of the first pass, and checkpoints with and without findings, were met
    assert answers[True] >= 5 and answers[False] >= 5 and 5 <= found <= 55


@pytest.mark.parametrize("seed", range(12))
def test_read_values_answers_as_reading_each_scalar_alone(tmp_path, seed):
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(rng.choice([64, 4096, 200_000])))
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(data))
    other = tmp_path / "other.bin"
    other.write_bytes(bytes(data[: len(data) // 2]))
    n = rng.randint(1, 300)
    close = rng.random() < 0.5              # a dense span (one read) or scalars far apart (offset order)
    step = rng.choice([4, 1]) if close else rng.choice([4096, 5001])
    offsets = [rng.randrange(0, len(data) + 8) for _ in range(n)] if not close else \
        [min(len(data) + 4, rng.randrange(0, 64) * step + rng.randrange(0, 2)) for _ in range(n)]
    paths = [str(path if rng.random() < 0.8 else other) for _ in range(n)]
    paths[0] = str(path)
    whole = {str(path): bytes(data), str(other): bytes(data[: len(data) // 2])}

    def alone(p: str, off: int):
        buf = whole[p]
        return struct.unpack_from("<f", buf, off)[0] if off + 4 <= len(buf) else None

    want = [alone(p, off) for p, off in zip(paths, offsets)]
    got = scalar_reads.read_values(paths, offsets)
    assert [struct.pack("<f", v) if v is not None else None for v in got] == \
        [struct.pack("<f", v) if v is not None else None for v in want]
    missing = str(tmp_path / "gone.bin")     # a shard that cannot be opened: its values None, the others read
    got = scalar_reads.read_values([missing, *paths], [0, *offsets])
    assert got[0] is None and [struct.pack("<f", v) if v is not None else None for v in got[1:]] == \
        [struct.pack("<f", v) if v is not None else None for v in want]


def test_a_scalar_in_the_next_shard_is_read_there(tmp_path):
    # v_proj's weight_scale_2 is in the second shard, at an offset where the first shard holds q's and k's value:
    # read in the module's first shard, the group would look equal
    layer = "model.layers.0.self_attn"
    first, second, floats1, pos = {}, {}, {}, 0
    for proj in ("q_proj", "k_proj", "v_proj"):
        for name, dtype, shape, nbytes, value in _linear(random.Random(0), f"{layer}.{proj}", 1.0, 0.0,
                                                         ("weight_scale_2",)):
            if proj == "v_proj" and name.endswith("weight_scale_2"):
                continue
            first[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + nbytes]}
            if value is not None:
                floats1[pos] = value
            pos += nbytes
    floats1[0] = 1.0                        # the first shard's bytes at the moved scalar's offset: 1.0 as well
    write_with_floats(tmp_path / "model-00001-of-00002.safetensors", first, pos, floats1)
    second[f"{layer}.v_proj.weight_scale_2"] = {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}
    write_with_floats(tmp_path / "model-00002-of-00002.safetensors", second, 4, {0: 3.0})
    weight_map = {**dict.fromkeys(first, "model-00001-of-00002.safetensors"),
                  **dict.fromkeys(second, "model-00002-of-00002.safetensors")}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA_CONFIG, num_hidden_layers=1)))
    files, mods = _rows(tmp_path)
    assert [m.name for m in mods if m.shards] == [f"{layer}.v_proj"]
    found = fused_scales.fused_scale_mismatch(files, mods)
    assert len(found) == 1 and f"{layer} weight: k_proj=1, q_proj=1, v_proj=3" in found[0].detail
