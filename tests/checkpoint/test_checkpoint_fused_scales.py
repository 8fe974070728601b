"""The fused-global-scale check reads and compares a batch of fused groups at a time (fused_scales._SCALAR_BATCH
modules): the findings must not depend on where the batches end."""

from __future__ import annotations

import json

import pytest

from advisor.checkpoint import fused_scales
from advisor.checkpoint.inspect import inspect_checkpoint

from ckpt_builders import LLAMA_CONFIG, write_with_floats


def _linear(pos: int, prefix: str) -> tuple[dict, int]:
    """ModelOpt NVFP4 tensors of one 4x16 linear at ``pos``: weight, weight_scale, then the two F32 scalars."""
    out = {}
    for suffix, dt, shape, nb in (("weight", "U8", [4, 8], 32), ("weight_scale", "F8_E4M3", [4, 1], 4),
                                  ("weight_scale_2", "F32", [], 4), ("input_scale", "F32", [], 4)):
        out[f"{prefix}.{suffix}"] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + nb]}
        pos += nb
    return out, pos


@pytest.mark.parametrize("batch", [1, 2, 3, 4, 2048])
def test_fused_groups_checked_a_batch_at_a_time_are_found_in_order(tmp_path, monkeypatch, batch):
    # groups are checked a few at a time (fused_scales._SCALAR_BATCH modules): whatever the batch, every differing
    # group is found, in row order, and none of the equal ones
    monkeypatch.setattr(fused_scales, "_SCALAR_BATCH", batch)
    tensors, pos, values = {}, 0, {}
    differ = {(0, "v_proj"): 3.0, (2, "q_proj"): 4.0, (3, "k_proj"): 5.0}
    for layer in range(4):
        for proj in ("q_proj", "k_proj", "v_proj"):
            more, end = _linear(pos, f"model.layers.{layer}.self_attn.{proj}")
            tensors.update(more)
            values[end - 8] = differ.get((layer, proj), 1.0)
            values[end - 4] = 0.5
            pos = end
    write_with_floats(tmp_path / "model.safetensors", tensors, pos, values)
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA_CONFIG, num_hidden_layers=4)))
    found = [f for f in inspect_checkpoint(str(tmp_path)).findings if f.code == "fused-global-scale-mismatch"]
    assert len(found) == 1 and "3 fused group" in found[0].message
    assert [d.split(" weight")[0] for d in found[0].detail.split("; ")] == \
        ["model.layers.0.self_attn", "model.layers.2.self_attn", "model.layers.3.self_attn"]
