"""Reports name the checkpoint, never where on the host it sits (issue 21 point 13): a checkpoint
or report file outside the home and working folders shows as ``<dir>/NAME``, in every format."""

from __future__ import annotations

import os
import random

import pytest

from advisor.cli import main
from advisor.report.privacy import host_folders
from reliability_folders import write_valid


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A checkpoint under a folder that is neither home nor the working folder."""
    home, work, far = tmp_path / "home" / "al", tmp_path / "work", tmp_path / "mnt" / "secret-project"
    for d in (home, work, far):
        d.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    write_valid(far / "qwen-nvfp4", random.Random(3))
    return far / "qwen-nvfp4"


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
@pytest.mark.parametrize("typed", ["absolute", "relative"])
def test_a_checkpoint_outside_home_and_work_folder_leaves_no_host_path(elsewhere, tmp_path, capsys, fmt, typed):
    ckpt = str(elsewhere) if typed == "absolute" else os.path.relpath(elsewhere)
    out = elsewhere.parent / f"report.{fmt}"
    assert main(["report", ckpt, "--gpu", "rtx-3090", "--engine", "vllm", "-o", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert "secret-project" not in text and str(tmp_path) not in text
    assert ("&lt;dir&gt;/qwen-nvfp4" if fmt == "html" else "<dir>/qwen-nvfp4") in text


def test_paths_inside_home_or_the_work_folder_keep_their_own_placeholders():
    home, cwd = "/home/al", "/srv/work"
    assert host_folders(["/home/al/models/q", "/srv/work/q", "./q", "org/name", "demo:qwen3-8b-nvfp4"],
                        home=home, cwd=cwd) == ()
    assert host_folders(["/mnt/data/q", "/mnt/data/r.md", "../../mnt/x/q", "~/../bob/q"], home=home, cwd=cwd) == \
        ("/mnt/data", "../../mnt/x", "/mnt/x", "~/../bob", "/home/bob")
