"""The parsed-profile cache (advisor.profile_cache): every shipped profile comes back as a fresh parse
does, an edited rule file is never served from the cache, a damaged entry or an unwritable cache dir
only costs speed, and data JSON would change is never cached."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from advisor import profile_cache
from advisor.errors import BadInput
from advisor.kernel_path import rule_files as rules
from advisor.kernel_path import rules as schema
from advisor.yamlio import load_yaml_file, parse_yaml
from profiles import PROFILES_DIR

PROFILES = sorted(PROFILES_DIR.rglob("*.yaml"))


def _entries() -> list[Path]:
    d = profile_cache.cache_dir()
    return sorted(d.glob("*.json")) if d.exists() else []


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: str(p.relative_to(PROFILES_DIR)))
def test_cached_parse_equals_a_fresh_parse(path):
    fresh = parse_yaml(path.read_text(encoding="utf-8"), str(path), "profile")
    assert load_yaml_file(path, "profile") == fresh            # parsed, then stored
    assert len(_entries()) == 1                                # every shipped profile is JSON-exact
    assert load_yaml_file(path, "profile") == fresh            # from the cache


def test_an_edited_rule_file_is_parsed_and_validated_again(tmp_path):
    folder = tmp_path / "engines"
    folder.mkdir()
    target = folder / "vllm-0.33.yaml"
    shutil.copy(rules.engines_dir() / "vllm-0.33.yaml", target)
    first, _ = rules.load_rules("vllm", folder=folder)
    text = target.read_text()
    target.write_text(text.replace("display_name: ", "display_name: Edited ", 1))
    edited, _ = rules.load_rules("vllm", folder=folder)
    assert edited.display_name == "Edited " + first.display_name
    target.write_text(text.replace("\npaths:", "\nsurprise: 1\npaths:", 1))
    with pytest.raises(BadInput, match="surprise"):
        rules.load_rules("vllm", folder=folder)


def test_a_damaged_entry_is_parsed_again_and_replaced(tmp_path):
    path = PROFILES_DIR / "workloads.yaml"
    good = load_yaml_file(path, "workloads file")
    (entry,) = _entries()
    entry.write_text('{"interactive": "not what the file says"')    # truncated JSON
    assert load_yaml_file(path, "workloads file") == good
    assert load_yaml_file(path, "workloads file") == good


def test_a_valid_but_wrong_entry_is_still_validated(tmp_path):
    """The cache is keyed by the text, so a wrong entry means someone wrote it by hand: the loaders'
    validation still runs on what it returns."""
    folder = tmp_path / "engines"
    folder.mkdir()
    shutil.copy(rules.engines_dir() / "vllm-0.33.yaml", folder / "vllm-0.33.yaml")
    rules.load_rules("vllm", folder=folder)
    (entry,) = _entries()
    entry.write_text('{"engine": "vllm", "surprise": 1}')
    for validated in _validated():       # the validated object would be served before the parse
        validated.unlink()
    rules._load_cached.cache_clear()
    with pytest.raises(BadInput):
        rules.load_rules("vllm", folder=folder)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_an_unwritable_cache_dir_only_costs_speed():
    d = profile_cache.cache_dir()
    d.mkdir(parents=True)
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert load_yaml_file(PROFILES_DIR / "workloads.yaml", "workloads file")
        assert _entries() == []
    finally:
        d.chmod(stat.S_IRWXU)


def test_a_cache_dir_that_is_a_file_only_costs_speed(monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setattr(profile_cache, "cache_dir", lambda: blocker / "parsed")
    assert load_yaml_file(PROFILES_DIR / "workloads.yaml", "workloads file")


@pytest.mark.parametrize("text", ["1: one\n2: two\n", "when: 2026-12-03\n", "x: .nan\n"])
def test_data_json_would_change_is_never_cached(tmp_path, text):
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    fresh = parse_yaml(text, str(path), "odd")
    assert load_yaml_file(path, "odd") == fresh or text.startswith("x:")   # nan != nan
    assert _entries() == []


def test_bad_yaml_is_one_line_and_not_cached(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1, 2\n")
    for _ in range(2):
        with pytest.raises(BadInput, match="not valid YAML at line"):
            load_yaml_file(path, "workloads file")
    assert _entries() == []


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("NVFP4_ADVISOR_NO_CACHE", "1")
    assert load_yaml_file(PROFILES_DIR / "workloads.yaml", "workloads file")
    assert _entries() == []


# ---------------------------------------------------------------- validated rule files
def _validated() -> list[Path]:
    d = profile_cache.cache_dir().parent / "validated"
    return sorted(d.glob("*.pickle")) if d.exists() else []


def _copy_rules(tmp_path: Path, engine: str = "vllm", version: str = "0.33") -> Path:
    folder = tmp_path / "engines"
    folder.mkdir(exist_ok=True)
    shutil.copy(rules.engines_dir() / f"{engine}-{version}.yaml", folder / f"{engine}-{version}.yaml")
    return folder


@pytest.mark.parametrize("engine,version", [("vllm", "0.33"), ("sglang", "0.5.23"), ("fastllm", "1.9")])
def test_a_cached_rule_file_equals_the_validated_one(tmp_path, engine, version):
    folder = _copy_rules(tmp_path, engine, version)
    fresh, _ = rules.load_rules(engine, folder=folder)
    assert len(_validated()) == 1
    rules._load_cached.cache_clear()
    cached, _ = rules.load_rules(engine, folder=folder)
    assert cached is not fresh and cached == fresh
    gates = [g for p in cached.paths for c in p.candidates for g in c.gates]
    assert [g.condition for g in gates] == [g.condition for p in fresh.paths for c in p.candidates for g in c.gates]


def test_a_damaged_validated_entry_validates_again(tmp_path):
    folder = _copy_rules(tmp_path)
    fresh, _ = rules.load_rules("vllm", folder=folder)
    (entry,) = _validated()
    entry.write_bytes(b"\x80\x05not a pickle")
    rules._load_cached.cache_clear()
    assert rules.load_rules("vllm", folder=folder)[0] == fresh


def test_an_edited_schema_module_validates_again(tmp_path, monkeypatch):
    """The key holds the models' source: a changed model (here: rules.py itself) never meets an object
    validated by the old one."""
    folder = _copy_rules(tmp_path)
    rules.load_rules("vllm", folder=folder)
    edited = tmp_path / "rules_edited.py"
    edited.write_text(Path(schema.__file__).read_text() + "\n# edited\n")
    monkeypatch.setattr(schema, "__file__", str(edited))
    rules._load_cached.cache_clear()
    rules.load_rules("vllm", folder=folder)
    assert len(_validated()) == 2


def test_the_file_name_check_is_part_of_the_key(tmp_path):
    folder = _copy_rules(tmp_path)
    rules.load_rules("vllm", folder=folder)
    (folder / "vllm-0.33.yaml").rename(folder / "vllm-0.34.yaml")
    with pytest.raises(BadInput, match="file name must be vllm-0.33.yaml"):
        rules.load_rules("vllm", folder=folder)


def test_a_cached_rule_file_loads_without_building_a_schema(tmp_path):
    """The point of the cache: a fresh process gets the rules without importing pydantic or the schema
    (advisor.kernel_path.rules), and they are the records a fresh validation returns."""
    import subprocess
    import sys

    rules.load_rules("vllm")
    code = ("import sys; from advisor.kernel_path import rule_files as rules; r, _ = rules.load_rules('vllm'); "
            "print(r.engine, type(r).__module__, 'pydantic' in sys.modules, "
            "'advisor.kernel_path.rules' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         timeout=120)
    assert out.stdout.split() == ["vllm", "advisor.kernel_path.rule_records", "False", "False"], out.stderr[-2000:]
