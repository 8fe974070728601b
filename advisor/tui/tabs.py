"""The one table of tabs. The key bindings, the TabbedContent's panes and the command palette's
"Show …" entries are all generated from it: a tab is added, renamed or re-keyed here only."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from advisor.tui.panes.bench import BenchPane
from advisor.tui.panes.checkpoint import CheckpointPane
from advisor.tui.panes.cost import CostPane
from advisor.tui.panes.explain import ExplainPane
from advisor.tui.panes.export import ExportPane
from advisor.tui.panes.hardware import HardwarePane
from advisor.tui.panes.launch import LaunchPane
from advisor.tui.panes.microbench import MicrobenchPane
from advisor.tui.panes.pane import Pane


@dataclass(frozen=True)
class Tab:
    id: str             # the TabPane's id (tests and app.tcss use it too)
    title: str          # in the tab bar
    key: str
    key_label: str      # in the footer: short, so F2…F9 fit 80 columns
    palette: str        # the command palette's "Show …" entry
    pane: type[Pane]


TABS: tuple[Tab, ...] = (
    Tab("hardware", "GPU", "f2", "GPU", "Show GPU / hardware", HardwarePane),
    Tab("checkpoint", "Checkpoint", "f3", "Ckpt", "Show checkpoint", CheckpointPane),
    Tab("explain", "Explain", "f4", "Explain", "Show kernel path (explain)", ExplainPane),
    Tab("cost", "Cost", "f5", "Cost", "Show cost and tuning", CostPane),
    Tab("launch", "Launch", "f6", "Launch", "Show launch", LaunchPane),
    Tab("bench", "Bench", "f7", "Bench", "Show benchmark", BenchPane),
    Tab("microbench", "µbench", "f8", "µbench", "Show microbenchmarks", MicrobenchPane),
    Tab("export", "Export", "f9", "Export", "Show export", ExportPane),
)

# F2…F9 share one footer entry ("f2 … f9 tabs", in the tab bar's order): every key fits in 80 columns
_TAB_KEYS = Binding.Group("tabs", compact=False)


def tab_bindings() -> list[Binding]:
    return [Binding(t.key, f"show_tab('{t.id}')", t.key_label, priority=True, group=_TAB_KEYS) for t in TABS]


def tab_panes() -> list[Pane]:
    return [t.pane(t.title, id=t.id) for t in TABS]
