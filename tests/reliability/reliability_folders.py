"""A seeded generator of hostile checkpoint folders: a small valid checkpoint (Llama-like, BF16 or
NVFP4 in ModelOpt's layout, one or two shards), then one or two kinds of damage to its config,
quantization config, index, shards or the folder itself. Files are written byte by byte (no torch).
"""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path

from reliability_header_mutations import mutate_bytes

H, INTER, HEADS, KVH, HD, V, L = 64, 128, 4, 2, 16, 128, 2
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": INTER,
          "num_attention_heads": HEADS, "num_key_value_heads": KVH, "head_dim": HD, "num_hidden_layers": L,
          "vocab_size": V, "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
HF_QUANT = {"producer": {"name": "modelopt", "version": "0.47.0"},
            "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                             "exclude_modules": ["lm_head"]}}
HOSTILE_NAMES = ("[bold red]x[/]", "\x1b[2J\x1b[31m", "a\nb", "\u202eevil", "x" * 5000, "\\ud800", "../../etc",
                 "tab\there", "", " ", "🙂", "__metadata__")


def _tensors(nvfp4: bool) -> dict[str, tuple[str, list[int]]]:
    t = {"model.embed_tokens.weight": ("BF16", [V, H]), "model.norm.weight": ("BF16", [H]),
         "lm_head.weight": ("BF16", [V, H])}
    for i in range(L):
        p = f"model.layers.{i}"
        t[f"{p}.input_layernorm.weight"] = ("BF16", [H])
        t[f"{p}.post_attention_layernorm.weight"] = ("BF16", [H])
        for name, n, k in (("self_attn.q_proj", HEADS * HD, H), ("self_attn.k_proj", KVH * HD, H),
                           ("self_attn.v_proj", KVH * HD, H), ("self_attn.o_proj", H, HEADS * HD),
                           ("mlp.gate_proj", INTER, H), ("mlp.up_proj", INTER, H), ("mlp.down_proj", H, INTER)):
            if nvfp4:
                t[f"{p}.{name}.weight"] = ("U8", [n, k // 2])
                t[f"{p}.{name}.weight_scale"] = ("F8_E4M3", [n, k // 16])
                t[f"{p}.{name}.weight_scale_2"] = ("F32", [])
                t[f"{p}.{name}.input_scale"] = ("F32", [])
            else:
                t[f"{p}.{name}.weight"] = ("BF16", [n, k])
    return t


BITS = {"BF16": 16, "U8": 8, "F8_E4M3": 8, "F32": 32, "F16": 16, "I32": 32, "F4": 4, "BOOL": 8, "F64": 64}


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]], metadata=None) -> bytes:
    header, pos = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        size = n * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + size]}
        pos += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"\0" * pos


def write_valid(folder: Path, rng: random.Random) -> dict:
    """A valid checkpoint; returns what was written (for the damage step)."""
    folder.mkdir(parents=True)
    nvfp4 = rng.random() < 0.5
    cfg = dict(CONFIG)
    (folder / "config.json").write_text(json.dumps(cfg))
    if nvfp4:
        (folder / "hf_quant_config.json").write_text(json.dumps(HF_QUANT))
    tensors = _tensors(nvfp4)
    names = sorted(tensors)
    shards = rng.choice((1, 1, 2))
    if shards == 1:
        (folder / "model.safetensors").write_bytes(safetensors_bytes(tensors, {"format": "pt"}))
        files = ["model.safetensors"]
    else:
        files, weight_map = [], {}
        for s in range(2):
            fname = f"model-{s + 1:05d}-of-00002.safetensors"
            part = {n: tensors[n] for n in names[s::2]}
            (folder / fname).write_bytes(safetensors_bytes(part, {"format": "pt"}))
            files.append(fname)
            weight_map.update({n: fname for n in part})
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return {"nvfp4": nvfp4, "tensors": tensors, "files": files, "config": cfg}


JUNK_VALUES = (None, True, -1, 0, 2**70, 1e308, -1e-300, "64", "", [], [64], {}, {"a": 1}, "x" * 10_000, 0.5, "NaN")


def _json_bytes(rng: random.Random, good: dict) -> bytes:
    op = rng.randrange(10)
    if op == 0:
        return b""
    if op == 1:
        return rng.choice((b"null", b"[]", b"42", b'"config"', b"{", b"{}", b"\xef\xbb\xbf{}", b"\xff\xfe{}"))
    if op == 2:
        return json.dumps(good).encode()[: rng.randrange(1, 40)]
    if op == 3:
        return ("[" * 5000 + "]" * 5000).encode()
    if op == 4:
        return json.dumps(good).replace("64", "NaN", 1).encode()
    if op == 5:                        # every value of one key replaced
        bad = dict(good)
        if bad:
            bad[rng.choice(list(bad))] = rng.choice(JUNK_VALUES)
        return json.dumps(bad).encode()
    if op == 6:                        # several keys
        bad = dict(good)
        for k in rng.sample(list(bad), min(len(bad), 4)):
            bad[k] = rng.choice(JUNK_VALUES)
        return json.dumps(bad).encode()
    if op == 7:
        return json.dumps({**good, "quantization_config": rng.choice(JUNK_VALUES + (
            {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "four"}}}},
            {"quant_method": "gptq", "bits": 4, "group_size": 0}, {"quant_method": "fp8", "weight_block_size": [0, 0]},
            {"quant_method": "awq", "bits": None}, {"quant_method": 7}))}).encode()
    if op == 8:
        raw = bytearray(json.dumps(good).encode())
        for _ in range(3):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    return json.dumps({**good, "text_config": rng.choice((good, "x", [1], {"text_config": {}}))}).encode()


def _special(path: Path, rng: random.Random) -> None:
    """Something at ``path`` that is not a regular file."""
    if path.exists() or path.is_symlink():
        if path.is_dir() and not path.is_symlink():
            return
        path.unlink()
    kind = rng.randrange(5)
    if kind == 0:
        os.mkfifo(path)
    elif kind == 1:
        path.mkdir()
    elif kind == 2:
        path.symlink_to(path.name)                # a loop
    elif kind == 3:
        path.symlink_to("/dev/zero")
    else:
        path.symlink_to("does-not-exist")


def damage(folder: Path, info: dict, rng: random.Random) -> str:
    """One kind of damage; returns its name (for failure messages)."""
    op = rng.randrange(14)
    files = [f for f in info["files"] if (folder / f).is_file()] or ["model.safetensors"]
    if op == 0:
        (folder / "config.json").write_bytes(_json_bytes(rng, info["config"]))
        return "config.json"
    if op == 1:
        target = folder / "hf_quant_config.json"
        target.write_bytes(_json_bytes(rng, HF_QUANT if rng.random() < 0.7 else HF_QUANT["quantization"]))
        return "hf_quant_config.json"
    if op == 2:
        shard = folder / rng.choice(files)
        data = shard.read_bytes() if shard.is_file() else b""
        shard.write_bytes(mutate_bytes(data[:4096] if rng.random() < 0.5 else data, rng))
        return "shard bytes"
    if op == 3:
        shard = folder / rng.choice(files)
        data = shard.read_bytes() if shard.is_file() else b""
        shard.write_bytes(data[: rng.randrange(0, len(data) + 1)])
        return "truncated shard"
    if op == 4:
        _special(folder / rng.choice(files + ["config.json", "hf_quant_config.json"]), rng)
        return "special file"
    if op == 5:                                    # tensors renamed to hostile names
        tensors = dict(info["tensors"])
        for n in rng.sample(sorted(tensors), 3):
            tensors[n.replace("weight", rng.choice(HOSTILE_NAMES))] = tensors.pop(n)
        for f in files:
            (folder / f).unlink(missing_ok=True)
        (folder / "model.safetensors.index.json").unlink(missing_ok=True)
        (folder / "model.safetensors").write_bytes(safetensors_bytes(tensors))
        return "hostile tensor names"
    if op == 6:                                    # shapes or dtypes that do not fit the config
        tensors = dict(info["tensors"])
        for n in rng.sample(sorted(tensors), 4):
            dtype, shape = tensors[n]
            tensors[n] = rng.choice((("F4", shape + [2]), ("BOOL", shape), (dtype, shape[::-1]),
                                     (dtype, [0] * len(shape)), (dtype, shape + [1, 1, 1]), ("F64", [3]), (dtype, [])))
        for f in files:
            (folder / f).unlink(missing_ok=True)
        (folder / "model.safetensors.index.json").unlink(missing_ok=True)
        (folder / "model.safetensors").write_bytes(safetensors_bytes(tensors))
        return "odd shapes"
    if op == 7:
        index = folder / "model.safetensors.index.json"
        wm = {n: rng.choice(files) for n in info["tensors"]}
        bad = rng.choice(({"weight_map": wm | {"x": "../outside.safetensors"}},
                          {"weight_map": wm | {"x": "/etc/passwd"}},
                          {"weight_map": [1, 2]}, {"weight_map": {n: 5 for n in wm}}, {"weight_map": {}},
                          {"weight_map": wm | {"x": "missing.safetensors"}},
                          {"weight_map": wm | {"x": "a\nb.safetensors"}},
                          {"metadata": {"total_size": -5}, "weight_map": wm}, []))
        index.write_text(json.dumps(bad))
        return "index"
    if op == 8:                                    # the same tensor in two shards
        if (folder / files[0]).is_file():
            (folder / "model-copy.safetensors").write_bytes((folder / files[0]).read_bytes())
        return "duplicate shard"
    if op == 9:                                    # an empty folder, or configs only
        for p in folder.iterdir():
            if p.is_file() or p.is_symlink():
                if rng.random() < 0.7 or p.suffix == ".safetensors":
                    p.unlink()
        return "stripped folder"
    if op == 10:                                   # a header length far past the file (a 2 GB sparse header)
        shard = folder / rng.choice(files)
        if shard.is_file() and shard.stat().st_size >= 8:
            with open(shard, "r+b") as f:
                f.write(struct.pack("<Q", rng.choice((2**31, 99_999_999, 2**64 - 1, 0))))
        return "header length"
    if op == 11:                                   # many stray files
        for i in range(rng.choice((20, 60))):
            (folder / f"junk-{i}.safetensors").write_bytes(b"\0" * rng.randrange(0, 16))
        return "stray shards"
    if op == 12:                                   # a huge config
        (folder / "config.json").write_text(json.dumps({**info["config"], "pad": "x" * rng.choice((10**5, 3 * 10**6))}))
        return "huge config"
    name = rng.choice(("con\nfig", "\x1b[31m.safetensors", "name\udcff.safetensors"))
    try:
        (folder / name).write_bytes(b"\x08\0\0\0\0\0\0\0{}      ")
    except (UnicodeEncodeError, OSError):
        os.symlink("/dev/null", os.path.join(os.fsencode(folder), b"bad\xff.safetensors"))
    return "hostile file name"


def folders(root: Path, seed: int, count: int):
    """``count`` (folder, description) pairs, about one in eight left valid."""
    rng = random.Random(seed)
    for i in range(count):
        folder = root / f"c{i:03d}"
        info = write_valid(folder, rng)
        what = ["valid"]
        if rng.random() > 0.12:
            what = [damage(folder, info, rng) for _ in range(rng.choice((1, 1, 2)))]
        yield folder, "+".join(what)


# ------------------------------------------------------------------ running every command on them

def commands(folder: str, out: str) -> list[list[str]]:
    """Every command that reads a checkpoint, on ``folder`` (outputs under ``out``)."""
    return [["inspect", folder],
            ["explain", folder, "--gpu", "rtx-3090", "--engine", "vllm"],
            ["plan", folder, "--gpu", "rtx-5090", "--engine", "sglang", "--json"],
            ["report", folder, "--gpu", "rtx-3090", "--engine", "vllm", "-o", os.path.join(out, "r.md"), "--force"],
            ["launch", folder, "--engine", "vllm", "--engine-version", "0.33.0", "--dry-run"],
            ["microbench", "--shapes-from", folder],
            ["convert", folder, os.path.join(out, "converted"), "--weight-only"],
            ["verify", "--reference", folder]]


def sweep(folders_: list[str], out: str) -> dict:
    """Run every command on every folder in this process; what went wrong, counted.

    tracebacks: an exception out of main() or a "Traceback" printed; internal: the last line of
    defence caught a bug; hangs: a call over 20 s; bad_lines: an undocumented exit code, more than
    one error line, exit 3 without one, or an error line with a control character."""
    import contextlib
    import io
    import time

    from advisor.cli import main

    found = {"calls": 0, "codes": {}, "tracebacks": [], "internal": [], "hangs": [], "bad_lines": []}
    for folder in folders_:
        for argv in commands(folder, out):
            o, e = io.StringIO(), io.StringIO()
            t0 = time.monotonic()
            try:
                with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                    rc = main(argv)
            except BaseException as err:  # noqa: BLE001 - what this sweep counts
                found["tracebacks"].append([folder, argv[0], repr(err)[:200]])
                continue
            where = [os.path.basename(folder), argv[0]]
            found["calls"] += 1
            found["codes"][str(rc)] = found["codes"].get(str(rc), 0) + 1
            out_text, err_text = o.getvalue(), e.getvalue()
            if time.monotonic() - t0 > 20:
                found["hangs"].append(where)
            if "Traceback" in out_text + err_text:
                found["tracebacks"].append(where + [err_text[-300:]])
            if "internal error" in err_text:
                found["internal"].append(where + [err_text.strip()[-300:]])
            errors = [ln for ln in err_text.splitlines() if ln.startswith("nvfp4-advisor: error:")]
            if rc not in (0, 1, 3, 4) or len(errors) > 1 or (rc == 3 and not errors) \
                    or any(ord(ch) < 32 for ln in errors for ch in ln):
                found["bad_lines"].append(where + [f"exit {rc}", err_text.strip()[-300:]])
    return found


if __name__ == "__main__":   # python reliability_folders.py OUT FOLDER...: one worker of the sweep
    import sys

    json.dump(sweep(sys.argv[2:], sys.argv[1]), sys.stdout)
