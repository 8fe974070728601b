"""The pure parts of microbench: shapes, launch candidates, metrics, calibration, Doc."""

from __future__ import annotations

import json

import pytest

from advisor.doc import Table
from advisor.errors import UsageError
from advisor.microbench import configs, results
from advisor.microbench.results import CaseResult, Stream, Suite
from advisor.microbench.shapes import DEFAULT_M, default_shapes, parse_m_list, shapes_from_checkpoint


def test_shapes_from_a_checkpoint_config(tmp_path):
    from advisor.checkpoint.inspect import inspect_checkpoint

    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
        "intermediate_size": 3072, "num_hidden_layers": 2, "num_attention_heads": 8,
        "num_key_value_heads": 2, "vocab_size": 5000, "head_dim": 128}))
    shapes = shapes_from_checkpoint(inspect_checkpoint(str(tmp_path)))
    # gate+up (1024 -> 3072, two per layer) dominate, then down (3072 -> 1024); never lm_head/embed.
    assert [(s.k, s.n) for s in shapes] == [(1024, 3072), (3072, 1024)]
    assert shapes[0].label == "mlp_gate_up" and shapes[0].share > shapes[1].share > 0


def test_defaults_and_m_parsing():
    assert [(s.k, s.n) for s in default_shapes()] == [(5120, 17408)]
    assert DEFAULT_M == (1, 4, 16, 128, 2048, 8192)
    assert parse_m_list("16, 1,16,8192") == (1, 16, 8192)
    for bad in ("", "0", "a,b", "1,70000"):
        with pytest.raises(UsageError):
            parse_m_list(bad)


@pytest.mark.parametrize("m", [1, 4, 8, 16, 64, 128, 2048, 8192])
@pytest.mark.parametrize("group", [16, 128])
def test_candidates_respect_kernel_limits(m, group):
    cands = configs.candidates(m, 5120, 17408, sm_count=132, group=group)
    assert cands
    for c in cands:
        p = c.params
        assert p["block_k"] % group == 0 or group % p["block_k"] == 0
        assert p["block_k"] % 32 == 0 and 5120 // p["block_k"] >= p["split_k"] >= 1
        if c.path == "gemv":
            assert m <= configs.GEMV_MAX_M
            # the per-thread tile sizes benchmarks/kernel_sass.py compiled without spills
            assert p["block_n"] * p["block_k"] // (32 * p["num_warps"]) <= configs.GEMV_MAX_ELEMS_PER_THREAD
        else:
            assert p["block_m"] >= 16
    assert any(c.path == "gemv" for c in cands) == (m <= configs.GEMV_MAX_M)


def test_split_k_fills_the_machine_but_keeps_two_k_blocks():
    assert configs.split_k_for(tiles=272, k=5120, block_k=64, sm_count=132, per_sm=8) == 4
    assert configs.split_k_for(tiles=1, k=256, block_k=64, sm_count=132, per_sm=8) == 2
    assert configs.split_k_for(tiles=10_000, k=5120, block_k=64, sm_count=132, per_sm=8) == 1


def test_arch_limits():
    assert configs.arch_limits((9, 0)) == ("bf16", None)
    assert configs.arch_limits((7, 5)) == ("fp16", None)
    act, why = configs.arch_limits((7, 0))
    assert act == "fp16" and "7.5" in why


def _suite(results_, streams=(Stream("copy", 800.0, 1024), Stream("read", 850.0, 1024))):
    return Suite(device_name="NVIDIA GeForce RTX 3090", uuid="GPU-1", cc=(8, 6), sm_count=82, gpu_id="rtx-3090",
                 act_dtype="bf16", streams=streams, results=tuple(results_), table_bandwidth_gbs=936.0,
                 table_peak_tflops=71.0, mma_class=results.mma_class_for((8, 6), "bf16"), timing="t",
                 software={"triton": "3.9.0"})


def _timed(kernel, m, seconds, k=4096, n=8192, wbytes=None):
    wbytes = wbytes if wbytes is not None else {"bf16": 2, "w8a16_fp8": 1}.get(kernel, 0.5625) * k * n
    r = CaseResult(kernel, m, k, n, path="gemv", config="c", bytes_moved=results.gemm_bytes(m, k, n, int(wbytes), 2, 2),
                   flops=2 * m * k * n)
    return results.with_metrics(r, seconds, 800.0, 936.0, 71.0)


def test_metrics_are_rates_of_the_measured_time():
    r = _timed("w4a16_nvfp4", 1, 25e-6)
    assert r.time_us == pytest.approx(25.0)
    assert r.gbs == pytest.approx(r.bytes_moved / 25e-6 / 1e9)
    assert r.pct_measured_bw == pytest.approx(100 * r.gbs / 800.0)
    assert r.pct_table_bw == pytest.approx(100 * r.gbs / 936.0)
    assert r.tflops == pytest.approx(2 * 4096 * 8192 / 25e-6 / 1e12)
    assert r.pct_table_peak == pytest.approx(100 * r.tflops / 71.0)


def test_calibration_definitions():
    rs = [_timed("bf16", 1, 80e-6), _timed("w4a16_nvfp4", 1, 25e-6), _timed("w4a16_nvfp4", 1, 30e-6, k=1024, n=1024),
          _timed("bf16", 8192, 4e-3), _timed("w4a16_nvfp4", 8192, 4.4e-3),
          CaseResult("w8a16_fp8", 1, 4096, 8192, skipped="arch")]
    cal = results.calibration_from(_suite(rs), "2026-12-02T00:00:00+00:00")
    assert cal.bandwidth_gbs == 800.0 and cal.read_bandwidth_gbs == 850.0 and cal.shape == (4096, 8192)
    # M=1 on the largest shape only, divided by the measured copy bandwidth.
    assert cal.kernel_bandwidth_eff["w4a16_nvfp4"] == pytest.approx(rs[1].gbs / 800.0)
    assert cal.kernel_bandwidth_eff["bf16"] == pytest.approx(rs[0].gbs / 800.0)
    assert "w8a16_fp8" not in cal.kernel_bandwidth_eff
    assert cal.mma_tflops == {"hmma_bf16": pytest.approx(rs[3].tflops)}
    assert cal.dequant_overhead == {"bf16": 0.0, "w4a16_nvfp4": pytest.approx(0.1)}


def test_no_overhead_without_a_large_m_and_no_calibration_without_bandwidth():
    cal = results.calibration_from(_suite([_timed("bf16", 128, 1e-4), _timed("w4a16_nvfp4", 128, 2e-4)]), "t")
    assert cal.dequant_overhead == {} and "hmma_bf16" in cal.mma_tflops
    assert results.calibration_from(_suite([], streams=()), "t") is None


def test_mma_class_per_arch():
    assert results.mma_class_for((9, 0), "bf16") == "wgmma_bf16"
    assert results.mma_class_for((10, 0), "bf16") == "tcgen05_bf16"
    assert results.mma_class_for((12, 0), "bf16") == "hmma_bf16"
    assert results.mma_class_for((7, 5), "fp16") == "hmma_f16"
    from advisor.kernel_path.model import MMA_CLASSES

    assert {"wgmma_bf16", "tcgen05_bf16", "hmma_bf16", "hmma_f16"} <= set(MMA_CLASSES)


def test_doc_and_text_table_show_every_case_and_skips():
    rs = [_timed("w4a16_nvfp4", 1, 25e-6), CaseResult("w8a16_fp8", 1, 4096, 8192, skipped="Triton: no MMA")]
    doc = results.to_doc(_suite(rs), "/tmp/cal.json")
    table = next(b for b in doc.blocks if isinstance(b, Table))
    assert len(table.rows) == 2 and table.row_styles == ("normal", "warn")
    assert "skipped: Triton: no MMA" in table.rows[1]
    text = results.short_table(_suite(rs))
    assert text.splitlines()[0].startswith("NVIDIA GeForce RTX 3090  copy 800 GB/s")
    assert len(text.splitlines()) == 4 and "N/A" in text.splitlines()[-1]


def test_device_check_reaches_the_unmasked_tiles_the_timings_run():
    """The on-device check must run every GEMV candidate both masked and unmasked (EVEN: every tile inside
    W; NVFP4's PTX block dot). With only its ragged 96 x 256 shape it never reached the unmasked path, which
    is the one timed on large shapes: an H200 run of 2026-12-04 timed v4's PTX without having checked it."""
    from advisor.microbench.runner import Device
    from kernels.weight_only import gemv_even

    class W:                                   # what gemv_even reads of a weight
        def __init__(self, n, k):
            self.n, self.k, self.fmt = n, k, "nvfp4"

    dev = Device("x", None, (9, 0), 132, 0, 0, "cpu")
    reached = {True: set(), False: set()}
    for n, k in dev.verify_shapes:
        for m in dev.verify_ms:
            for c in configs.candidates(m, k, n, dev.sm_count):
                if c.path == "gemv":
                    reached[gemv_even(W(n, k), c.params["block_n"], c.params["block_k"])].add(c.text)
    timed = {c.text for c in configs.candidates(1, 5120, 17408, 132) if c.path == "gemv"}
    assert {t.split(" sk")[0] for t in timed} <= {t.split(" sk")[0] for t in reached[True]}
    assert reached[False]                      # the masked path too
    assert 1 in dev.verify_ms                  # the M the GEMV timings run
