"""Data shipped with the advisor: GPU table, engine rules, workloads (YAML).

Kept as a package so the files install with the wheel; ``PROFILES_DIR`` is their folder.
"""

from pathlib import Path

PROFILES_DIR = Path(__file__).resolve().parent
