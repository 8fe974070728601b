"""The watchdog against the real NVML: GPU samples while a CPU-bound process runs (skipped without a GPU)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launchers import watchdog

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(60)]


def _gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001 - no library / driver / device
        return 0


def test_cpu_bound_server_next_to_an_idle_gpu_is_a_cpu_fallback():
    if not _gpu_count():
        pytest.skip("no NVIDIA GPU")
    burner = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"])
    try:
        dog = watchdog.Watchdog(lambda: [burner.pid], interval_s=0.25).start()
        burner.wait(10)
        samples = dog.stop()
    finally:
        burner.kill()
    with_gpu = [s for s in samples if s.gpus]
    assert with_gpu, "NVML answered but no GPU sample was taken"
    g = with_gpu[0].gpus[0]
    assert g.util_pct is not None and g.max_sm_clock_mhz and g.temp_c is not None
    kinds = {f.kind for f in watchdog.findings(samples)}
    utils = sorted(max(x.util_pct or 0 for x in s.gpus) for s in with_gpu)
    # the burner is CPU-only: when nothing else uses the GPU this is exactly the CPU-fallback pattern
    assert ("cpu_fallback" in kinds) == (utils[len(utils) // 2] < 5.0)
    assert "no_gpu_telemetry" not in kinds
