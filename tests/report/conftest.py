"""Report fixtures: real `nvfp4-advisor report` runs on a demo checkpoint, with planted secrets."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from report_fixtures import API_KEY, DEMO, ENV_KEY, FORMATS, GPUS, HF_TOKEN, run_cli


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{(gpu, fmt): text} for the demo checkpoint on each GPU, matrix over the three GPUs x 2 engines."""
    base = tmp_path_factory.mktemp("reports")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (("XDG_CONFIG_HOME", "cfg"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")):
            mp.setenv(var, str(base / sub))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_TOKEN", HF_TOKEN)
        mp.setenv("OPENAI_API_KEY", ENV_KEY)
        for gpu in GPUS:
            for fmt in FORMATS:
                path = base / f"{gpu}.{fmt}"
                rc = run_cli(["report", DEMO, "--gpu", gpu, "--compare", ",".join(GPUS), "--engine", "vllm,sglang",
                              "--api-key", API_KEY, "-o", path])
                assert rc == 0, (gpu, fmt)
                out[(gpu, fmt)] = path.read_text(encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """The same chain computed directly: explain per GPU and `plan --json` per GPU (the contract)."""
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain

    base = tmp_path_factory.mktemp("plans")
    ck = inspect_checkpoint(DEMO)
    result = {"checkpoint": ck, "explain": {}, "plan": {}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(base / "data"))
        for gpu in GPUS:
            result["explain"][gpu] = explain(ck, get_gpu(gpu))
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert run_cli(["plan", DEMO, "--gpu", gpu, "--json"]) == 0
            result["plan"][gpu] = json.loads(buf.getvalue())
    return result


@pytest.fixture
def demo_folder(tmp_path) -> Path:
    """The demo's config-only checkpoint copied to a local folder (a real path on disk)."""
    import shutil

    from advisor.checkpoint.demo import demo_path

    dst = tmp_path / "home" / "models" / "qwen3-8b-nvfp4"
    shutil.copytree(demo_path(DEMO.split(":", 1)[1]), dst)
    return dst
