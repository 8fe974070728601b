"""Hostile inputs to `convert` and `verify` as a user meets them on the command line: malformed
headers (one line, exit 3, never a traceback, never an output), a source with nothing to quantize,
termination by SIGTERM or SIGKILL, and what verify reports."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from advisor.cli import main
from advisor.convert.destination import remove_stale_partials
from advisor.convert.report import STRUCTURE_SHOWN, verify_doc
from advisor.convert.verify import TensorDiff, VerifyReport
from advisor.doc import Bullets, Table
from tests.conftest import ROOT
from tests.convert.conftest import write_checkpoint

LLAMA = {"model_type": "llama"}


def _raw_shard(folder: Path, header, data: bytes = b"") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(LLAMA))
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return folder


def _bf16(name="model.layers.0.mlp.down_proj.weight", n=32, k=64):
    g = torch.Generator().manual_seed(0)
    return {name: (torch.randn(n, k, generator=g) * 0.02).to(torch.bfloat16)}


HOSTILE = {
    # what the error must say: header
    "data_offsets ['0', '4'] are invalid (need [begin, end], non-negative integers)":
        {"w": {"dtype": "BF16", "shape": [2], "data_offsets": ["0", "4"]}},
    "shape must be a list of non-negative integers": {"w": {"dtype": "BF16", "shape": [-2, -1],
                                                            "data_offsets": [0, 4]}},
    "shape must be a list": {"w": {"dtype": "BF16", "shape": [2.5], "data_offsets": [0, 4]}},
    "overlap another tensor": {"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                               "b": {"dtype": "BF16", "shape": [2], "data_offsets": [2, 6]}},
    "not valid JSON": b'{"w": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "entry is not an object": {"w": [1, 2]},
}


@pytest.mark.parametrize("expected", list(HOSTILE))
def test_malformed_headers_are_one_line_errors(tmp_path, capsys, expected):
    src = _raw_shard(tmp_path / "src", HOSTILE[expected], b"\0" * 6)
    for args in (["convert", str(src), str(tmp_path / "out")], ["verify", str(src), "--reference", str(src)]):
        code = main(args)
        err = capsys.readouterr().err.strip()
        assert code == 3, (args, err)
        assert expected in err and "\n" not in err and "model.safetensors" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_fifo_and_outside_shards_are_refused(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    (fifo / "config.json").write_text(json.dumps(LLAMA))
    os.mkfifo(fifo / "model.safetensors")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "advisor", "convert", str(fifo), str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 3 and "not a regular file" in proc.stderr
    outside = write_checkpoint(tmp_path / "outside", _bf16(), LLAMA)
    (outside / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.layers.0.mlp.down_proj.weight": "../fifo/model.safetensors"}}))
    code = main(["convert", str(outside), str(tmp_path / "out2")])
    err = capsys.readouterr().err
    assert code == 3 and "not a file name in the checkpoint folder" in err


def test_nothing_to_quantize_is_refused(tmp_path, capsys):
    src = write_checkpoint(tmp_path / "src", {**_bf16(), **_bf16("lm_head.weight")}, LLAMA)
    code = main(["convert", str(src), str(tmp_path / "out"), "--keep", "*down_proj*"])
    err = capsys.readouterr().err
    assert code == 3 and "nothing to quantize" in err and "keep pattern" in err
    assert not (tmp_path / "out").exists()
    only_norms = write_checkpoint(tmp_path / "norms", {"model.norm.weight": torch.ones(64, dtype=torch.bfloat16)},
                                  LLAMA)
    assert main(["convert", str(only_norms), str(tmp_path / "out")]) == 3
    assert "nothing to quantize" in capsys.readouterr().err


def _big_source(tmp_path: Path) -> Path:
    """Large enough (~64 MB of BF16) that a conversion is still running 0.5 s after it starts."""
    g = torch.Generator().manual_seed(1)
    tensors = {f"model.layers.{i}.mlp.down_proj.weight":
               (torch.randn(1024, 4096, generator=g) * 0.02).to(torch.bfloat16) for i in range(8)}
    return write_checkpoint(tmp_path / "src", tensors, LLAMA)


def _start_convert(src: Path, dst: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "convert", str(src), str(dst), "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    partial = f".{dst.name}.partial-{proc.pid}"
    deadline = time.monotonic() + 60
    while not (dst.parent / partial / "model.safetensors").exists():     # writing has begun
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


@pytest.mark.timeout(180)
def test_sigterm_removes_the_partial_output(tmp_path):
    src = _big_source(tmp_path)
    proc = _start_convert(src, tmp_path / "out")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


@pytest.mark.timeout(180)
def test_sigkill_leftovers_are_hidden_then_removed_by_the_next_run(tmp_path, capsys):
    src = _big_source(tmp_path)
    proc = _start_convert(src, tmp_path / "out")
    proc.kill()
    proc.communicate(timeout=60)
    left = [p.name for p in tmp_path.iterdir() if p.name != "src"]
    assert left == [f".out.partial-{proc.pid}"]                     # hidden, no config.json: not "complete"
    assert not (tmp_path / left[0] / "config.json").exists()
    assert main(["convert", str(src), str(tmp_path / "out"), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("removed 1 partial output folder" in n for n in notes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


def test_partials_of_live_processes_are_left_alone(tmp_path):
    live = tmp_path / f".out.partial-{os.getppid()}"
    live.mkdir()
    other = tmp_path / ".other.partial-999999999"
    other.mkdir()
    assert remove_stale_partials(tmp_path / "out") == []
    assert live.exists() and other.exists()


def test_verify_names_the_users_folder_not_a_deleted_temp(tmp_path, capsys, monkeypatch):
    from advisor.convert.converter import convert
    from advisor.convert.plan import Options

    src = write_checkpoint(tmp_path / "src", _bf16(), LLAMA)
    convert(src, tmp_path / "ref", options=Options(weight_only=True))
    assert main(["verify", str(src), "--reference", str(tmp_path / "ref"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["mode"] == "convert+compare" and rep["identical"]
    assert rep["candidate"] == str(src)
    monkeypatch.setenv("COLUMNS", "400")         # one line per value: the long tmp path is not folded
    assert main(["verify", str(src), "--reference", str(tmp_path / "ref")]) == 0
    out = capsys.readouterr().out
    assert "nvfp4-verify-" not in out and "(converted in a temporary folder, not kept)" in out


def test_verify_doc_caps_structure_lines_and_states_notes_once():
    structure = tuple(f"tensor t{i} missing from the candidate" for i in range(STRUCTURE_SHOWN + 8))
    diffs = tuple(TensorDiff(f"m{i}.input_scale", "input_scale", 4, 4, ((),), fails=False,
                             note="activation scale depends on calibration data") for i in range(5))
    rep = VerifyReport("compare", "cand", "ref", 10, 100, structure, diffs)
    doc = verify_doc(rep)
    bullets = [b for b in doc.blocks if isinstance(b, Bullets)]
    struct_items = bullets[0].items
    assert len(struct_items) == STRUCTURE_SHOWN + 1 and "8 more" in struct_items[-1]
    table = next(b for b in doc.blocks if isinstance(b, Table))
    assert all(r[1] == "input_scale*" and r[3] == "scalar" for r in table.rows)
    notes = [i for b in bullets[1:] for i in b.items]
    assert len([n for n in notes if "calibration" in n]) == 1 and "does not fail" in notes[0]
    mixed = (TensorDiff("a.weight", "weight", 3, 64, ((0, 1), (2, 5))),
             TensorDiff("a.weight", "undetermined", 2, 80, (), False, "scale not determined"))
    rows = next(b for b in verify_doc(VerifyReport("roundtrip", None, "ref", 3, 9, (), mixed)).blocks
                if isinstance(b, Table)).rows
    assert [r[3] for r in rows] == ["0,1 2,5", "-"]


def test_inspect_flags_the_converters_uncalibrated_input_scales(tmp_path):
    """convert's default output (NVFP4 with input_scale 1.0) is W4A4 to an engine: inspect says the
    activation scales are uncalibrated; --weight-only output and a calibrated scale do not warn."""
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.convert.converter import convert
    from advisor.convert.plan import Options

    tensors = {**_bf16("model.layers.0.mlp.down_proj.weight"), **_bf16("model.layers.0.mlp.up_proj.weight")}
    src = write_checkpoint(tmp_path / "src", tensors, {**LLAMA, "hidden_size": 64, "num_hidden_layers": 1})
    convert(src, tmp_path / "w4a4")
    convert(src, tmp_path / "w4a16", options=Options(weight_only=True))
    codes = lambda p: {f.code for f in inspect_checkpoint(str(p)).findings}  # noqa: E731
    info = inspect_checkpoint(str(tmp_path / "w4a4"))
    assert info.label == "W4A4-NVFP4"
    assert "uncalibrated-input-scales" in {f.code for f in info.findings}
    assert "uncalibrated-input-scales" not in codes(tmp_path / "w4a16")
    # one calibrated module is enough to silence it
    from safetensors.torch import load_file, save_file

    t = load_file(str(tmp_path / "w4a4" / "model.safetensors"))
    t["model.layers.0.mlp.up_proj.input_scale"] = torch.tensor(0.0123, dtype=torch.float32)
    save_file(t, str(tmp_path / "w4a4" / "model.safetensors"), metadata={"format": "pt"})
    assert "uncalibrated-input-scales" not in codes(tmp_path / "w4a4")


def test_unlistable_folder_is_named_as_such(tmp_path, capsys, monkeypatch):
    """A folder without read permission (x only): the error says so, not 'no .safetensors files'.
    Root ignores permissions, so the refusal is raised at the os boundary."""
    src = write_checkpoint(tmp_path / "src", _bf16(), LLAMA)
    real = os.listdir

    def listdir(path="."):
        if Path(path) == src:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    assert main(["convert", str(src), str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert "cannot list the folder: Permission denied" in err and "no .safetensors" not in err


def test_destinations_the_final_rename_cannot_replace_are_refused_up_front(tmp_path, capsys, monkeypatch):
    """A symlinked or current-folder DST used to be converted in full, then fail at the rename
    with 'Not a directory' / 'Invalid argument'."""
    src = write_checkpoint(tmp_path / "src", _bf16(), LLAMA)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert main(["convert", str(src), str(tmp_path / "link")]) == 3
    assert "symbolic link" in capsys.readouterr().err
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for dst in (".", str(tmp_path)):
        assert main(["convert", str(src), dst]) == 3
        assert "current folder" in capsys.readouterr().err
    assert main(["convert", str(src), "new", "--json"]) == 0
    assert (here / "new" / "config.json").exists() and sorted(p.name for p in here.iterdir()) == ["new"]
    assert list((tmp_path / "real").iterdir()) == []


def test_reference_of_another_model_is_refused(tmp_path, capsys):
    from advisor.convert.converter import convert
    from advisor.convert.plan import Options

    name = "model.layers.0.mlp.down_proj.weight"
    convert(write_checkpoint(tmp_path / "a", _bf16(name, 32, 64), LLAMA), tmp_path / "ref",
            options=Options(weight_only=True))
    other = write_checkpoint(tmp_path / "b", _bf16(name, 32, 128), LLAMA)
    for args in (["convert", str(other), str(tmp_path / "out"), "--reference", str(tmp_path / "ref")],
                 ["verify", str(other), "--reference", str(tmp_path / "ref")]):
        assert main(args) == 3
        err = capsys.readouterr().err
        assert "not a quantization of this model" in err and "[32, 64]" in err and "[32, 32]" in err
    assert not (tmp_path / "out").exists()


def test_sizes_are_readable_for_small_and_large_checkpoints():
    from advisor.convert.report import _gb

    assert _gb(3_410_432) == "3.41 MB"          # was "0.003 GB"
    assert _gb(16_000_000_000) == "16.00 GB"
    assert _gb(2_048) == "2.05 kB" and _gb(12) == "12 B"


def test_source_without_config_is_refused(tmp_path, capsys):
    """The output's config.json would hold nothing but quantization_config: not a loadable model."""
    src = write_checkpoint(tmp_path / "src", _bf16(), LLAMA)
    (src / "config.json").unlink()
    assert main(["convert", str(src), str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert "config.json missing" in err and str(src) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_empty_weight_is_kept_not_an_internal_error(tmp_path, capsys):
    from safetensors import safe_open

    tensors = {"model.layers.0.mlp.down_proj.weight": torch.zeros(0, 64, dtype=torch.bfloat16),
               **_bf16("model.layers.0.mlp.up_proj.weight")}
    src = write_checkpoint(tmp_path / "src", tensors, LLAMA)
    assert main(["convert", str(src), str(tmp_path / "out"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kept"] == [{"tensor": "model.layers.0.mlp.down_proj.weight",
                            "reason": "empty weight (a zero dimension)"}]
    with safe_open(str(tmp_path / "out" / "model.safetensors"), "pt") as f:
        assert f.get_slice("model.layers.0.mlp.down_proj.weight").get_shape() == [0, 64]
        assert f.get_slice("model.layers.0.mlp.up_proj.weight").get_dtype() == "U8"


def test_fused_group_table_shows_short_parents_json_keeps_full_names(tmp_path):
    from advisor.convert.converter import convert
    from advisor.convert.report import convert_doc, convert_payload

    p = "model.language_model.layers.0.mlp"
    src = write_checkpoint(tmp_path / "src", {**_bf16(f"{p}.gate_proj.weight"), **_bf16(f"{p}.up_proj.weight")},
                           LLAMA)
    res = convert(src, tmp_path / "out")
    table = next(b for b in convert_doc(res).blocks if isinstance(b, Table))
    assert table.rows == (("layers.0.mlp", "gate_proj, up_proj", "MLP gate/up"),)
    assert list(convert_payload(res)["fused_groups"].values()) == [[f"{p}.gate_proj", f"{p}.up_proj"]]


def test_keep_pattern_that_matches_nothing_is_reported(tmp_path, capsys):
    name = "model.layers.0.mlp.down_proj"
    src = write_checkpoint(tmp_path / "src", {**_bf16(f"{name}.weight"), **_bf16("model.layers.0.mlp.up_proj.weight")},
                           LLAMA)
    # --keep before SRC DST, repeated: one pattern per flag, so SRC and DST are not taken as patterns
    assert main(["convert", "--keep", f"{name}.weight", "--keep", "*up_proj", str(src), str(tmp_path / "out"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [k["tensor"] for k in out["kept"]] == ["model.layers.0.mlp.up_proj.weight"]   # the module pattern works
    notes = [n for n in out["notes"] if "matched no module" in n]
    assert len(notes) == 1 and f"'{name}.weight'" in notes[0] and "without .weight" in notes[0]


def test_progress_width_comes_from_stderrs_terminal(monkeypatch):
    """stdout is often redirected (`convert ... > log`) while the progress goes to the terminal on
    stderr: the bar (advisor/cli.py RichBar, shared by convert, verify, bench, microbench) takes that
    terminal's width and never wraps."""
    import fcntl
    import subprocess
    import sys
    import termios

    code = ("import io\nfrom rich.console import Console\nfrom advisor.rich_render import RichBar\n"
            "from advisor.progress import Step\nbar = RichBar('convert')\n"
            "bar(Step(1_234_567_890, 9_876_543_210, 'B', 'writing'))\n"
            "w = bar.progress.console.width\nout = io.StringIO()\n"
            "Console(file=out, width=w).print(bar.progress.get_renderable())\nbar.close()\n"
            "print(w)\nprint(out.getvalue())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
        res = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave,
                             stdin=subprocess.DEVNULL, env=env, timeout=60, text=True)
    finally:
        os.close(master)
        os.close(slave)
    assert res.returncode == 0
    width, *lines = res.stdout.splitlines()
    assert int(width) == 60
    assert all(len(line) <= 60 for line in lines) and "1.23/9.88 GB" in res.stdout and "writing" in res.stdout
