"""Writing reports: atomic, no writes into missing folders or over the checkpoint, no host paths,
probed hardware without host identifiers, and the optional measurement sections."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from report_fixtures import DEMO, run_cli

from advisor.report.output import schema_errors

ROOT = Path(__file__).resolve().parents[2]


def test_missing_directory_is_one_line_exit_3(tmp_path, capsys):
    target = tmp_path / "nope" / "r.md"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "-o", target]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "output directory does not exist" in err[0] and "Traceback" not in err[0]
    assert not target.parent.exists()


def test_never_overwrites_a_checkpoint_file(demo_folder, capsys):
    config = demo_folder / "config.json"
    before = config.read_bytes()
    assert run_cli(["report", demo_folder, "--gpu", "rtx-3090", "--format", "md", "-o", config]) == 3
    assert "refusing to overwrite" in capsys.readouterr().err
    assert config.read_bytes() == before


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "r.md"
    target.write_text("old report")
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "-o", target, "--force"]) == 0
    assert target.read_text().startswith("# nvfp4-advisor report")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]


def test_format_from_suffix_and_explicit_flag(tmp_path):
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "-o", tmp_path / "a.json"]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["kind"] == "report"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--format", "html", "-o", tmp_path / "b.txt"]) == 0
    assert (tmp_path / "b.txt").read_text().startswith("<!DOCTYPE html>")


def test_bad_gpu_and_engine_are_usage_errors(tmp_path, capsys):
    assert run_cli(["report", DEMO, "--gpu", "no-such-gpu", "-o", tmp_path / "r.md"]) == 2
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--engine", "nope", "-o", tmp_path / "r.md"]) == 2
    assert not (tmp_path / "r.md").exists()


def test_home_directory_never_appears(demo_folder, tmp_path, monkeypatch):
    home = demo_folder.parents[1]                      # tmp/home
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    out = home / "reports"
    out.mkdir()
    for fmt in ("md", "json", "html"):
        target = out / f"r.{fmt}"
        assert run_cli(["report", demo_folder, "--gpu", "rtx-3090", "--compare", "rtx-3090", "-o", target]) == 0
        text = target.read_text()
        assert str(home) not in text and str(tmp_path) not in text
        assert "~/models/qwen3-8b-nvfp4" in text
        assert str(ROOT) not in text                   # the install location is a host path too


def test_probed_card_fingerprint_without_host_identifiers(tmp_path, monkeypatch):
    from advisor.probe import nvml_source
    from advisor.probe.snapshot import ReplayNvml, replay_process_name

    snap = json.loads((ROOT / "tests" / "probe" / "snapshots" / "rtx3090.json").read_text())
    monkeypatch.setitem(sys.modules, "pynvml", ReplayNvml(snap))
    monkeypatch.setattr(nvml_source, "default_process_name", replay_process_name(snap))
    target = tmp_path / "r.json"
    assert run_cli(["report", DEMO, "--gpu", "auto", "-o", target]) == 0
    text = target.read_text()
    data = json.loads(text)
    assert schema_errors(data) == []
    hw = data["hardware"]
    assert hw["mode"] == "probed" and hw["driver_version"] == "570.133.07"
    assert hw["devices"][0]["power_limit_w"] == 280
    uuid = snap["devices"][0]["nvmlDeviceGetUUID"]
    bus = snap["devices"][0]["nvmlDeviceGetPciInfo"]["busId"]
    assert uuid not in text and bus not in text
    # the probed power limit reaches the plan, as with `plan --gpu auto`
    assert any(a["key"] == "power_clock_factor" for a in data["plan"]["assumptions"])
    md_target = tmp_path / "r.md"
    assert run_cli(["report", DEMO, "--gpu", "auto", "-o", md_target]) == 0
    md = md_target.read_text()
    assert "Probed cards (fingerprint)" in md and uuid not in md


def _launch_log(kernel: str, kv_tokens: int) -> list[str]:
    return [
        "INFO 12-02 10:00:01 [cuda.py:300] Using FLASHINFER attention backend out of potential backends: "
        "['FLASHINFER', 'TRITON_ATTN']",
        f"INFO 12-02 10:00:02 [nvfp4.py:60] Using {kernel} for NVFP4 GEMM",
        f"INFO 12-02 10:00:09 [kv_cache_utils.py:1000] GPU KV cache size: {kv_tokens:,} tokens",
    ]


def test_measurement_sections(tmp_path):
    from advisor.calibration import Calibration, save_calibration

    plan_path = tmp_path / "plan.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run_cli(["plan", DEMO, "--gpu", "rtx-3090", "--json"]) == 0
    plan = json.loads(buf.getvalue())
    plan_path.write_text(buf.getvalue())
    predicted = plan["predictions"]["decode_tok_s"]
    kv = plan["predictions"]["kv_pool_tokens"][plan["recommendation"]["kv_cache_dtype"]]
    log = tmp_path / "server.log"
    log.write_text("\n".join(_launch_log("MarlinNvFp4LinearKernel", kv)) + "\n")
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"schema_version": "1", "kind": "bench",
                                 "report": {"decode_tps": predicted * 0.5, "ttft_s": 0.05, "concurrency": None,
                                            "prefill": {"prefill_s": 1.5, "prompt_words": 3000}}}))
    cal = Calibration(gpu_id="rtx-3090", uuid="GPU-0badc0de-1111-2222-3333-444455556666",
                      name="NVIDIA GeForce RTX 3090",
                      measured_at="2026-12-01T10:00:00+00:00", bandwidth_gbs=850.0,
                      kernel_bandwidth_eff={"w4a16_nvfp4": 0.93, "bf16": 0.95}, mma_tflops={"hmma_bf16": 69.0},
                      dequant_overhead={"w4a16_nvfp4": 0.04})
    cal_file = save_calibration(cal, base=tmp_path / "cal")
    target = tmp_path / "r.json"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--launch-log", log, "--bench", bench,
                    "--calibration", cal_file, "-o", target]) == 0
    data = json.loads(target.read_text())
    assert schema_errors(data) == []
    rows = {r["layer_class"].split(" [")[0]: r for r in data["kernel_check"]["rows"]}   # "class [roles]"
    assert rows["dense_linear"]["status"] == "match" and rows["attention_kv"]["status"] == "match"
    verdict = data["benchmark"]["verdicts"][0]
    assert verdict["status"] == "below" and verdict["measured"] == pytest.approx(predicted * 0.5)
    assert data["calibration"]["bandwidth_gbs"] == 850.0 and "uuid" not in data["calibration"]
    assert "0badc0de" not in target.read_text()   # not even in the calibration file name
    # the calibration is what the plan used: its bandwidth replaces the table's
    assert any(a["source"] == "calibrated" for a in data["plan"]["assumptions"])
    md = tmp_path / "r.md"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--launch-log", log, "--bench", bench,
                    "--calibration", cal_file, "-o", md]) == 0
    text = md.read_text()
    for heading in ("## Launch kernel check", "## Benchmark vs prediction", "## Calibration (measured on this GPU)"):
        assert heading in text


def test_microbench_section_uses_the_suite(tmp_path):
    from advisor.jsonout import document, dumps, to_jsonable
    from advisor.microbench.results import CaseResult, Stream, Suite, to_payload

    suite = Suite(device_name="NVIDIA GeForce RTX 3090", uuid="GPU-0badc0de-1111-2222-3333-444455556666", cc=(8, 6),
                  sm_count=82, gpu_id="rtx-3090", act_dtype="bf16",
                  streams=(Stream("copy", 851.0, 1024.0), Stream("read", 880.0, 1024.0)),
                  results=(CaseResult("w4a16_nvfp4", 1, 5120, 17408, "gemv", "BLOCK_N=64", 61.5, 46_000_000,
                                      178_257_920, 748.0, 2.9, 87.9),
                           CaseResult("bf16", 8192, 5120, 17408, skipped="out of budget")),
                  table_bandwidth_gbs=936.0, table_peak_tflops=71.0)
    mb = tmp_path / "mb.json"
    mb.write_text(dumps(document("microbench", to_jsonable(to_payload(suite, None, None)))))
    target = tmp_path / "r.md"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--microbench", mb, "-o", target]) == 0
    text = target.read_text()
    assert "## Microbenchmarks" in text and "| w4a16_nvfp4 | 5120x17408 | 1 | gemv |" in text
    assert "skipped: out of budget" in text and "0badc0de" not in text
    js = tmp_path / "r.json"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--microbench", mb, "-o", js]) == 0
    data = json.loads(js.read_text())
    assert schema_errors(data) == [] and data["microbench"]["suite"]["results"][0]["gbs"] == 748.0


def test_a_failed_stage_still_writes_a_valid_report(tmp_path, capsys):
    target = tmp_path / "r.json"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--engine", "vllm@0.1", "--json", "-o", target]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "report-written" and "explain" in summary["errors"]
    data = json.loads(target.read_text())
    assert schema_errors(data) == []
    assert data["kernel_path"] is None and data["plan"] is None and "no rules" in data["errors"]["explain"]
    assert data["checkpoint"]["label"] == "W4A4-NVFP4"
    md = tmp_path / "r.md"
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--engine", "vllm@0.1", "-o", md]) == 0
    assert "**Could not be computed**" in md.read_text()


def test_bench_file_without_measurements_is_bad_input(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"report": {"decode_tps": "fast"}}))
    assert run_cli(["report", DEMO, "--gpu", "rtx-3090", "--bench", bench, "-o", tmp_path / "r.md"]) == 3
    assert "no measured decode_tps" in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()
