"""The real nvidia-ml-py on this machine, and the snapshot recorder."""

from __future__ import annotations

from probe_fixtures import load_snapshot, snapshot_names

import pytest

from advisor.probe import probe
from advisor.probe.nvml_source import read_snapshot
from advisor.probe.snapshot import RecordingNvml, ReplayNvml, record, replay_process_name


def test_real_probe_never_raises():
    import pynvml

    result = probe()
    assert result.status in ("ok", "no-driver", "no-gpu", "error")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        assert result.status == "no-driver" and result.devices == ()
        assert "no NVIDIA driver" in result.message
        assert record()["init"] == {"error": "LibraryNotFound"}
        return
    except pynvml.NVMLError:
        assert result.status in ("no-driver", "no-gpu", "error")
        return
    pynvml.nvmlShutdown()
    assert result.status in ("ok", "no-gpu")
    assert len(result.devices) == pynvml_count(pynvml)


def pynvml_count(pynvml) -> int:
    pynvml.nvmlInit()
    try:
        return pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()


@pytest.mark.parametrize("name", snapshot_names())
def test_recording_replays_to_the_same_answers(name):
    """Record through RecordingNvml (wrapping a replay) and replay the recording: same result."""
    snap = load_snapshot(name)
    rec = RecordingNvml(ReplayNvml(snap))
    names = replay_process_name(snap)
    first = read_snapshot(rec, process_name=names, own_pid=1)
    second = read_snapshot(ReplayNvml(rec.snap), process_name=names, own_pid=1)
    assert second == first


def test_unexpected_binding_failure_is_a_status_not_a_crash():
    """An incomplete answer set (here: a snapshot with nothing in it) surfaces as status 'error'."""
    result = probe(ReplayNvml({"devices": [{}]}))
    assert result.status == "error" and "NVML probe failed" in result.message and result.devices == ()


def test_the_no_driver_shortcut_says_what_pynvml_says():
    """read_snapshot() answers a machine without the NVML library without importing pynvml
    (nvml_source._no_nvml_library); the words are pynvml's for that error."""
    import pynvml

    from advisor.probe import nvml_source

    err = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert str(err) == nvml_source._LIBRARY_NOT_FOUND and type(err).__name__ in nvml_source._NO_DRIVER_ERRORS


def test_without_the_nvml_library_the_snapshot_is_the_one_pynvml_gives():
    import ctypes
    import os
    import subprocess
    import sys

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has the NVML library")
    code = ("import sys; from advisor.probe.nvml_source import read_snapshot; a = read_snapshot(); "
            "print(a.status, 'pynvml' in sys.modules); import pynvml; "
            "print(read_snapshot() == a, read_snapshot(pynvml) == a)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         timeout=120)
    assert out.stdout.split() == ["no-driver", "False", "True", "True"], out.stderr[-2000:]
