"""A corpus of bad inputs: each is exit 3 with one line naming the file and the problem, no traceback."""

from __future__ import annotations

import json
import os
import struct

import pytest

from advisor.cli import main

from ckpt_builders import LLAMA_CONFIG, llama_tensors, write_checkpoint


def _st(header, data: bytes = b"", *, raw: bytes | None = None, n: int | None = None) -> bytes:
    body = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(body) if n is None else n) + body + data


GOOD_T = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}


def _folder(tmp, st_bytes: bytes | None, cfg=LLAMA_CONFIG, name="model.safetensors"):
    tmp.mkdir(parents=True, exist_ok=True)
    if cfg is not None:
        (tmp / "config.json").write_text(json.dumps(cfg) if not isinstance(cfg, (bytes, str)) else cfg) \
            if not isinstance(cfg, bytes) else (tmp / "config.json").write_bytes(cfg)
    if st_bytes is not None:
        (tmp / name).write_bytes(st_bytes)
    return tmp


# name -> (builder(tmp) -> (argument path, file expected in the message), expected words in the message)
def _header_case(st_bytes):
    def make(tmp):
        d = _folder(tmp, st_bytes)
        return str(d), "model.safetensors"
    return make


CASES = {
    "header-longer-than-file": (_header_case(_st(None, raw=b"{}", n=4096)), "larger than the file"),
    "header-over-100MB": (_header_case(_st(None, raw=b"{}", n=200_000_000)), "100 MB"),
    "file-too-short": (_header_case(b"\x01\x02"), "not a safetensors file"),
    "empty-file": (_header_case(b""), "not a safetensors file"),
    "header-not-utf8": (_header_case(_st(None, raw=b'{"\xff\xfe": 1}')), "not UTF-8"),
    "header-invalid-json": (_header_case(_st(None, raw=b'{"a": ')), "not valid JSON"),
    "header-not-object": (_header_case(_st(None, raw=b"[1, 2]")), "not a JSON object"),
    "header-json-scalar-after-brace": (_header_case(_st(None, raw=b"{} 5")), "not valid JSON"),
    "unknown-dtype": (_header_case(_st({"a": {"dtype": "F13", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)),
                      "unknown dtype 'F13'"),
    "missing-dtype": (_header_case(_st({"a": {"shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)), "missing field"),
    "offsets-outside-file": (_header_case(_st({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
                                              b"\0" * 8)), "outside the file"),
    "offsets-overlap": (_header_case(_st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
                                         b"\0" * 12)), "overlap"),
    "offsets-hole": (_header_case(_st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8)),
                     "hole"),
    "offsets-reversed": (_header_case(_st({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}},
                                          b"\0" * 8)), "invalid"),
    "offsets-negative": (_header_case(_st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})),
                         "invalid"),
    "offsets-wrong-length": (_header_case(_st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}},
                                              b"\0" * 8)), "data_offsets"),
    "offsets-float": (_header_case(_st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0.0, 8]}},
                                       b"\0" * 8)), "data_offsets"),
    "size-mismatch": (_header_case(_st({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}},
                                       b"\0" * 8)), "needs 6"),
    "negative-shape": (_header_case(_st({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}},
                                        b"\0" * 8)), "shape"),
    "shape-not-list": (_header_case(_st({"a": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}},
                                        b"\0" * 8)), "shape"),
    "entry-not-object": (_header_case(_st({"a": [1, 2]}, b"")), "not an object"),
    # a repeated tensor name keeps the last entry (as safetensors does); a repeated field is an error
    "duplicate-key": (_header_case(_st(None, raw=b'{"a": {"dtype": "F32", "dtype": "F32", "shape": [2],'
                                                 b' "data_offsets": [0, 8]}}',
                                       )), "given twice"),
    "metadata-not-strings": (_header_case(_st({"__metadata__": {"format": 1}, **GOOD_T}, b"\0" * 8)),
                             "__metadata__"),
    "trailing-garbage": (_header_case(_st(GOOD_T, b"\0" * 12)), "not covered"),
    "f4-odd-bits": (_header_case(_st({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, b"\0\0")),
                    "whole bytes"),
}


def _missing_config(tmp):
    d = _folder(tmp, _st(GOOD_T, b"\0" * 8), cfg=None)
    return str(d), "config.json"


def _config_invalid(tmp):
    d = _folder(tmp, None, cfg="{not json")
    return str(d), "config.json"


def _config_list(tmp):
    d = _folder(tmp, None, cfg="[1]")
    return str(d), "config.json"


def _config_not_utf8(tmp):
    d = _folder(tmp, None, cfg=b'{"a": "\xff"}')
    return str(d), "config.json"


def _config_too_deep(tmp):
    d = _folder(tmp, None, cfg="[" * 100_000)
    return str(d), "config.json"


def _config_is_dir(tmp):
    tmp.mkdir()
    (tmp / "config.json").mkdir()
    return str(tmp), "config.json"


def _hf_quant_invalid(tmp):
    d = _folder(tmp, None)
    (d / "hf_quant_config.json").write_text('{"producer": ')
    return str(d), "hf_quant_config.json"


def _quantize_config_invalid(tmp):
    d = _folder(tmp, None)
    (d / "quantize_config.json").write_text("{")
    return str(d), "quantize_config.json"


def _missing_shard(tmp):
    write_checkpoint(tmp, llama_tensors("bf16"), dict(LLAMA_CONFIG), shards=2)
    os.remove(tmp / "model-00002-of-00002.safetensors")
    return str(tmp), "model-00002-of-00002.safetensors"


def _index_invalid(tmp):
    d = _folder(tmp, None)
    (d / "model.safetensors.index.json").write_text("{")
    return str(d), "model.safetensors.index.json"


def _index_weight_map_bad(tmp):
    d = _folder(tmp, None)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": ["a"]}))
    return str(d), "model.safetensors.index.json"


def _index_escapes(tmp):
    d = _folder(tmp, None)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../evil.safetensors"}}))
    return str(d), "model.safetensors.index.json"


def _symlink_loop(tmp):
    tmp.mkdir()
    os.symlink(tmp / "loop", tmp / "loop")
    return str(tmp / "loop"), "loop"


def _config_symlink_loop(tmp):
    tmp.mkdir()
    os.symlink(tmp / "config.json", tmp / "config.json")
    return str(tmp), "config.json"


def _not_found(tmp):
    return str(tmp / "nope"), "nope"


def _not_safetensors_file(tmp):
    d = _folder(tmp, None)
    return str(d / "config.json"), "config.json"


def _single_file_bad(tmp):
    d = _folder(tmp, _st(None, raw=b"{", n=1), name="x.safetensors")
    return str(d / "x.safetensors"), "x.safetensors"


def _bad_shard_header(tmp):
    write_checkpoint(tmp, llama_tensors("bf16"), dict(LLAMA_CONFIG), shards=2)
    (tmp / "model-00001-of-00002.safetensors").write_bytes(_st(None, raw=b'{"x": 1}'))
    return str(tmp), "model-00001-of-00002.safetensors"


def _absurd_layers(tmp):
    d = _folder(tmp, None, cfg=dict(LLAMA_CONFIG, num_hidden_layers=10**9))
    return str(d), "config.json"


def _mtp_absurd(tmp):
    d = _folder(tmp, None, cfg=dict(LLAMA_CONFIG, vision_config={"depth": 10**8, "hidden_size": 8}))
    return str(d), "config.json"


def _unknown_demo(tmp):
    return "demo:no-such-demo", "demo:no-such-demo"


CASES.update({
    "missing-config": (_missing_config, "missing"),
    "config-invalid-json": (_config_invalid, "invalid JSON"),
    "config-json-list": (_config_list, "JSON object"),
    "config-not-utf8": (_config_not_utf8, "not UTF-8"),
    "config-too-deep": (_config_too_deep, "invalid JSON"),
    "config-is-directory": (_config_is_dir, "cannot read"),
    "hf-quant-config-invalid": (_hf_quant_invalid, "invalid JSON"),
    "quantize-config-invalid": (_quantize_config_invalid, "invalid JSON"),
    "missing-shard": (_missing_shard, "listed in the index is missing"),
    "index-invalid-json": (_index_invalid, "invalid JSON"),
    "index-weight-map-not-dict": (_index_weight_map_bad, "weight_map"),
    "index-shard-escapes-folder": (_index_escapes, "outside the checkpoint folder"),
    "symlink-loop": (_symlink_loop, "symlink loop"),
    "config-symlink-loop": (_config_symlink_loop, "symlink loop"),
    "path-not-found": (_not_found, "no such file or folder"),
    "not-a-safetensors-file": (_not_safetensors_file, "expected a folder or a .safetensors file"),
    "single-file-bad-header": (_single_file_bad, "safetensors header"),
    "bad-shard-header": (_bad_shard_header, "tensor 'x'"),
    "unknown-demo": (_unknown_demo, "unknown demo"),
    "implausible-layer-count": (_absurd_layers, "implausible"),
    "implausible-vision-depth": (_mtp_absurd, "implausible"),
})


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("as_json", [False, True])
def test_bad_input(tmp_path, capsys, case, as_json):
    make, words = CASES[case]
    arg, fname = make(tmp_path / "ckpt")
    code = main(["inspect", arg] + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in out + err
    assert fname in lines[0] and words in lines[0], lines[0]
    if as_json:
        doc = json.loads(out)
        assert doc["kind"] == "error" and doc["exit_code"] == 3 and "schema_version" in doc


def test_unreadable_file(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of permissions")
    d = _folder(tmp_path / "c", _st(GOOD_T, b"\0" * 8))
    os.chmod(d / "model.safetensors", 0)
    try:
        assert main(["inspect", str(d)]) == 3
    finally:
        os.chmod(d / "model.safetensors", 0o644)
    assert "permission denied" in capsys.readouterr().err
