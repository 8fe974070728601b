"""What the advisor remembers between runs: last checkpoint, GPU choice, engine, theme, and the
Launch tab's engine and saved profile.

Stored as YAML in the user's config dir (platformdirs). A corrupt or unreadable file is ignored
(state is a convenience, never a reason to fail) and is not overwritten until the next save.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from advisor import engines
from advisor.yamlio import safe_load

APP_NAME = "nvfp4-advisor"


def config_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))


@dataclass(frozen=True)
class UserState:
    checkpoint: str | None = None
    gpu_id: str | None = None
    gpus: int = 1
    engine: str = engines.DEFAULT
    engine_version: str | None = None      # None: the newest rule file for the engine
    workload: str = "interactive"
    theme: str = "textual-dark"
    launch_engine: str | None = None       # the Launch tab's engine; None: the explained engine
    launch_profile: str | None = None      # the saved launch profile last picked or saved
    recent: tuple[str, ...] = field(default_factory=tuple)

    def with_recent(self, source: str, keep: int = 8) -> "UserState":
        recent = (source,) + tuple(r for r in self.recent if r != source)
        return dataclasses.replace(self, checkpoint=source, recent=recent[:keep])


def state_path() -> Path:
    return config_dir() / "state.yaml"


def load_state(path: Path | None = None) -> UserState:
    path = path or state_path()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return UserState()              # no state yet: yaml is not imported (the TUI's first paint waits)
    import yaml

    try:
        raw = safe_load(text) or {}
    except (ValueError, yaml.YAMLError):
        return UserState()
    if not isinstance(raw, dict):
        return UserState()
    known = {f.name for f in dataclasses.fields(UserState)}
    values = {k: v for k, v in raw.items() if k in known}
    if "recent" in values:
        values["recent"] = tuple(str(r) for r in values["recent"] or ())
    try:
        return UserState(**values)
    except TypeError:
        return UserState()


def save_state(state: UserState, path: Path | None = None) -> Path:
    """Atomic write: a crash mid-save never leaves a truncated state file."""
    import yaml

    path = path or state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dataclasses.asdict(state)
    data["recent"] = list(state.recent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=True)
    os.replace(tmp, path)
    return path
