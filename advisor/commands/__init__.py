"""CLI subcommands. Each module here is one working subcommand and defines:

    NAME: str                      the subcommand
    HELP: str                      one line for --help
    ORDER: int                     position in --help (lower first)
    add_arguments(parser) -> None  argparse options (imports nothing heavy)
    run(args) -> Outcome           arguments -> the work (advisor.services, shared with the TUI, or the
                                   core) -> the answer; raises AdvisorError subclasses on bad input

Modules never import Rich or Textual: they return an :class:`Outcome` holding the JSON document
and a renderer-neutral :class:`advisor.doc.Doc` (None where ``--json`` asked for the JSON only: it is not
built); ``advisor.cli`` draws it (advisor.rich_render). A module is added
only when its command works (no stubs): discovery is by listing this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from advisor import code_cache

if TYPE_CHECKING:
    from advisor.doc import Doc

code_cache.install()    # before the first dataclass: every command's classes from code compiled in an earlier run


@dataclass(frozen=True)
class Outcome:
    json: dict[str, Any]
    doc: Doc | None             # None: not built, for --json (advisor.cli prints only the JSON document)
    exit_code: int = 0


def discover() -> list[ModuleType]:
    import importlib
    import pkgutil

    mods = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))
