"""Saved launch profiles: their names, what they serve, their command line, and saving an edited command."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.services.analysis import Analysis


def saved_profiles() -> list[str]:
    from launchers import profiles

    return profiles.list_names()


def profile_model(name: str) -> str:
    """The model (checkpoint) a saved launch profile serves."""
    from launchers import profiles

    settings, _ = profiles.load(name)
    return settings.model


def same_model(model: str, analysis: Analysis | None) -> bool:
    """A profile's model is the analysed checkpoint (as typed, as inspected, or the same folder)."""
    if analysis is None:
        return False
    names = {analysis.selection.checkpoint}
    if analysis.checkpoint is not None:
        names.add(analysis.checkpoint.source)
    if model in names:
        return True
    try:
        here = Path(model).expanduser().resolve()
        return any(here == Path(n).expanduser().resolve() and Path(n).expanduser().exists() for n in names)
    except (OSError, ValueError):
        return False


def profile_command_line(name: str) -> tuple[str, str]:
    """(engine, display line) of a saved launch profile."""
    from launchers import profiles
    from launchers.engines import build_command

    settings, _ = profiles.load(name)
    return settings.engine, build_command(settings).display()


def _flag_groups(argv) -> list[tuple[str, ...]]:
    """argv as units: a flag with the values that follow it, or a lone positional word."""
    groups: list[list[str]] = []
    for word in argv:
        if word.startswith("-") or not groups or not groups[-1][0].startswith("-"):
            groups.append([word])
        else:
            groups[-1].append(word)
    return [tuple(g) for g in groups]


def save_profile(name: str, line: str, analysis: Analysis | None, engine: str | None = None, *,
                 gpu_here: bool = False) -> Path:
    """Save the (edited) command as a launch profile: --port/--host become settings, every other
    flag or environment variable the edit added (or changed) is kept as an extra."""
    from advisor.services.launch.command import command_from_line
    from launchers import profiles
    from launchers.engines import build_command

    cmd = command_from_line(line, analysis, engine, gpu_here=gpu_here)
    settings = cmd.settings
    rebuilt = build_command(settings)           # the generated command with the edited port/host
    known = set(_flag_groups(rebuilt.argv))
    extra = tuple(w for g in _flag_groups(cmd.argv) if g not in known for w in g)
    env = tuple(kv for kv in cmd.env if kv not in rebuilt.env)
    if extra or env:
        settings = dataclasses.replace(settings, extra_args=settings.extra_args + extra,
                                       extra_env=settings.extra_env + env)
    return profiles.save(name, settings)


def load(name: str):
    """(ServeSettings, API-key variable or None) of a saved profile."""
    from launchers import profiles

    return profiles.load(name)


def save(name: str, settings, *, api_key_env: str | None = None) -> Path:
    """Save SETTINGS as profile NAME (the key itself never: only the variable that holds it)."""
    from launchers import profiles

    return profiles.save(name, settings, api_key_env=api_key_env)
