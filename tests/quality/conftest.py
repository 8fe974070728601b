"""Fixtures of the quality tests: a synthetic BF16 Llama, our converter's NVFP4 twin, and (oracle
tests) real quantized checkpoints from llm-compressor and ModelOpt built in the oracle venv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from quality_builders import LLAMA_CONFIG, llama_tensors, write  # noqa: E402


@pytest.fixture(scope="session")
def bf16_ckpt(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("q") / "bf16", llama_tensors(), LLAMA_CONFIG)


@pytest.fixture(scope="session")
def nvfp4_ckpt(bf16_ckpt, tmp_path_factory) -> Path:
    """Our converter's ModelOpt-layout NVFP4 twin (bit-exact with ModelOpt 0.47)."""
    from advisor.convert import Options, convert

    out = tmp_path_factory.mktemp("q") / "nvfp4"
    convert(bf16_ckpt, out, options=Options(threads=1))
    return out


@pytest.fixture(scope="session")
def quality_oracles(tmp_path_factory) -> Path:
    from tests.conftest import quant_python

    py = quant_python()
    if py is None:
        pytest.skip("oracle venv (llm-compressor + nvidia-modelopt) not set up")
    out = tmp_path_factory.mktemp("quality-oracles")
    r = subprocess.run([py, str(HERE / "producers" / "make_quality_oracles.py"), str(out)], capture_output=True,
                       text=True, timeout=850, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(out),
                                                   "TRANSFORMERS_VERBOSITY": "error"})
    if r.returncode != 0:
        pytest.fail("producer failed:\n" + r.stderr[-3000:])
    assert json.loads((out / "manifest.json").read_text())
    return out
