"""A bench shorter than one watchdog interval still gets its sample: without it a quick run on a
machine without NVML said nothing at all instead of "GPU use was not measured"."""

from __future__ import annotations

import os

from launchers import watchdog


def test_a_run_shorter_than_one_interval_still_gets_one_sample(monkeypatch):
    monkeypatch.setattr(watchdog, "_nvml", lambda: None)            # no NVML, as on this machine
    dog = watchdog.Watchdog(lambda: [os.getpid()], interval_s=60.0).start()
    sum(i * i for i in range(200_000))                              # some server CPU time
    samples = dog.stop()
    assert len(samples) == 1 and samples[0].cpu_cores is not None and samples[0].gpus == ()
    assert [f.kind for f in watchdog.findings(samples)] == ["no_gpu_telemetry"]


def test_a_long_run_is_sampled_per_interval_not_once_more_at_stop(monkeypatch):
    monkeypatch.setattr(watchdog, "_nvml", lambda: None)
    dog = watchdog.Watchdog(lambda: [os.getpid()], interval_s=0.05).start()
    import time

    time.sleep(0.4)
    n_running = len(dog.samples)
    samples = dog.stop()
    assert n_running >= 2 and len(samples) in (n_running, n_running + 1)
