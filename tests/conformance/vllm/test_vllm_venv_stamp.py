"""The conformance suite trusts .venv-vllm only when .ci/venv-vllm.sh finished building it: the script writes
its stamp last, and the suite recomputes that stamp the way the script does."""

from __future__ import annotations

import subprocess

import pytest

from . import vllm_cache

pytestmark = pytest.mark.conformance


def test_the_stamp_is_computed_as_the_script_computes_it():
    script = vllm_cache.VENV_SCRIPT
    pins = subprocess.run(["sed", "-n", "/^PINS=(/,/^)/p", str(script)], capture_output=True, text=True,
                          check=True).stdout
    out = subprocess.run(["bash", "-c", pins + f'\n{{ cat "{script}"; echo "${{PINS[*]}}"; }} | sha1sum | cut -c1-12'],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert len(out) == 12 and vllm_cache.venv_stamp() == out


def test_a_venv_without_its_stamp_is_refused(tmp_path, monkeypatch):
    py = tmp_path / "bin" / "python"
    py.parent.mkdir()
    py.touch()
    monkeypatch.delenv("NVFP4_ADVISOR_VLLM_PYTHON", raising=False)
    monkeypatch.setattr(vllm_cache, "VENV_PYTHON", py)
    assert "did not finish" in vllm_cache.venv_problem()
    with pytest.raises(RuntimeError, match="did not finish"):
        vllm_cache.run(["demo--qwen3-8b-nvfp4|sm_90|flashinfer"], vllm_cache.corpus())
    (tmp_path / ".stamp").write_text("0123456789ab\n")
    assert "another version" in vllm_cache.venv_problem()
    (tmp_path / ".stamp").write_text(vllm_cache.venv_stamp() + "\n")
    assert vllm_cache.venv_problem() is None
