"""Fixtures for the GPU table tests: the shipped table, and writers for broken copies of it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from advisor.gpu_table import default_path, load_gpu_table


@pytest.fixture(scope="session")
def table():
    return load_gpu_table()


@pytest.fixture(scope="session")
def raw_table() -> dict:
    """The shipped YAML as plain data (deep-copy before mutating)."""
    return yaml.safe_load(default_path().read_text(encoding="utf-8"))


@pytest.fixture
def write_table(tmp_path, raw_table):
    """write_table(mutate) -> path of a copy of the real table after mutate(data) ran on it."""
    counter = iter(range(1000))

    def write(mutate=None, text: str | None = None) -> Path:
        path = tmp_path / f"gpus-{next(counter)}.yaml"
        if text is None:
            data = copy.deepcopy(raw_table)
            if mutate is not None:
                mutate(data)
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write
