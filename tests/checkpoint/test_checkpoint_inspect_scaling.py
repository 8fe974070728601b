"""What keeps `inspect` linear on 100k-tensor checkpoints (issue 23 point 1; speed itself is measured by
benchmarks/inspect_speed.py, never here): no garbage collection while parsing, no per-object JSON hook
for a plain header (repeated keys still caught), and the doctor's 4-byte global scales read in batches."""

from __future__ import annotations

import gc
import json
import struct

import pytest

from advisor.checkpoint import fused_scales, inspect as inspect_mod, safetensors_header as sh, scalar_reads
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.errors import BadInput

from ckpt_builders import llama_tensors
from test_checkpoint_formats import mo_cfgs


def _header(obj_text: str, buffer: int) -> bytes:
    body = obj_text.encode()
    return struct.pack("<Q", len(body)) + body + b"\0" * buffer


def _parse(raw: bytes) -> sh.SafetensorsHeader:
    n = struct.unpack("<Q", raw[:8])[0]
    return sh.parse_header_bytes(raw[8:8 + n], len(raw) - 8 - n, "x.safetensors")


PLAIN = ('{"__metadata__":{"format":"pt"},"a.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
         '"a.scale":{"dtype":"BF16","shape":[],"data_offsets":[16,18]}}')


def test_a_plain_header_is_parsed_without_a_per_object_hook(monkeypatch):
    calls = []
    real = json.loads

    def spy(text, **kw):
        calls.append(kw)
        return real(text, **kw)

    monkeypatch.setattr(sh.json, "loads", spy)
    h = _parse(_header(PLAIN, 18))
    assert h.tensors["a.weight"] == ("a.weight", "F32", (2, 2), 0, 16) and h.tensors["a.scale"].numel == 1
    assert h.metadata == {"format": "pt"}
    assert calls and not any("object_pairs_hook" in kw for kw in calls)


@pytest.mark.parametrize("text, problem", [
    # a field given twice: serde refuses it; the key count gives it away without the hook
    ('{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "given twice"),
    ('{"__metadata__":{},"__metadata__":{},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
     "__metadata__ twice"),
    ('{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', "shape must be"),
    ('{"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}', "shape must be"),
    ('{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}', "shape must be"),
    ('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}}', "data_offsets"),
    ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', "needs 8"),
])
def test_odd_headers_still_get_the_full_check(text, problem):
    with pytest.raises(BadInput, match=problem):
        _parse(_header(text, 4))


def test_a_repeated_tensor_name_keeps_the_last_value_as_serde_does():
    h = _parse(_header('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                       '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', 4))
    assert h.tensors["a"].shape == (1,)


def test_no_garbage_collection_while_inspecting_and_restored_after(monkeypatch):
    seen = []
    real = inspect_mod.load

    def spy(source):
        seen.append(gc.isenabled())
        return real(source)

    monkeypatch.setattr(inspect_mod, "load", spy)
    assert gc.isenabled()
    inspect_checkpoint("demo:qwen3-8b-nvfp4")
    assert seen == [False] and gc.isenabled()
    with pytest.raises(BadInput):
        inspect_checkpoint("/nonexistent/folder")
    assert gc.isenabled()
    gc.disable()
    try:                                 # a caller that turned it off keeps it off
        inspect_checkpoint("demo:qwen3-8b-nvfp4")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_global_scales_are_read_in_batches_by_offset(build, monkeypatch):
    scales = {"model.layers.0.self_attn.k_proj": 3.0, "model.layers.1.mlp.up_proj": 2.0}
    cfg, hq = mo_cfgs("NVFP4", extra={"group_size": 16})
    folder = build("fused", llama_tensors("mo_nvfp4", scales=scales), cfg, hf_quant=hq)
    reads, wanted = [], []
    real_read = fused_scales.read_values

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def seek(self, off):
            return self.f.seek(off)

        def read(self, n):
            reads.append(n)
            return self.f.read(n)

    def count(paths, offsets):
        wanted.extend(offsets)
        return real_read(paths, offsets)

    monkeypatch.setattr(scalar_reads, "open", lambda p, *a, **k: Counting(open(p, *a, **k)), raising=False)
    monkeypatch.setattr(fused_scales, "read_values", count)
    info = inspect_checkpoint(folder)
    f = [f for f in info.findings if f.code == "fused-global-scale-mismatch"]
    assert f and {"model.layers.0.self_attn.k_proj", "model.layers.1.mlp.up_proj"} <= set(f[0].modules)
    assert len(wanted) >= 20 and 1 <= len(reads) <= len(wanted) // 4
