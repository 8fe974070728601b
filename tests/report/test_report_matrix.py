"""The compatibility matrix against explain/make_plan, its schema, and the privacy scrubber."""

from __future__ import annotations

import copy
import json

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.gpu_table import get_gpu
from advisor.report.matrix import compute_matrix, matrix_blocks, primary_decision
from advisor.report.output import schema, schema_errors
from advisor.report.privacy import Scrubber

GPU_IDS = ("rtx-2080-ti", "rtx-3090", "rtx-5090", "h100-sxm")


@pytest.fixture(scope="module")
def checkpoint():
    return inspect_checkpoint("demo:qwen3-30b-a3b-nvfp4")


@pytest.fixture(scope="module")
def matrix(checkpoint):
    return compute_matrix(checkpoint, [get_gpu(g) for g in GPU_IDS], ("vllm", "sglang"), workload="interactive")


def test_cells_follow_explain_and_plan(checkpoint, matrix):
    from advisor.services.analysis import kv_decisions
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.plan import make_plan
    from advisor.cost.workload import get_workload
    from advisor.kernel_path.explain import explain

    assert len(matrix.cells) == len(GPU_IDS) * 2
    for cell in matrix.cells:
        gpu = get_gpu(cell.gpu_id)
        exp = explain(checkpoint, gpu, engine=cell.engine)
        d = primary_decision(exp, checkpoint)
        assert cell.runs == exp.runs
        assert (cell.effective_scheme, cell.kernel, cell.mma) == (d.effective_scheme, d.kernel, d.mma)
        if not exp.runs:
            assert cell.decode_tok_s is None and cell.note
            continue
        eng = load_engine_memory(cell.engine)
        plan = make_plan(checkpoint, exp, gpu, workload=get_workload("interactive"), engine_memory=eng,
                         kv_decisions=kv_decisions(checkpoint, gpu, 1, cell.engine, None, list(eng.kv_tune)))
        assert cell.kv_cache_dtype == plan.recommendation.kv_cache_dtype
        if cell.fits:
            assert cell.decode_tok_s == pytest.approx(plan.predictions.decode_tok_s)
            assert cell.prefill_tok_s == pytest.approx(plan.predictions.prefill_tok_s)
            assert 0 < cell.max_context[4] <= cell.max_context[1]
            # batch 1 is what the interactive plan reports as the longest context per request
            assert cell.max_context[1] == plan.predictions.max_context_per_request
        else:
            assert plan.derivations["kv_pool_bytes"].value <= 0 and cell.decode_tok_s is None


def test_an_fp4_blackwell_runs_natively_and_an_ampere_does_not(matrix):
    blackwell = matrix.cell("rtx-5090", "vllm")
    ampere = matrix.cell("rtx-3090", "vllm")
    assert blackwell.effective_scheme == "W4A4-NVFP4" and ampere.effective_scheme.startswith("W4A16")
    assert ampere.checkpoint_scheme == "W4A4-NVFP4"


def test_blocks_table_and_heatmap_agree(matrix):
    table, heat = matrix_blocks(matrix)
    assert heat.row_labels == tuple(get_gpu(g).name for g in GPU_IDS)
    assert heat.col_labels == ("vllm", "sglang")
    for gi, g in enumerate(GPU_IDS):
        for ei, e in enumerate(("vllm", "sglang")):
            assert heat.values[gi][ei] == matrix.cell(g, e).decode_tok_s
    assert len(table.rows) == len(matrix.cells) and len(table.row_styles) == len(table.rows)
    bad = [r for r, s in zip(table.rows, table.row_styles) if s == "bad"]
    assert all(r[2] == "no" or r[10] == "no" for r in bad)


def test_unknown_engine_marks_its_cells_instead_of_failing(checkpoint):
    m = compute_matrix(checkpoint, [get_gpu("rtx-3090")], ("vllm", "vllm@0.1"), workload="interactive")
    assert m.engines == ("vllm", "vllm@0.1")
    assert m.cell("rtx-3090", "vllm").decode_tok_s is not None
    old = m.cell("rtx-3090", "vllm@0.1")
    assert old.runs is False and old.decode_tok_s is None and "no rules" in old.note


def _report_doc(cells):
    from advisor.jsonout import document

    return document("report", {
        "header": {"tool": "nvfp4-advisor", "version": "0", "generated_at": "2026-12-02T00:00:00+00:00",
                   "command": "nvfp4-advisor report x -o y", "engines": []},
        "selection": {"checkpoint": "x", "gpu_id": "rtx-3090", "gpus": 1, "engine": "vllm", "engine_version": None,
                      "workload": "interactive"},
        "hardware": None, "checkpoint": None, "kernel_path": None, "plan": None, "launch": [],
        "kernel_check": None, "benchmark": None, "calibration": None, "microbench": None,
        "matrix": {"checkpoint": "x", "checkpoint_label": "W4A4-NVFP4", "gpus": 1, "workload": "interactive",
                   "engines": ["vllm"], "cells": cells},
        "errors": {}})


def test_schema_accepts_matrix_json_and_rejects_broken_documents(matrix):
    cells = json.loads(json.dumps(matrix.to_json()["cells"]))
    assert schema_errors(_report_doc(cells)) == []
    broken = copy.deepcopy(cells)
    broken[0]["decode_tok_s"] = "fast"
    assert any("decode_tok_s" in e for e in schema_errors(_report_doc(broken)))
    leaky = _report_doc(cells)
    leaky["hardware"] = {"mode": "probed", "note": "", "count": 1, "capabilities": {}, "topology": [],
                         "gpu": {"id": "a", "name": "b", "arch": "c", "cc": [8, 6]},
                         "devices": [{"index": 0, "name": "x", "gpu_id": "a", "uuid": "GPU-1"}]}
    assert schema_errors(leaky)                        # a device record may not carry its UUID
    missing = _report_doc(cells)
    del missing["header"]
    assert schema_errors(missing)
    assert schema()["properties"]["schema_version"]["const"] == "1"


def test_scrubber_paths_secrets_and_uuids():
    s = Scrubber.make(("my-api-key",), home="/home/al", cwd="/srv/work", install_dir="/opt/nvfp4",
                      identifiers=("GPU-abc",))
    text = ("/home/al/models/x /home/alice/y /srv/work/r.md /opt/nvfp4/profiles my-api-key "
            "hf_AbCdEfGhIjKlMnOpQrStUvWx GPU-12345678-aaaa-bbbb-cccc-1234567890ab")
    out = s.text(text)
    assert out == ("~/models/x /home/alice/y ./r.md <nvfp4-advisor>/profiles *** *** <gpu-uuid>")
    tree = s.tree({"k": ["my-api-key", 1, None], "/home/al/p": "a"})
    assert tree == {"k": ["***", 1, None], "~/p": "a"}


def test_mixed_checkpoint_row_shows_the_scheme_holding_most_bytes():
    mixed = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    top = max(mixed.scheme_shares, key=mixed.scheme_shares.get)
    m = compute_matrix(mixed, [get_gpu("rtx-5090")], ("vllm",), workload="interactive")
    cell = m.cell("rtx-5090", "vllm")
    assert cell.checkpoint_scheme == top
    by_role = {g.role: g.scheme for g in mixed.modules}
    assert by_role["mlp_down"] == top                 # the MLPs carry the larger share here
