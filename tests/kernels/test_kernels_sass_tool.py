"""benchmarks/kernel_sass.py: the K-loop finder and the instruction classes on nvdisasm-style text,
the per-card budgets and the issue 23 gates."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_sass.py"
_spec = importlib.util.spec_from_file_location("kernel_sass_tool", SCRIPT)
ks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ks)

LISTING = """
weight_only_gemv_kernel:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0020*/               @P1 LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0030*/                   LOP3.LUT R6, R4, 0xe0e0e0e, RZ, 0xc0, !PT ;
        /*0040*/                   IMAD.SHL.U32 R7, R4, 0x10, RZ ;
        /*0050*/                   HADD2.F32 R8, -RZ, R6.H0_H0 ;
        /*0060*/                   FFMA R9, R8, R5, R9 ;
        /*0070*/                   LDS.128 R12, [R3+UR5] ;
        /*0080*/                   SHFL.BFLY PT, R13, R9, 0x1, 0x1f ;
        /*0090*/                   NOP ;
        /*00a0*/                   ISETP.NE.AND P0, PT, R10, RZ, PT ;
        /*00b0*/               @P0 BRA `(.L_x_1) ;
.L_x_0:
        /*00c0*/                   STG.E desc[UR4][R2.64], R9 ;
        /*00d0*/                   EXIT ;
.L_x_2:
        /*00e0*/                   BRA `(.L_x_2);
"""


def test_k_loop_is_the_backward_branch_loop_with_global_loads():
    loop = ks.k_loop(LISTING)
    assert loop[0].startswith("@P1 LDG.E.128") and loop[-1].startswith("@P0 BRA")
    assert len(loop) == 9                               # the NOP is padding, not work
    classes = [ks.classify(x) for x in loop]
    assert classes == ["ldg", "bits", "bits", "cvt", "fp", "smem", "shfl", "other", "other"]


def test_uniform_branches_close_loops_too():
    """sm_100 / sm_120 listings close loops with `BRA.U UP0`."""
    text = LISTING.replace("@P0 BRA `(.L_x_1)", "BRA.U UP0, `(.L_x_1)")
    assert len(ks.k_loop(text)) == 9


def test_a_listing_without_a_load_loop_has_no_k_loop():
    text = LISTING.replace("LDG.E.128", "MOV")
    assert ks.k_loop(text) == []


def test_classes_of_mma_and_convert_instructions():
    assert ks.classify("HGMMA.64x16x16.F32.BF16 R24, gdesc[UR4], R24 ;") == "mma"
    assert ks.classify("HMMA.16816.F32.BF16 R4, R8, R12, R4") == "mma"
    assert ks.classify("F2F.BF16.F16 R3, R2") == "cvt"
    assert ks.classify("HMUL2.BF16_V2 R40, R17.H0_H0, R12.H0_H0") == "fp"
    assert ks.classify("PRMT R17, R32, 0x5410, R17") == "bits"
    assert ks.classify("IMAD.MOV.U32 R5, RZ, RZ, RZ") == "other"
    assert ks.classify("LDSM.16.M88.4 R48, [R63+UR7+0x5000]") == "smem"


def test_budgets_come_from_the_card_table():
    """Issue slots at 90 % over elements streamed at full bandwidth (kernels/NOTES.md, Budgets)."""
    assert round(ks.card_budget("nvfp4", 90), 1) == 3.5                 # H200: issue 23's figure
    assert ks.card_budget("fp8", 90) / ks.card_budget("nvfp4", 90) == pytest.approx(1 / 0.5625)
    assert ks.card_budget("nvfp4", 100) < 2.5                           # a B200 streams 7.7 TB/s
    assert ks.gate("nvfp4", 1, 90) == ks.gate("nvfp4", 1, 100) == 3.5
    assert (ks.gate("fp8", 1, 90), ks.gate("int4", 1, 100)) == (6.2, 3.2)
    assert ks.gate("nvfp4", 16, 90) is None and ks.gate("nvfp4", 1, 86) is None


def test_verdicts_gate_the_best_candidate_per_target():
    row = {"cc": 90, "fmt": "nvfp4", "m": 1, "arch": "sm_90a"}
    rows = [{**row, "kernel": "gemv a", "per_elem": 4.1}, {**row, "kernel": "gemv b", "per_elem": 3.4},
            {**row, "kernel": "gemv c", "error": "RuntimeError: x"},
            {"cc": 86, "fmt": "int4", "m": 1, "arch": "sm_86", "kernel": "gemv d", "per_elem": 9.0}]
    lines, ok = ks.verdicts(rows)
    assert ok and len(lines) == 2
    assert "best  3.40  gemv b" in lines[1] and "gate 3.5 -> met" in lines[1]
    assert "gate" not in lines[0] and "rtx-3090 budget" in lines[0]
    rows[1]["per_elem"] = 3.6
    lines, ok = ks.verdicts(rows)
    assert not ok and "MISSED (ratio 1.03)" in lines[1]
