"""Command generators, one module per engine. ``build_command`` is the single entry point; the engine's
module is the one its registry entry names (advisor.engines: EngineSpec.launcher)."""

from __future__ import annotations

import importlib

from advisor import engines
from advisor.errors import UsageError
from launchers.command import LaunchCommand
from launchers.settings import SPEC_METHODS, ServeSettings
from launchers.versions import DetectedVersion, resolve


def _validate(s: ServeSettings) -> None:
    engines.get(s.engine)          # an unknown engine: a usage error naming the choices
    if s.host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(f"refusing to bind {s.host}: the advisor launches servers on 127.0.0.1 only")
    if not (0 < s.port < 65536):
        raise UsageError(f"port {s.port} is out of range")
    for name in ("tp", "pp", "nodes"):
        if getattr(s, name) < 1:
            raise UsageError(f"{name} must be at least 1")
    if s.memory_share is not None and not (0.05 <= s.memory_share <= 1.0):
        raise UsageError(f"memory share {s.memory_share} must be between 0.05 and 1.0")
    if s.max_batch is not None and s.max_batch < 1:
        raise UsageError("max batch must be at least 1")
    if s.speculative is not None:
        if s.speculative.method not in SPEC_METHODS:
            raise UsageError(f"unknown speculative method {s.speculative.method!r}; "
                             f"choose one of {', '.join(SPEC_METHODS)}")
        if s.speculative.draft_tokens < 1:
            raise UsageError("draft tokens must be at least 1")
    if s.nodes > 1 and not s.head_address:
        raise UsageError(f"{s.nodes} nodes: give the Ray head node's IP (--head-address)")
    if s.nodes > 1 and s.tp * s.pp < s.nodes:
        raise UsageError(f"{s.nodes} nodes need tp x pp >= {s.nodes} (got tp {s.tp}, pp {s.pp})")


def build_command(settings: ServeSettings, detected: DetectedVersion | None = None) -> LaunchCommand:
    """argv + env + files for ``settings``, using the flag set of the targeted engine version."""
    _validate(settings)
    version, note = resolve(settings.engine, settings.version, detected)
    mod = importlib.import_module(engines.get(settings.engine).launcher)
    return mod.build(settings, version, note)
