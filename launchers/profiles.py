"""Saved launch profiles: ServeSettings as YAML in the user config dir, to re-launch with one key.

The API key is never written: a profile stores the NAME of the environment variable to read it from.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from advisor.errors import BadInput
from launchers.settings import ServeSettings, Speculative

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def profiles_dir() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("nvfp4-advisor")) / "launch-profiles"


def _path(name: str, directory: Path | None) -> Path:
    if not _NAME.match(name):
        raise BadInput(f"profile name {name!r}: use letters, digits, '.', '_' or '-'")
    return (directory or profiles_dir()) / f"{name}.yaml"


def save(name: str, settings: ServeSettings, *, api_key_env: str | None = None, directory: Path | None = None) -> Path:
    from advisor.redact import argv_secrets

    if argv_secrets(settings.extra_args):
        # a profile is a plain file: a key belongs in the environment, named by --api-key-env
        raise BadInput("a launch profile does not store secrets: pass the key with --api-key-env VAR instead of "
                       "--extra-arg", path=str(_path(name, directory)))
    data = dataclasses.asdict(dataclasses.replace(settings, api_key=None))
    data.pop("api_key")
    data["api_key_env"] = api_key_env
    data["extra_args"] = list(settings.extra_args)
    data["extra_env"] = {k: v for k, v in settings.extra_env}
    data["cuda_devices"] = list(settings.cuda_devices)
    p = _path(name, directory)
    import yaml         # here, not at the top: the TUI lists profile names before its first paint

    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump({"profile": name, "settings": data}, sort_keys=False))
    return p


def load(name: str, *, directory: Path | None = None) -> tuple[ServeSettings, str | None]:
    """The settings and the api-key environment variable name (None when the profile has no key)."""
    import yaml

    p = _path(name, directory)
    if not p.exists():
        known = ", ".join(list_names(directory)) or "none saved"
        raise BadInput(f"no launch profile {name!r} (saved: {known})", path=str(p))
    try:
        doc = yaml.safe_load(p.read_text())
        data = dict(doc["settings"])
    except (yaml.YAMLError, KeyError, TypeError) as err:
        raise BadInput(f"not a launch profile: {err}", path=str(p)) from None
    key_env = data.pop("api_key_env", None)
    fields = {f.name for f in dataclasses.fields(ServeSettings)}
    unknown = set(data) - fields
    if unknown:
        raise BadInput(f"unknown keys {sorted(unknown)}", path=str(p))
    try:
        if data.get("speculative"):
            data["speculative"] = Speculative(**data["speculative"])
        data["extra_args"] = tuple(data.get("extra_args") or ())
        data["extra_env"] = tuple((str(k), str(v)) for k, v in (data.get("extra_env") or {}).items())
        data["cuda_devices"] = tuple(int(d) for d in data.get("cuda_devices") or ())
        return ServeSettings(**data), key_env
    except (TypeError, ValueError) as err:
        raise BadInput(f"invalid profile: {err}", path=str(p)) from None


def list_names(directory: Path | None = None) -> list[str]:
    d = directory or profiles_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []
