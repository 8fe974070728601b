"""`plan --json` run in-process and its trade-off rows, for the cost tests (importable: unique name)."""

from __future__ import annotations

import json

from advisor.cli import main


def plan_json(capsys, *argv) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def tradeoff_rows(doc: dict, knob: str) -> list[dict]:
    return [o for o in doc["tradeoffs"] if o["knob"] == knob]


def chosen_tradeoff(doc: dict, knob: str) -> dict:
    (row,) = [o for o in tradeoff_rows(doc, knob) if o["chosen"]]
    return row
