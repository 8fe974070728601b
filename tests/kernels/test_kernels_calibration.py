"""Calibration file: round trip, per-GPU lookup, damaged files ignored; values from a suite."""

from __future__ import annotations

import json

from advisor.calibration import Calibration, calibration_path, load_calibration, save_calibration


def _cal(**kw):
    base = dict(gpu_id="rtx-3090", uuid="GPU-1111", name="NVIDIA GeForce RTX 3090",
                measured_at="2026-12-02T10:00:00+00:00", bandwidth_gbs=870.5,
                kernel_bandwidth_eff={"w4a16_nvfp4": 0.91, "bf16": 0.95}, mma_tflops={"hmma_bf16": 66.0},
                dequant_overhead={"w4a16_nvfp4": 0.04, "bf16": 0.0}, read_bandwidth_gbs=901.0,
                shape=(5120, 17408), software={"triton": "3.9.0"})
    base.update(kw)
    return Calibration(**base)


def test_round_trip_in_the_user_data_dir(tmp_path):
    cal = _cal()
    path = save_calibration(cal)
    assert path.is_file() and str(path).startswith(str(tmp_path / "xdg-data"))   # conftest isolates XDG
    assert "rtx-3090" in path.name and "GPU-1111" in path.name
    assert load_calibration("rtx-3090", "GPU-1111") == cal
    assert load_calibration("rtx-3090") == cal


def test_lookup_is_per_gpu_and_uuid(tmp_path):
    old = _cal(uuid="GPU-aaaa", measured_at="2026-01-01T00:00:00+00:00", bandwidth_gbs=800.0)
    new = _cal(uuid="GPU-bbbb", measured_at="2026-06-01T00:00:00+00:00", bandwidth_gbs=850.0)
    for c in (old, new, _cal(gpu_id="rtx-4090", uuid="GPU-cccc")):
        save_calibration(c, base=tmp_path)
    assert load_calibration("rtx-3090", "GPU-aaaa", base=tmp_path) == old
    assert load_calibration("rtx-3090", base=tmp_path) == new            # most recent card of the model
    assert load_calibration("rtx-3090", "GPU-zzzz", base=tmp_path) is None
    assert load_calibration("h100-sxm", base=tmp_path) is None
    assert load_calibration("rtx-4090", base=tmp_path).uuid == "GPU-cccc"


def test_damaged_or_foreign_files_are_ignored(tmp_path):
    good = save_calibration(_cal(), base=tmp_path)
    calibration_path("rtx-3090", "GPU-2", base=tmp_path).write_text("{not json")
    calibration_path("rtx-3090", "GPU-3", base=tmp_path).write_text(json.dumps({"gpu_id": "rtx-3090"}))
    assert load_calibration("rtx-3090", "GPU-2", base=tmp_path) is None
    assert load_calibration("rtx-3090", "GPU-3", base=tmp_path) is None
    assert load_calibration("rtx-3090", base=tmp_path) == _cal()
    assert good.exists()
    assert load_calibration("rtx-3090", base=tmp_path / "missing") is None


def test_odd_ids_make_safe_file_names(tmp_path):
    cal = _cal(gpu_id="nvidia-rtx-pro-6000/blackwell", uuid=None)
    path = save_calibration(cal, base=tmp_path)
    assert path.parent == tmp_path and "/" not in path.name
    assert load_calibration("nvidia-rtx-pro-6000/blackwell", base=tmp_path) == cal
