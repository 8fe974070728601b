"""The engine version is the one of the program the command will run: an engine installed in another
environment (its console script on PATH) is asked through its own interpreter, never looked up in
the advisor's environment; a native program answers `--version`; nothing found is "not installed"."""

from __future__ import annotations

import json
import sys
import venv
from pathlib import Path

import pytest

from launchers.versions import detect_version, python_of

pytestmark = pytest.mark.timeout(120)


def _other_env(root: Path, dist: str, version: str, script: str, *, trampoline: bool = False) -> Path:
    """A second virtual environment holding only `dist` at `version` and its console script."""
    env = root / "other-env"
    venv.create(env, with_pip=False)
    site = next((env / "lib").glob("python*/site-packages"))
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    python = env / "bin" / "python"
    head = (f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n" if trampoline else f"#!{python}\n")
    exe = env / "bin" / script
    exe.write_text(head + "import sys\nsys.exit('not meant to run in this test')\n")
    exe.chmod(0o755)
    return env / "bin"


@pytest.mark.parametrize("trampoline", [False, True], ids=["shebang", "pip-trampoline"])
def test_transformers_from_another_venv_is_asked_for_its_version(tmp_path, monkeypatch, trampoline):
    bin_dir = _other_env(tmp_path, "transformers", "4.99.1", "transformers", trampoline=trampoline)
    monkeypatch.setenv("PATH", f"{bin_dir}:{'/usr/bin:/bin'}")
    assert python_of(str(bin_dir / "transformers")) == [str(bin_dir / "python")]
    found = detect_version("transformers")
    assert found.version == "4.99.1" and str(bin_dir / "transformers") in found.how


def test_launch_dry_run_targets_that_version(tmp_path, monkeypatch, capsys):
    from advisor.cli import main

    bin_dir = _other_env(tmp_path, "transformers", "4.99.1", "transformers")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert main(["launch", str(tmp_path), "--engine", "transformers", "--dry-run", "--json"]) == 0
    cmd = json.loads(capsys.readouterr().out)["command"]
    assert cmd["version"] == "4.99.1"
    assert "detected" in cmd["version_note"] and "not installed" not in cmd["version_note"]


def test_a_native_program_answers_version(tmp_path, monkeypatch):
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\necho 'version: 5191 (c7f3169)'\necho 'built with cc 13.2 for x86_64'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    found = detect_version("llamacpp")
    assert found.version == "5191" and found.how == "llama-server --version"


def test_an_interpreter_without_the_engine_is_not_the_engine(tmp_path, monkeypatch):
    # `python -m sglang.launch_server`: a python3 on PATH that has no sglang says nothing about sglang
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    assert detect_version("sglang").how == "not installed"
