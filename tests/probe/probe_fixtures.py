"""Snapshot helpers shared by the probe tests (a plain module: `conftest` names are ambiguous)."""

from __future__ import annotations

import json
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "snapshots"


def load_snapshot(name: str) -> dict:
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def snapshot_names() -> list[str]:
    return sorted(p.stem for p in SNAPSHOTS.glob("*.json"))
