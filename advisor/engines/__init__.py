"""The engine registry: one EngineSpec per serving engine (advisor.engines.spec), looked up by name.

Cheap to import (no pydantic, no yaml, no launchers): ``get``, ``find``, ``tuned()``, ``launchable()``.
Spellings of settings: advisor.engines.flags; version choice for versioned data: advisor.engines.versions.
"""

from advisor.engines.registry import DEFAULT, SPECS, find, get, launchable, tuned
from advisor.engines.spec import EngineSpec

__all__ = ["DEFAULT", "SPECS", "EngineSpec", "find", "get", "launchable", "tuned"]
