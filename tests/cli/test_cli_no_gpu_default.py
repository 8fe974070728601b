"""No GPU here and no --gpu: explain, plan, report, the piped answer and the TUI all plan for the same
what-if card and say so first; `--gpu auto` still insists on a probed card; launch does not tune for
a card it was not given (tests/launch/test_launch_tuned_dry_run.py)."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main
from advisor.gpu_table import WHAT_IF_GPU, get_gpu
from advisor.probe import probe

DEMO = "demo:qwen3-8b-nvfp4"
SAID = "No GPU here and no --gpu: 1 x GeForce RTX 3090 as a what-if; pass --gpu ID for your card"

pytestmark = pytest.mark.skipif(bool(probe().devices), reason="this machine has a GPU: the default is the probed card")


@pytest.fixture(autouse=True)
def _data(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


@pytest.mark.parametrize("command", ["plan", "explain"])
def test_default_is_the_what_if_card_said_first(command, capsys):
    assert main([command, DEMO]) == 0
    out = capsys.readouterr().out
    assert " ".join(out.split()).startswith(SAID)
    explicit = main([command, DEMO, "--gpu", WHAT_IF_GPU])
    text = capsys.readouterr().out
    assert explicit == 0 and "No GPU here" not in text


def test_json_carries_the_same_choice_and_note(capsys):
    assert main(["plan", DEMO, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"]["id"] == WHAT_IF_GPU and doc["gpu"]["selection"] == SAID


@pytest.mark.parametrize("command", ["plan", "explain"])
def test_gpu_auto_still_needs_a_probed_card(command, capsys):
    assert main([command, DEMO, "--gpu", "auto"]) == 2
    assert "no GPU to plan for" in capsys.readouterr().err


def test_tui_and_piped_answer_use_the_same_card():
    from advisor.services import views

    assert views.DEFAULT_GPU == WHAT_IF_GPU
    assert views.default_gpu_id(views.gpu_choices()) == get_gpu(WHAT_IF_GPU).id
