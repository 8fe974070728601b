"""Fixtures of the checkpoint tests; the builders live in ckpt_builders.py (a unique module name)."""

from __future__ import annotations

import pytest

from ckpt_builders import write_checkpoint


@pytest.fixture
def build(tmp_path):
    """build(name, tensors, config, **kw) -> folder path (str)."""
    def _build(name, tensors, config=None, **kw):
        return str(write_checkpoint(tmp_path / name, tensors, config, **kw))
    return _build
