"""How people type a card: RTX3090, rtx 3090, 3090 name the RTX 3090 (every command, the TUI too);
a number shared by several cards is a usage error that suggests only those cards."""

from __future__ import annotations

import pytest

from advisor.errors import UsageError
from advisor.gpu_table import get_gpu, load_gpu_table


@pytest.mark.parametrize("typed,gpu_id", [
    ("RTX3090", "rtx-3090"), ("rtx3090", "rtx-3090"), ("3090", "rtx-3090"), ("RTX_3090", "rtx-3090"),
    ("3090 Ti", "rtx-3090-ti"), ("3090ti", "rtx-3090-ti"), ("5090", "rtx-5090"), ("4090", "rtx-4090"),
    ("2080ti", "rtx-2080-ti"), ("5070ti", "rtx-5070-ti"), ("A6000", "rtx-a6000"), ("rtx6000ada", "rtx-6000-ada"),
])
def test_compact_and_bare_number_spellings(typed, gpu_id):
    assert get_gpu(typed).id == gpu_id


@pytest.mark.parametrize("typed,cards", [
    ("h100", {"h100-sxm", "h100-pcie"}),
    ("RTX 6000", {"quadro-rtx-6000", "rtx-6000-ada"}),
    ("6000", {"quadro-rtx-6000", "rtx-a6000", "rtx-6000-ada", "rtx-pro-6000-bw-ws", "rtx-pro-6000-bw-server"}),
])
def test_ambiguous_number_names_only_the_cards_it_could_mean(typed, cards):
    with pytest.raises(UsageError) as info:
        get_gpu(typed)
    hint = str(info.value).split("close matches: ")[1].split(" (")[0].split(", ")
    assert set(hint) == cards


def test_every_table_id_still_resolves_to_itself():
    for spec in load_gpu_table():
        assert get_gpu(spec.id).id == spec.id
        assert get_gpu(spec.id.upper().replace("-", "")).id == spec.id


def test_cli_plan_and_tui_take_the_spelling(tmp_path, monkeypatch, capsys):
    from advisor.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["plan", "demo:qwen3-8b-nvfp4", "--gpu", "RTX3090", "--json"]) == 0
    assert '"rtx-3090"' in capsys.readouterr().out
    seen = {}
    monkeypatch.setattr("advisor.tui.run_app", lambda **kw: seen.update(kw) or 0)
    assert main(["tui", "demo:qwen3-8b-nvfp4", "--gpu", "3090"]) == 0
    assert seen["gpu"] == "rtx-3090"      # the id the GPU list holds, not the spelling
