"""Fixtures for the converter tests: synthetic BF16 checkpoints written with safetensors.torch
(an independent writer), and ModelOpt 0.47 exports of a tiny random Llama built in the oracle venv."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import quant_python

ORACLE_SCRIPTS = Path(__file__).parent / "oracle_scripts"


def write_checkpoint(folder: Path, tensors: dict, config: dict | None = None, shards: int = 1) -> Path:
    """Write torch tensors as a (possibly sharded) safetensors checkpoint with config.json."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    names = list(tensors)
    if shards == 1:
        save_file({n: tensors[n].contiguous() for n in names}, str(folder / "model.safetensors"),
                  metadata={"format": "pt"})
    else:
        wm = {}
        per = -(-len(names) // shards)
        for i in range(shards):
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = names[i * per:(i + 1) * per]
            save_file({n: tensors[n].contiguous() for n in part}, str(folder / fname), metadata={"format": "pt"})
            wm.update({n: fname for n in part})
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        (folder / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": wm}))
    (folder / "config.json").write_text(json.dumps(config or {"model_type": "llama"}))
    return folder


def run_oracle(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    py = quant_python()
    if py is None:
        pytest.skip("oracle venv (nvidia-modelopt 0.47) not available")
    proc = subprocess.run([py, str(ORACLE_SCRIPTS / script), *args], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"oracle {script} failed:\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def modelopt_w4a16(tmp_path_factory):
    """(bf16 folder, ModelOpt W4A16_NVFP4 export folder), single file."""
    base = tmp_path_factory.mktemp("mo_w4a16")
    run_oracle("modelopt_export.py", "llama", str(base / "bf16"), str(base / "export"), "W4A16_NVFP4_CFG")
    return base / "bf16", base / "export"


@pytest.fixture(scope="session")
def modelopt_nvfp4_sharded(tmp_path_factory):
    """(bf16 folder, calibrated ModelOpt NVFP4 export folder), both sharded at 1MB."""
    base = tmp_path_factory.mktemp("mo_nvfp4")
    run_oracle("modelopt_export.py", "llama", str(base / "bf16"), str(base / "export"), "NVFP4_DEFAULT_CFG", "1MB")
    return base / "bf16", base / "export"


@pytest.fixture(scope="session")
def modelopt_qwen35_moe(tmp_path_factory):
    """(bf16 folder, ModelOpt W4A16_NVFP4 export) of a tiny hybrid GDN + MoE Qwen3.5 model."""
    base = tmp_path_factory.mktemp("mo_qwen35moe")
    run_oracle("modelopt_export.py", "qwen3_5_moe", str(base / "bf16"), str(base / "export"), "W4A16_NVFP4_CFG")
    return base / "bf16", base / "export"
