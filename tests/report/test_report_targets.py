"""`report -o TARGET`: only a new file, or an existing regular file with --force, is ever written.

A device, FIFO, socket or symlink at the target would be *replaced* by the atomic rename; each is
refused with one line naming the target. Nothing here touches /dev: device nodes are made with
mknod inside tmp_path (root only).
"""

from __future__ import annotations

import os
import socket
import stat

import pytest

from report_fixtures import DEMO, run_cli

pytestmark = pytest.mark.timeout(60)


def _fifo(path):
    os.mkfifo(path)


def _chardev(path):
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 7))     # the numbers of /dev/full, made in tmp


def _socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()


def _symlink(path):
    real = path.with_name("real.md")
    real.write_text("the real file\n")
    path.symlink_to(real.name)


SPECIAL = {"fifo": (_fifo, stat.S_ISFIFO, "not a regular file"),
           "chardev": (_chardev, stat.S_ISCHR, "not a regular file"),
           "socket": (_socket, stat.S_ISSOCK, "not a regular file"),
           "symlink": (_symlink, stat.S_ISLNK, "symbolic link")}


def _report(out, *extra) -> int:
    return run_cli(["report", DEMO, "--gpu", "rtx-5090", "-o", out, *extra])


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("kind", list(SPECIAL))
def test_special_target_is_refused_and_left_alone(kind, force, tmp_path, capsys):
    make, is_kind, words = SPECIAL[kind]
    target = tmp_path / "r.md"
    make(target)
    before = os.lstat(target)
    rc = _report(target, *(["--force"] if force else []))
    err = capsys.readouterr().err.strip()
    assert rc == 3
    assert len(err.splitlines()) == 1 and str(target) in err and words in err
    after = os.lstat(target)
    assert is_kind(after.st_mode) and after.st_ino == before.st_ino       # not replaced
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    if kind == "symlink":
        assert (tmp_path / "real.md").read_text() == "the real file\n"


def test_existing_file_needs_force(tmp_path, capsys):
    target = tmp_path / "r.md"
    target.write_text("keep me\n")
    assert _report(target) == 3
    err = capsys.readouterr().err
    assert "--force" in err and str(target) in err
    assert target.read_text() == "keep me\n"
    assert _report(target, "--force") == 0
    text = target.read_text()
    assert text != "keep me\n" and text.startswith("# nvfp4-advisor report")
    assert stat.S_ISREG(os.lstat(target).st_mode)


@pytest.mark.parametrize("json_flag", [False, True], ids=["plain", "json"])
def test_dash_is_refused_not_written_as_a_file(json_flag, tmp_path, monkeypatch, capsys):
    """`-o -` once wrote a file literally named "-" in the working folder."""
    monkeypatch.chdir(tmp_path)
    rc = _report("-", *(["--json"] if json_flag else []))
    out, err = capsys.readouterr()
    assert rc == 3 and os.listdir(tmp_path) == []
    text = out if json_flag else err
    assert "standard output" in text and "Traceback" not in out + err


def test_new_file_needs_no_force(tmp_path):
    target = tmp_path / "new.md"
    assert _report(target) == 0 and target.read_text().startswith("# nvfp4-advisor report")


@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs Linux /proc")
def test_unwritable_folder_names_target_not_temp_file(capsys):
    # /proc refuses new files: the error names the user's target, never the temp file
    rc = _report("/proc/version", "--force")
    err = capsys.readouterr().err.strip()
    assert rc == 3 and len(err.splitlines()) == 1
    assert "/proc/version" in err and ".tmp" not in err and "Errno" not in err


def test_write_atomic_rechecks_the_target(tmp_path):
    """A FIFO that appears after check_target is still not replaced (the rename re-checks)."""
    from advisor.errors import BadInput
    from advisor.report.output import check_target, write_atomic

    target = check_target(tmp_path / "late.md")
    os.mkfifo(target)
    with pytest.raises(BadInput, match="not a regular file"):
        write_atomic(target, "text", overwrite=True)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert os.listdir(tmp_path) == ["late.md"]


def test_tui_export_needs_the_second_press(tmp_path):
    """The TUI's Export goes through the same check; its message says how to confirm."""
    from advisor.services.analysis import Selection, analyze
    from advisor.errors import BadInput
    from advisor.gpu_table import get_gpu
    from advisor.tui.actions import export_report

    analysis = analyze(Selection(DEMO, "rtx-5090"), gpu=get_gpu("rtx-5090"), use_calibration=False)
    target = tmp_path / "r.md"
    target.write_text("keep me\n")
    with pytest.raises(BadInput, match="press Export again"):
        export_report(analysis, None, "md", target)
    assert target.read_text() == "keep me\n"
    assert export_report(analysis, None, "md", target, overwrite=True) == target
    assert target.read_text().startswith("# nvfp4-advisor report")
