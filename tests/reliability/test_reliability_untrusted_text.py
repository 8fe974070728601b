"""Strings from a checkpoint reach the terminal, error lines and reports as written and inert
(issue 21 points 8, 9): Rich markup in a tensor name is shown, not applied; escape sequences,
control characters and bidi overrides show as escapes; a file name with a line break or bytes
that are not UTF-8 keeps an error on one line; JSON keeps the data."""

from __future__ import annotations

import json
import os
import struct

import pytest

from advisor.cli import main

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 128,
          "max_position_embeddings": 256, "torch_dtype": "bfloat16"}
HOSTILE = {"markup": "model.layers.0.[bold red]x[/].weight",
           "ansi": "model.layers.0.\x1b[31mred\x1b[0m\x1b]0;pwned\x07.weight",
           "bidi": "model.layers.0.\u202eevil.weight",
           "clear": "model.layers.0.\x1b[2J\x1b[H\r\x08.weight"}
UNSAFE = [chr(c) for c in range(32) if chr(c) not in "\n"] + ["\x7f", "\x9b", "\u202e"]


@pytest.fixture
def hostile_ckpt(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    t = {"model.embed_tokens.weight": torch.zeros(128, 64, dtype=torch.bfloat16),
         "model.layers.0.self_attn.q_proj.weight": torch.zeros(64, 64, dtype=torch.bfloat16),
         "lm_head.weight": torch.zeros(128, 64, dtype=torch.bfloat16)}
    t.update({name: torch.zeros(4, 4, dtype=torch.bfloat16) for name in HOSTILE.values()})
    save_file(t, str(d / "model.safetensors"))
    return d


def test_inspect_shows_hostile_names_as_written_and_inert(hostile_ckpt, capsys):
    assert main(["inspect", str(hostile_ckpt)]) == 0
    out = capsys.readouterr().out
    assert "[bold red]x[/]" in out                              # markup shown, not consumed
    assert "\\x1b[31mred\\x1b[0m\\x1b]0;pwned\\x07" in out      # escapes shown as text
    assert "\\u202eevil" in out and "\\x1b[2J\\x1b[H\\r\\x08" in out
    assert not any(c in out for c in UNSAFE if c != "\t"), [c for c in UNSAFE if c in out]


def test_json_keeps_the_names_as_data(hostile_ckpt, capsys):
    assert main(["inspect", str(hostile_ckpt), "--json"]) == 0
    text = capsys.readouterr().out
    for name in HOSTILE.values():
        assert json.dumps(name)[1:-1].split(".")[2] in text         # the JSON escape of the raw string


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_reports_carry_no_control_characters(hostile_ckpt, tmp_path, fmt, capsys):
    out = tmp_path / f"report.{fmt}"
    assert main(["report", str(hostile_ckpt), "--gpu", "rtx-3090", "--engine", "vllm", "-o", str(out)]) == 0
    text = out.read_text()
    assert "[bold red]x[/]" in text or "[bold red]x[/]".replace("/", "&#x2F;") in text
    assert not any(c in text for c in UNSAFE if c not in "\t\r"), [c for c in UNSAFE if c in text]


def test_the_renderer_shared_by_cli_and_tui_never_applies_markup():
    from rich.console import Console

    from advisor.rich_render import renderables
    from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph, Table

    doc = Doc((Heading("[red]h[/]"), Paragraph("[b]p[/b] \x1b[5m"), KeyValues((("[i]k[/]", "[u]v[/u]"),), title="[t]"),
               Table(("[c]",), (("[x]y[/x]",),), title="[tt]"), Bullets(("[/]broken",), title="[bt]")))
    console = Console(record=True, width=100, force_terminal=True, color_system="truecolor")
    for r in renderables(doc):                 # "[/]broken" would raise a MarkupError as markup
        console.print(r)
    text = console.export_text()
    for literal in ("[red]h[/]", "[b]p[/b] \\x1b[5m", "[i]k[/]", "[u]v[/u]", "[t]", "[c]", "[x]y[/x]", "[tt]",
                    "[/]broken", "[bt]"):
        assert literal in text, literal


def test_tui_notifications_are_plain_text(monkeypatch):
    from textual.app import App

    from advisor.tui.app import AdvisorApp

    seen = {}
    monkeypatch.setattr(App, "notify", lambda self, message, **kw: seen.update(message=message, **kw))
    AdvisorApp.notify(object.__new__(AdvisorApp), "/models/[/]x\x1b[2J: bad", title="\x1b]0;t\x07")
    assert seen["markup"] is False and seen["message"] == "/models/[/]x\\x1b[2J: bad"
    assert seen["title"] == "\\x1b]0;t\\x07"


def _bad_shard(folder, name: bytes) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(os.fsencode(folder), name), "wb") as f:
        f.write(struct.pack("<Q", 2) + b"[]")
    (folder / "config.json").write_text(json.dumps(CONFIG))


@pytest.mark.parametrize("name", [b"model-\n\x1b[2J.safetensors", b"model-\xff\xfe.safetensors"],
                         ids=["newline-and-escape", "not-utf8"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_hostile_file_name_keeps_the_error_on_one_line(tmp_path, capsys, name, as_json):
    _bad_shard(tmp_path / "ckpt", name)
    rc = main(["inspect", str(tmp_path / "ckpt")] + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert rc == 3 and "Traceback" not in out + err
    (line,) = err.strip("\n").split("\n")
    assert "not a JSON object" in line and not any(c in line for c in UNSAFE)
    assert ("\\n\\x1b[2J" in line) if b"\n" in name else ("\\udcff\\udcfe" in line)
    if as_json:
        assert json.loads(out)["exit_code"] == 3


def test_a_lone_surrogate_tensor_name_is_bad_input_not_a_crash(tmp_path, capsys):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    header = b'{"model.layers.0.x\\ud800.weight": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}'
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    for extra in ([], ["--json"]):
        rc = main(["inspect", str(d)] + extra)
        out, err = capsys.readouterr()
        assert rc == 3 and "Traceback" not in out + err
        assert "lone surrogate" in err and len(err.strip().splitlines()) == 1
