"""The labelled corpus of real configs (tests/checkpoint/data/corpus): every entry classifies to its label,
config-only sizes match the published index totals recorded in the manifest within 3 %, and the synthesized
module names cover the ones those published weight maps use.

Real entries are files inside registry packages (manifest.json: package==version, path, sha256), put on disk by
corpus_files.py at test time; nothing fetched from a repository is committed. labels.json holds the labels
written from the config text before the advisor ran. Each test reports its agreement and lists every disagreement.
"""

from __future__ import annotations

import json
import re

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.synth import modules_from_config
from corpus_files import CORPUS, MANIFEST, corpus_entries, entry_folder, require

ENTRIES = {e["id"]: e for e in MANIFEST["entries"]}
LABELS = json.loads((CORPUS / "labels.json").read_text())
SIZE_TOLERANCE = 0.03
COMMITTED = {"README.md", "manifest.json", "labels.json"}


def test_manifest_pins_every_real_file_and_commits_none():
    assert len(MANIFEST["entries"]) == len(ENTRIES)
    for e in MANIFEST["entries"]:
        assert e["files"] and "config.json" in e["files"], e["id"]
        if e["real"]:
            spec = e["source"].removeprefix("pypi:")
            assert e["source"].startswith("pypi:") and spec in MANIFEST["packages"], e["id"]
            assert all(re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) and f["path"] for f in e["files"].values())
        else:
            assert {p.name for p in (CORPUS / e["id"]).iterdir()} == set(e["files"]), e["id"]
        assert e.get("duplicate_of", e["id"]) in ENTRIES
    # only own-made entries live in the repository; real configs come from their package
    committed = {p.name for p in CORPUS.iterdir()} - COMMITTED
    assert committed == {e["id"] for e in MANIFEST["entries"] if not e["real"]}
    assert set(LABELS["labels"]) == set(ENTRIES) and set(LABELS["accepted"]) <= set(ENTRIES)


def test_real_entries_materialize_byte_for_byte():
    folders = require(corpus_entries, real=True)
    distinct = [cid for cid, _ in folders if "duplicate_of" not in ENTRIES[cid]]
    print(f"corpus: {len(folders)} real entries ({len(distinct)} distinct), "
          f"{len(MANIFEST['entries']) - len(folders)} of our own making")
    for cid, folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == sorted(ENTRIES[cid]["files"]), cid
    assert len(distinct) >= 100


def test_labels_agree():
    """Every entry: inspect (config only) gives the label written from its config text."""
    entries = require(corpus_entries)
    disagree, accepted, agree_accepted = [], LABELS["accepted"], []
    for cid, folder in entries:
        want = LABELS["labels"][cid]["scheme"]
        got = inspect_checkpoint(str(folder)).label
        if got == want and cid in accepted:
            agree_accepted.append(cid)
        elif got != want and cid not in accepted:
            disagree.append(f"{cid}: labelled {want}, inspect says {got}")
    n = len(entries)
    print(f"corpus labels: {n - len(disagree) - len(accepted)}/{n} agree, {len(accepted)} accepted differences "
          f"({', '.join(accepted)})")
    assert not disagree, "\n".join(disagree)
    assert not agree_accepted, f"fixed, drop from labels.json accepted: {agree_accepted}"


def _published():
    return [e for e in MANIFEST["entries"] if "published_index" in e]


def test_config_only_size_matches_published_total():
    """Config-only sizing vs metadata.total_size of the published index (a recorded fact): within 3 %."""
    rows, off = [], []
    for e in _published():
        total = e["published_index"]["total_size"]
        info = inspect_checkpoint(str(require(entry_folder, e)))
        assert info.totals.sizes_from == "config", e["id"]
        err = info.totals.stored_bytes / total - 1
        rows.append(e["id"])
        if abs(err) > SIZE_TOLERANCE:
            off.append(f"{e['id']}: config {info.totals.stored_bytes:,} B vs published {total:,} B ({err:+.1%})")
    print(f"config-only sizes: {len(rows) - len(off)}/{len(rows)} within {SIZE_TOLERANCE:.0%} of a published total")
    assert len(rows) >= 7
    assert not off, "\n".join(off)


def test_synthesized_names_are_the_published_ones():
    """Per-layer module names of a published weight map (recorded per pattern) are all synthesized from the config."""
    misses = []
    for e in _published():
        cfg = json.loads((require(entry_folder, e) / "config.json").read_text())
        published = {n for n in e["published_index"]["modules"] if ".layers.*." in n}
        synth = {re.sub(r"\.(\d+)\.", ".*.", m.name) for m in modules_from_config(cfg)}
        missing = sorted(published - synth)
        if missing:
            misses.append(f"{e['id']} ({cfg.get('model_type')}): not synthesized {missing[:3]}")
    print(f"naming: {len(_published()) - len(misses)}/{len(_published())} published weight maps fully matched")
    assert not misses, "\n".join(misses)


def test_a_changed_file_is_refused_and_a_changed_copy_restored(tmp_path, monkeypatch):
    """The sha256 in the manifest guards both the package file and the materialized copy."""
    import zipfile

    import corpus_files

    entry = ENTRIES["meta-llama--Llama-2-7b-hf"]               # from aiconfigurator==0.4.0, a downloaded wheel
    real = require(entry_folder, entry) / "config.json"
    monkeypatch.setattr(corpus_files, "CACHE", tmp_path)
    corpus_files._reader.cache_clear()
    (tmp_path / "packages").mkdir()
    with zipfile.ZipFile(tmp_path / "packages" / "aiconfigurator-0.4.0-py3-none-any.whl", "w") as zf:
        zf.writestr(entry["files"]["config.json"]["path"], real.read_text().replace("4096", "4097"))
    try:
        with pytest.raises(corpus_files.CorpusUnavailable, match="sha256 differs"):
            entry_folder(entry)
        with zipfile.ZipFile(tmp_path / "packages" / "aiconfigurator-0.4.0-py3-none-any.whl", "w") as zf:
            zf.writestr(entry["files"]["config.json"]["path"], real.read_bytes())
        corpus_files._reader.cache_clear()
        copy = entry_folder(entry) / "config.json"
        copy.write_text("{}")                                   # a stale or edited copy in the cache
        assert entry_folder(entry) == copy.parent and copy.read_bytes() == real.read_bytes()
    finally:
        corpus_files._reader.cache_clear()
