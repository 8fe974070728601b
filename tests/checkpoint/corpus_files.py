"""The labelled corpus's files: real configs come from registry packages at test time, never from this repository.

data/corpus/manifest.json names, for every real entry, the package (``pypi:NAME==VERSION``), the file's path
inside it and its sha256. ``download`` (run by .ci/dev) puts the pinned packages into .cache/corpus/packages;
a wheel already installed in one of the project's venvs (aiconfigurator-core in .venv-quant) is read in place.
``corpus_entries()`` writes each entry as a checkpoint folder (config.json, hf_quant_config.json) under
.cache/corpus/entries/<id>/, every file checked against its sha256. Entries of our own making
(``"real": false``) are committed under data/corpus/<id>/ and are returned from there.

    python tests/checkpoint/corpus_files.py download     # needs PyPI; tests themselves never use the network

Use (conformance suites, checkpoint tests)::

    from corpus_files import corpus_entries, real_configs_dir
    for cid, folder in corpus_entries():        # folder: a config-only checkpoint folder
        ...
    real_configs_dir() / "Qwen--Qwen3-8B_config.json"   # the flat layout of the old data/real_configs
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
CACHE = Path(os.environ.get("NVFP4_ADVISOR_CORPUS_CACHE", ROOT / ".cache" / "corpus"))
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
FETCH_HINT = "run `python tests/checkpoint/corpus_files.py download` (bash .ci/dev test does)"


class CorpusUnavailable(RuntimeError):
    """A pinned package is not on this machine, or a file in it is not the one the manifest names."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _installed_root(spec: str) -> Path | None:
    """site-packages of a project venv where the pinned wheel is installed (its dist-info names the version)."""
    name, version = spec.split("==")
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    for site in sorted(ROOT.glob(".venv*/lib/python*/site-packages")):
        if (site / dist).is_dir():
            return site
    return None


def _artifact(spec: str) -> Path | None:
    found = sorted((CACHE / "packages").glob(MANIFEST["packages"][spec]["artifact"]))
    return found[0] if found else None


@cache
def _reader(spec: str):
    """path inside the package -> bytes, from the downloaded artifact or an installed copy."""
    art = _artifact(spec)
    if art is not None and art.suffix in (".whl", ".zip"):
        zf = zipfile.ZipFile(art)
        return zf.read
    if art is not None:
        tf = tarfile.open(art)
        return lambda member: tf.extractfile(member).read()
    site = None if MANIFEST["packages"][spec].get("sdist") else _installed_root(spec)
    if site is not None:
        return lambda member: (site / member).read_bytes()
    raise CorpusUnavailable(f"{spec} is not downloaded: {FETCH_HINT}")


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, target)          # atomic: several test runs may share the cache


def _file_bytes(entry: dict, name: str) -> bytes:
    spec, f = entry["source"].removeprefix("pypi:"), entry["files"][name]
    try:
        data = _reader(spec)(f["path"])
    except (KeyError, OSError) as exc:
        raise CorpusUnavailable(f"{spec}: no file {f['path']} ({exc})") from None
    if _sha256(data) != f["sha256"]:
        raise CorpusUnavailable(f"{spec}:{f['path']}: sha256 differs from the manifest")
    return data


def entry_folder(entry: dict) -> Path:
    """The entry as a config-only checkpoint folder (materialized and verified for real entries)."""
    if not entry["real"]:
        return CORPUS / entry["id"]
    folder = CACHE / "entries" / entry["id"]
    for name, f in entry["files"].items():
        target = folder / name
        if not (target.is_file() and _sha256(target.read_bytes()) == f["sha256"]):
            _write(target, _file_bytes(entry, name))
    return folder


def corpus_entries(*, real: bool | None = None) -> list[tuple[str, Path]]:
    """(id, folder) of every manifest entry; real=True / False keeps only registry / own-made ones."""
    return [(e["id"], entry_folder(e)) for e in MANIFEST["entries"] if real is None or e["real"] == real]


def real_configs_dir() -> Path:
    """aiconfigurator-core's model configs as flat files ``<org>--<name>_config.json`` (+ ``_hf_quant_config.json``):
    the layout and file set of the former tests/checkpoint/data/real_configs (see manifest ``real_configs``)."""
    spec = MANIFEST["real_configs"]["source"]
    left_out = set(MANIFEST["real_configs"]["left_out"])
    out = CACHE / "real_configs"
    for e in MANIFEST["entries"]:
        if e["source"] != spec:
            continue
        for name, f in e["files"].items():
            flat = f"{e['id']}_{name}"
            target = out / flat
            if flat in left_out or (target.is_file() and _sha256(target.read_bytes()) == f["sha256"]):
                continue
            _write(target, _file_bytes(e, name))
    return out


def require(fn, *args, **kwargs):
    """Call fn; when the packages are missing, skip the test (fail it under CI, where .ci/dev downloads them)."""
    import pytest

    try:
        return fn(*args, **kwargs)
    except CorpusUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"corpus: {exc}")
        pytest.skip(f"corpus: {exc}", allow_module_level=True)


@dataclass(frozen=True)
class ConfigFiles:
    """One checkpoint's config files as the conformance suites see them (vLLM, SGLang)."""
    name: str                    # 'Qwen--Qwen3-8B' or 'demo--qwen3-8b-nvfp4'
    files: dict                  # file name in the checkpoint folder -> source path

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + Path(self.files[name]).read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def materialize(self, parent: Path) -> Path:
        d = parent / self.name
        d.mkdir(parents=True, exist_ok=True)
        for name, src in self.files.items():
            shutil.copy(src, d / name)
        return d


def conformance_configs() -> list[ConfigFiles]:
    """Every corpus entry (materialized and checked) and every bundled demo, picked up as they are:
    new entries join the engine conformance suites by themselves."""
    demos = ROOT / "profiles" / "demo"
    out = [ConfigFiles(cid, {p.name: p for p in sorted(folder.glob("*.json"))}) for cid, folder in corpus_entries()]
    for d in sorted(p for p in demos.iterdir() if (p / "config.json").exists()):
        out.append(ConfigFiles(f"demo--{d.name}", {p.name: p for p in sorted(d.glob("*.json"))}))
    return out


def download() -> int:
    """Fetch each pinned package not already here; then materialize and verify every entry."""
    for spec, pkg in MANIFEST["packages"].items():
        if _artifact(spec) or (not pkg.get("sdist") and _installed_root(spec)):
            continue
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(CACHE / "packages"),
               *pkg.get("pip_args", []), spec]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if _artifact(spec) is None:
            why = (run.stderr.strip().splitlines() or ["no artifact matching " + pkg["artifact"]])[-1]
            print(f"corpus: could not download {spec}: {why}", file=sys.stderr)
            return 1
    try:                                  # quiet on success: .ci/dev's set-up output stays short
        n = len(corpus_entries())
        real_configs_dir()
    except CorpusUnavailable as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 1
    return 0 if n else 1


if __name__ == "__main__":
    if sys.argv[1:] != ["download"]:
        sys.exit("usage: python tests/checkpoint/corpus_files.py download")
    sys.exit(download())
