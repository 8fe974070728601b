"""Rule files that extend an earlier version: keys replaced, mappings merged, paths patched by id."""

from __future__ import annotations

import json
import shutil

import pytest

from advisor.errors import BadInput
from advisor.kernel_path.rule_files import load_rule_file, load_rules
from advisor.kernel_path.rule_records import Record
from advisor.kernel_path.rule_versions import engines_dir



def _plain(obj):
    """A loaded rule-file record as the data it was read from (unset keys left out)."""
    if isinstance(obj, Record):
        return {k: _plain(v) for k, v in vars(obj).items() if v is not None}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _path_yaml(rules, pid: str, **changes) -> str:
    """One path of ``rules`` as a YAML list item (JSON is YAML), with ``changes``."""
    rule = _plain(next(p for p in rules.paths if p.id == pid))
    return "\n  - " + json.dumps({**rule, **changes})


@pytest.fixture
def folder(tmp_path):
    shutil.copy(engines_dir() / "vllm-0.33.yaml", tmp_path / "vllm-0.33.yaml")
    return tmp_path


def _write(folder, name: str, body: str):
    path = folder / f"{name}.yaml"
    path.write_text(body)
    return path


def _base():
    return load_rule_file(engines_dir() / "vllm-0.33.yaml")


def _bf16_path(rules):
    return next(p for p in rules.paths if p.id == "dense-bf16")


def test_an_extending_file_patches_paths_by_id(folder):
    base = _base()
    _write(folder, "vllm-0.35", f"""extends: vllm-0.33
version: "0.35"
display_name: vLLM 0.35
source_ref: test
flags:
  test-flag: {{cli: --test-flag, values: [a, b], default: a}}
remove: [dense-moe-router]
paths:{_path_yaml(base, "dense-bf16", note="patched in 0.35")}{_path_yaml(base, "dense-bf16", id="dense-bf16-copy")}
""")
    rules, note = load_rules("vllm", "0.35", folder)
    assert note is None and rules.version == "0.35" and rules.display_name == "vLLM 0.35"
    ids = [p.id for p in rules.paths]
    base_ids = [p.id for p in base.paths]
    # removed, replaced in place, added at the end
    assert ids == [i for i in base_ids if i != "dense-moe-router"] + ["dense-bf16-copy"]
    assert _bf16_path(rules).note == "patched in 0.35"
    assert _bf16_path(base).note != "patched in 0.35"
    # a mapping is merged key by key: the base's flags stay, the new one is added
    assert set(rules.flags) == set(base.flags) | {"test-flag"}
    # what the file does not mention is the base's
    assert rules.kv_cache_dtypes == base.kv_cache_dtypes and rules.engine == "vllm"


def test_a_request_between_versions_uses_the_extending_file(folder):
    _write(folder, "vllm-0.35", 'extends: vllm-0.33\nversion: "0.35"\n')
    rules, note = load_rules("vllm", "0.36.1", folder)
    assert rules.version == "0.35" and "using 0.35 (nearest older)" in note
    assert [p.id for p in rules.paths] == [p.id for p in _base().paths]


def test_extends_chains_through_several_versions(folder):
    copy = _path_yaml(_base(), "dense-bf16", id="dense-bf16-copy")
    _write(folder, "vllm-0.34", f'extends: vllm-0.33\nversion: "0.34"\npaths:{copy}\n')
    _write(folder, "vllm-0.35", 'extends: vllm-0.34\nversion: "0.35"\nremove: [dense-bf16]\n')
    ids = [p.id for p in load_rules("vllm", "0.35", folder)[0].paths]
    assert "dense-bf16-copy" in ids and "dense-bf16" not in ids


def test_an_edited_base_reaches_the_extending_file(folder):
    # the validated-object cache keys on the whole chain, not only the extending file's text
    child = _write(folder, "vllm-0.35", 'extends: vllm-0.33\nversion: "0.35"\n')
    assert load_rule_file(child).display_name == _base().display_name
    base = folder / "vllm-0.33.yaml"
    base.write_text(base.read_text().replace("display_name:", "display_name: Edited", 1).replace(
        "display_name: Edited ", "display_name: Edited", 1))
    child.write_text(child.read_text() + "\n")            # new mtime: the in-process cache asks again
    assert load_rule_file(child).display_name.startswith("Edited")


@pytest.mark.parametrize("body, message", [
    ('extends: vllm-0.30\nversion: "0.35"\n', "no such rule file"),
    ('extends: vllm-0.35\nversion: "0.35"\n', "already in the chain"),
    ('extends: ../vllm-0.33\nversion: "0.35"\n', "<engine>-<version>"),
    ('extends: vllm-0.33\nversion: "0.35"\nremove: [no-such-path]\n', "no path 'no-such-path'"),
    ('extends: vllm-0.33\nversion: "0.35"\nremove: dense-bf16\n', "list of path ids"),
    ('extends: vllm-0.33\n', "file name must be vllm-0.33.yaml"),
    ('remove: [dense-bf16]\nengine: vllm\nversion: "0.35"\n', "remove"),
])
def test_a_broken_extends_names_the_file(folder, body, message):
    path = _write(folder, "vllm-0.35", body)
    with pytest.raises(BadInput, match=message) as err:
        load_rule_file(path)
    assert err.value.path == str(path)
