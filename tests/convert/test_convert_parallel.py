"""`convert --jobs`: tensors (and row ranges of large ones) in parallel, written at their final
offsets; the bytes do not depend on the job count, the span size, the chunk size or how a tensor
is copied; a failing worker stops the rest and leaves nothing behind; reads map one span at a time."""

from __future__ import annotations

import errno
import os
import threading

import numpy as np
import pytest
import torch

from advisor.cli import main
from advisor.convert import converter
from advisor.convert.converter import convert
from advisor.convert.plan import Options
from advisor.convert.safetensors_io import OutSpec, ShardFile, read_bytes
from advisor.convert.source import open_checkpoint
from advisor.errors import BadInput
from tests.convert.conftest import write_checkpoint


def _llama(layers=2, h=64, inter=96):
    g = torch.Generator().manual_seed(0)
    t = {"model.embed_tokens.weight": torch.randn(128, h, generator=g).to(torch.bfloat16),
         "lm_head.weight": torch.randn(128, h, generator=g).to(torch.bfloat16),
         "model.norm.weight": torch.ones(h, dtype=torch.bfloat16)}
    for i in range(layers):
        p = f"model.layers.{i}"
        for name, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (16, h)), ("self_attn.v_proj", (16, h)),
                            ("self_attn.o_proj", (h, h)), ("mlp.gate_proj", (inter, h)), ("mlp.up_proj", (inter, h)),
                            ("mlp.down_proj", (h, inter))):
            t[f"{p}.{name}.weight"] = (torch.randn(*shape, generator=g) * 0.02 * (i + 1)).to(torch.bfloat16)
        t[f"{p}.input_layernorm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    return t, {"model_type": "llama", "hidden_size": h, "num_hidden_layers": layers}


def _tensors(folder):
    ck = open_checkpoint(folder)
    return {n: read_bytes(e) for n, e in ck.tensors.items()}


def test_jobs_spans_chunks_and_copy_paths_do_not_change_bytes(tmp_path, monkeypatch):
    tensors, cfg = _llama()
    src = write_checkpoint(tmp_path / "src", tensors, cfg, shards=2)
    convert(src, tmp_path / "one", options=Options(threads=1, max_shard_bytes=40_000))
    baseline = _tensors(tmp_path / "one")
    monkeypatch.setattr(converter, "SPAN_ELEMENTS", 700)          # several spans per tensor
    convert(src, tmp_path / "four", options=Options(threads=4, chunk_elements=300, max_shard_bytes=40_000))
    assert _tensors(tmp_path / "four") == baseline

    def no_kernel_copy(*args):
        raise OSError(errno.EXDEV, "cross-device")                # as on kernels before 5.3 across file systems
    monkeypatch.setattr(os, "copy_file_range", no_kernel_copy)
    monkeypatch.setattr(converter, "COPY_BYTES", 1000)
    convert(src, tmp_path / "buffered", options=Options(threads=3, max_shard_bytes=40_000))
    assert _tensors(tmp_path / "buffered") == baseline
    assert len([p for p in (tmp_path / "one").iterdir() if p.suffix == ".safetensors"]) > 1


def test_tensors_really_run_in_parallel(tmp_path, monkeypatch):
    """Two workers must hold spans of different tensors at the same time: each waits at a
    barrier for the other (serial processing would time out there)."""
    tensors, cfg = _llama(layers=1)
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    barrier = threading.Barrier(2, timeout=30)
    met: set[str] = set()
    original = converter._quantize_span

    def meet(files, worker, e, *args, **kwargs):
        if len(met) < 2 and e.name not in met:
            met.add(e.name)
            barrier.wait()
        return original(files, worker, e, *args, **kwargs)
    monkeypatch.setattr(converter, "_quantize_span", meet)
    convert(src, tmp_path / "out", options=Options(threads=2))
    assert len(met) == 2


def test_a_failing_worker_stops_the_rest_and_leaves_nothing(tmp_path, monkeypatch):
    tensors, cfg = _llama(layers=3)
    bad = tensors["model.layers.2.mlp.down_proj.weight"].clone()
    bad[5, 7] = float("inf")
    tensors["model.layers.2.mlp.down_proj.weight"] = bad
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    with pytest.raises(BadInput, match="model.layers.2.mlp.down_proj.weight contains inf or NaN"):
        convert(src, tmp_path / "out", options=Options(threads=3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    assert not [t for t in threading.enumerate() if t.name.startswith("convert")]   # workers gone

    started = []
    original = converter._quantize_span

    def fail_once(*args, **kwargs):
        started.append(1)
        if len(started) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(*args, **kwargs)
    tensors["model.layers.2.mlp.down_proj.weight"] = bad.nan_to_num(posinf=1.0)
    src2 = write_checkpoint(tmp_path / "src2", tensors, cfg)
    monkeypatch.setattr(converter, "_quantize_span", fail_once)
    with pytest.raises(BadInput, match="disk full"):
        convert(src2, tmp_path / "out", options=Options(threads=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "src2"]
    assert len(started) < 21                                    # it stopped: 21 spans were queued


def test_reads_map_one_span_at_a_time(tmp_path, monkeypatch):
    """The memory bound: a worker maps at most one span of a tensor (here 1/8 of the largest)."""
    tensors, cfg = _llama(layers=1, inter=512)
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    monkeypatch.setattr(converter, "SPAN_ELEMENTS", 64 * 64)
    sizes, live, peak = [], [0], [0]
    lock = threading.Lock()
    original = converter.MappedRows

    class Counting(original):
        def __init__(self, fd, entry, a, b):
            super().__init__(fd, entry, a, b)
            self.n = self.rows.nbytes
            sizes.append(self.n)

        def __enter__(self):
            with lock:
                live[0] += self.n
                peak[0] = max(peak[0], live[0])
            return self

        def __exit__(self, *exc):
            with lock:
                live[0] -= self.n
            super().__exit__(*exc)
    monkeypatch.setattr(converter, "MappedRows", Counting)
    convert(src, tmp_path / "out", options=Options(threads=2))
    largest = 512 * 64 * 2
    assert max(sizes) <= 64 * 64 * 2 < largest
    assert peak[0] <= 2 * 64 * 64 * 2


def test_shard_file_refuses_holes_and_overlaps(tmp_path):
    specs = [OutSpec("a", "U8", (8,)), OutSpec("b", "U8", (4,))]
    f = ShardFile(tmp_path / "x.safetensors", specs)
    f.write("a", 0, np.arange(4, dtype=np.uint8))
    f.write("a", 2, np.arange(6, dtype=np.uint8))
    f.write("b", 0, np.arange(4, dtype=np.uint8))
    with pytest.raises(RuntimeError, match=r"a bytes \[2, 4\) written twice"):
        f.close()
    f.abort()
    g = ShardFile(tmp_path / "y.safetensors", specs)
    g.write("a", 0, np.arange(8, dtype=np.uint8))
    with pytest.raises(RuntimeError, match=r"b bytes \[0, 4\) not written"):
        g.close()
    g.abort()
    with pytest.raises(RuntimeError, match="outside"):
        ShardFile(tmp_path / "z.safetensors", specs).write("b", 2, np.arange(4, dtype=np.uint8))


def test_cli_jobs_flag(tmp_path, monkeypatch, capsys):
    tensors, cfg = _llama(layers=1)
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    seen = []
    original = converter._run

    def record(items, threads, done):
        seen.append(threads)
        return original(items, threads, done)
    monkeypatch.setattr(converter, "_run", record)
    assert main(["convert", str(src), str(tmp_path / "a"), "--jobs", "3", "--json"]) == 0
    assert seen == [3, 3]
    seen.clear()
    monkeypatch.setattr(converter, "default_jobs", lambda: 5)
    assert main(["convert", str(src), str(tmp_path / "b"), "--json"]) == 0
    assert seen == [5, 5]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["convert", str(src), str(tmp_path / "c"), "--jobs", "0"])
    assert exit_.value.code == 2 and "--jobs" in capsys.readouterr().err
    assert _tensors(tmp_path / "a") == _tensors(tmp_path / "b")
