"""Fixtures for the cost tests; the builders live in cost_builders.py."""

from __future__ import annotations

import pytest

from cost_builders import rtx3090


@pytest.fixture
def gpu3090():
    return rtx3090()
