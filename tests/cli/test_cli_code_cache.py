"""The dataclass code store (advisor.code_cache): a class built from stored code is the class a plain
compile builds, a damaged or foreign store only costs speed, NVFP4_ADVISOR_NO_CACHE=1 writes nothing,
and `plan --json` is the same document with the store filled, empty or off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

# A frozen, ordered, kw-only mix with defaults and a factory; printed as the facts a caller could see.
CLASSES = r"""
import dataclasses, json, sys
from advisor import code_cache
code_cache.install()
from dataclasses import dataclass, field

@dataclass(frozen=True, order=True)
class Point:
    x: int
    y: int = 2
    tags: tuple = field(default_factory=tuple)

@dataclass(kw_only=True, slots=True)
class Box:
    name: str
    size: float = 1.0

p = Point(1)
try:
    p.x = 5
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
facts = {
    "repr": repr(p), "eq": p == Point(1, 2, ()), "lt": Point(0) < p, "hash": hash(p) == hash(Point(1)),
    "frozen": frozen, "box": repr(Box(name="b")),
    "init_return": repr(Point.__init__.__annotations__.get("return")),   # None, not the string 'None'
    "doc": Point.__doc__,
}
print(json.dumps({"facts": facts, "from_store": bool(code_cache._used) and not code_cache._new}))
"""


def _run(code: str, cache: str, *args: str, no_cache: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    env.pop("NVFP4_ADVISOR_NO_CACHE", None)
    if no_cache:
        env["NVFP4_ADVISOR_NO_CACHE"] = "1"
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _store_files(cache) -> list:
    return sorted((cache / "nvfp4-advisor" / "code").rglob("*.marshal"))


def test_classes_from_stored_code_are_the_classes_a_compile_builds(tmp_path):
    plain = json.loads(_run(CLASSES, str(tmp_path / "off"), no_cache=True).stdout)
    first = json.loads(_run(CLASSES, str(tmp_path)).stdout)
    second = json.loads(_run(CLASSES, str(tmp_path)).stdout)
    assert plain["facts"] == first["facts"] == second["facts"]
    assert plain["facts"]["frozen"] and plain["facts"]["init_return"] == "None"
    assert (first["from_store"], second["from_store"]) == (False, True)
    assert not _store_files(tmp_path / "off")                  # NVFP4_ADVISOR_NO_CACHE: nothing written


def test_a_damaged_store_costs_speed_only_and_is_replaced(tmp_path):
    _run(CLASSES, str(tmp_path))
    (store,) = _store_files(tmp_path)
    store.write_bytes(store.read_bytes()[: store.stat().st_size // 2])      # truncated
    again = json.loads(_run(CLASSES, str(tmp_path)).stdout)
    assert again["from_store"] is False and again["facts"]["frozen"]
    assert json.loads(_run(CLASSES, str(tmp_path)).stdout)["from_store"] is True


def test_a_save_removes_the_one_file_store_of_earlier_versions(tmp_path):
    legacy = tmp_path / "nvfp4-advisor" / "code" / f"dataclasses-{sys.implementation.cache_tag}.marshal"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"x" * 1000)
    _run(CLASSES, str(tmp_path))                                 # compiles new code, so it saves
    assert not legacy.exists()
    assert _store_files(tmp_path)                                # the per-module files are written instead


def test_plan_json_is_the_same_document_with_the_store_filled_empty_or_off(tmp_path):
    argv = ["-m", "advisor", "plan", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--engine", "vllm", "--json"]
    run = [sys.executable, *argv]

    def plan(cache, off=False):
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "NO_COLOR": "1"}
        env.pop("NVFP4_ADVISOR_NO_CACHE", None)
        if off:
            env["NVFP4_ADVISOR_NO_CACHE"] = "1"
        proc = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    empty = plan(tmp_path)
    assert _store_files(tmp_path)
    assert plan(tmp_path) == empty == plan(tmp_path / "off", off=True)
