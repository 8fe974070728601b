"""Files the user names that are FIFOs, devices or endless: one BadInput line (exit 3), no hang.

A FIFO blocks open() until a writer comes and /dev/zero never ends; every reader goes through
advisor.textfile. /dev/zero is only read here; device nodes are made with mknod in tmp_path.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from advisor.cli import main

pytestmark = pytest.mark.timeout(30)     # a regression hangs: fail it instead

DEMO = "demo:qwen3-8b-nvfp4"
ZERO = "/dev/zero"


def _cli(argv, capsys) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err.strip()


def _node(path, kind):
    if kind == "fifo":
        os.mkfifo(path)
    else:
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))    # /dev/zero's numbers, made in tmp
    return path


@pytest.mark.parametrize("command", ["inspect", "launch --dry-run"])
@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_config_json_special_file(tmp_path, capsys, kind, command):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    _node(ck / "config.json", kind)
    argv = ["inspect", ck] if command == "inspect" else ["launch", ck, "--engine", "vllm", "--dry-run"]
    rc, err = _cli(argv, capsys)
    assert rc == 3 and len(err.splitlines()) == 1
    assert "config.json" in err and "not a regular file" in err


def _plan_cases(tmp_path):
    return {
        "launch --plan": ["launch", DEMO, "--engine", "vllm", "--dry-run", "--plan"],
        "bench --plan": ["bench", "--url", "http://127.0.0.1:9", "--plan"],
        "report --bench": ["report", DEMO, "--gpu", "rtx-5090", "-o", tmp_path / "r.md", "--bench"],
        "report --microbench": ["report", DEMO, "--gpu", "rtx-5090", "-o", tmp_path / "r.md", "--microbench"],
        "report --calibration": ["report", DEMO, "--gpu", "rtx-5090", "-o", tmp_path / "r.md", "--calibration"],
        "report --launch-log": ["report", DEMO, "--gpu", "rtx-5090", "-o", tmp_path / "r.md", "--launch-log"],
        "plan --workloads": ["plan", DEMO, "--gpu", "rtx-5090", "--workloads"],
    }


@pytest.mark.parametrize("kind", ["fifo", "chardev", "dev-zero"])
@pytest.mark.parametrize("case", ["launch --plan", "bench --plan", "report --bench", "report --microbench",
                                  "report --calibration", "report --launch-log", "plan --workloads"])
def test_named_file_special(tmp_path, capsys, case, kind):
    path = ZERO if kind == "dev-zero" else _node(tmp_path / "input.json", kind)
    if kind == "dev-zero" and not os.path.exists(ZERO):
        pytest.skip("no /dev/zero")
    rc, err = _cli([*_plan_cases(tmp_path)[case], path], capsys)
    assert rc == 3, err
    assert len(err.splitlines()) == 1 and str(path) in err and "not a regular file" in err
    assert not (tmp_path / "r.md").exists()


def test_oversized_json_is_refused_unread(tmp_path):
    from advisor.errors import BadInput
    from advisor.textfile import read_bytes

    big = tmp_path / "plan.json"
    big.write_bytes(b"{" + b" " * 4096 + b"}")
    with pytest.raises(BadInput, match="larger than 1024 bytes"):
        read_bytes(big, limit_bytes=1024, what="plan file")
    assert read_bytes(big, limit_bytes=8192) == big.read_bytes()


def test_log_tail_keeps_the_end_whole_lines(tmp_path):
    from advisor.textfile import read_text

    log = tmp_path / "engine.log"
    lines = [f"line {i:05d} " + "x" * 40 for i in range(2000)]
    log.write_text("\n".join(lines) + "\n")
    text = read_text(log, limit_bytes=4096, what="launch log", tail=True)
    got = text.splitlines()
    assert got[-1] == lines[-1] and all(g in lines for g in got)      # no line cut in half
    assert len(text.encode()) <= 4096 and len(got) < len(lines)
    assert read_text(log, limit_bytes=1 << 20, tail=True).splitlines() == lines


def test_config_too_large_for_inspect(tmp_path, monkeypatch):
    import advisor.textfile as textfile

    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    (ck / "config.json").write_text(json.dumps({"pad": "x" * 2048}))
    monkeypatch.setattr(textfile, "JSON_LIMIT", 1024)       # the cap itself is 64 MiB; a tiny one here
    from advisor.checkpoint.sources import read_json
    from advisor.errors import BadInput

    with pytest.raises(BadInput, match="larger than"):
        read_json(str(ck / "config.json"), required=True)


def test_calibration_dir_fifo_is_ignored(tmp_path):
    from advisor.calibration import calibration_dir, load_calibration

    d = calibration_dir(tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    os.mkfifo(d / "rtx-5090--any.json")
    assert load_calibration("rtx-5090", base=tmp_path) is None


def test_server_log_fifo_fails_at_once(tmp_path):
    """`launch --log FIFO`: a FIFO nobody reads would block open() for writing forever."""
    import sys

    from advisor.errors import BadInput
    from launchers.command import LaunchCommand
    from launchers.settings import ServeSettings
    from launchers.supervisor import Server

    s = ServeSettings(engine="vllm", model="/fake", port=9)
    cmd = LaunchCommand(settings=s, version=None, version_note=None, argv=(sys.executable, "-c", "pass"))
    log = tmp_path / "serve.log"
    os.mkfifo(log)
    with pytest.raises(BadInput, match="cannot open the server log"):
        Server(cmd, log_path=log, records_dir=tmp_path / "records").start()
    assert stat.S_ISFIFO(os.lstat(log).st_mode)
