"""The validated-table cache: same specs as validation, invalidated by any edit, never trusted blindly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import gpu_table
from advisor.errors import BadInput


@pytest.fixture(autouse=True)
def _fresh():
    gpu_table._load_cached.cache_clear()
    yield
    gpu_table._load_cached.cache_clear()


def test_cached_load_equals_validated_load():
    first = gpu_table.load_gpu_table()
    raw = gpu_table.default_path().read_bytes()
    assert gpu_table._cache_file(raw).exists()
    gpu_table._load_cached.cache_clear()
    assert gpu_table.load_gpu_table() == first
    assert gpu_table.load_sources() == gpu_table._validate(str(gpu_table.default_path()), raw)[1]


def test_cached_load_skips_pydantic_in_a_fresh_process(tmp_path):
    gpu_table.load_gpu_table()           # fills the cache under this test's XDG_CACHE_HOME
    code = ("import sys; from advisor.gpu_table import get_gpu; s = get_gpu('rtx-3090'); "
            "print(s.cc, 'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         timeout=60).stdout.split()
    assert out == ["(8,", "6)", "False"]


def test_corrupt_cache_falls_back_to_validation():
    first = gpu_table.load_gpu_table()
    raw = gpu_table.default_path().read_bytes()
    gpu_table._cache_file(raw).write_text("{not json")
    gpu_table._load_cached.cache_clear()
    assert gpu_table.load_gpu_table() == first


def test_an_edited_table_is_validated_again(tmp_path):
    src = gpu_table.default_path().read_text()
    good = tmp_path / "gpus.yaml"
    good.write_text(src)
    assert gpu_table.load_gpu_table(good)
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace("  - id: rtx-3090\n", "  - id: rtx-3090\n    surprise: 1\n", 1))
    with pytest.raises(BadInput, match="surprise"):
        gpu_table.load_gpu_table(bad)
    assert Path(bad).read_bytes() != Path(good).read_bytes()
