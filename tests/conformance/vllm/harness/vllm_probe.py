"""Ask vLLM 0.33.0 itself what it loads for each config folder on one faked GPU.

Usage (inside .venv-vllm):  python vllm_probe.py JOBS.json [--parallel N]
  JOBS.json: [{"sm": 90, "name": "H100 SXM5 80GB", "memory": 80, "flashinfer": true,
               "folders": [CONFIG_DIR, ...], "out": RESULT.json}, ...]

For every folder: vLLM's ModelConfig (which quantization config file it reads, the per-model rewrite hooks,
the ModelOpt normaliser, the quantization method it resolves), VllmConfig (the minimum-capability refusal),
then the real model class built on the meta device under a one-process gloo group (TP=1), so every layer's
quantization method runs its own kernel choosers. What each module got is read back from the objects, and
vLLM's "Using ..." log lines are kept. One process per GPU: the platform is fixed at import.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import vllm_stubs  # noqa: E402

_DIGITS = re.compile(r"\.\d+(?=\.|$)")


class _Lines:
    """vLLM's selection log lines ("Using ... kernel/backend", the weight-only warnings). vLLM reconfigures
    its loggers while building its config, so records are taken where every logger hands them out."""

    def __init__(self):
        self.lines: list[str] = []
        self._orig = logging.Logger.callHandlers

    def __enter__(self):
        orig, lines = self._orig, self.lines

        def call_handlers(logger, record):
            if record.name.startswith("vllm") and record.levelno >= logging.INFO:
                try:
                    msg = record.getMessage()
                except Exception:   # noqa: BLE001 - a bad log format is not the harness's concern
                    msg = ""
                if msg.startswith("Using ") or "not have native support" in msg or "falling back" in msg:
                    lines.append(msg.splitlines()[0])
            orig(logger, record)

        logging.Logger.callHandlers = call_handlers
        return self

    def __exit__(self, *exc):
        logging.Logger.callHandlers = self._orig


def _install_facts() -> dict:
    from vllm.utils import import_utils
    from vllm.utils.b12x import has_b12x
    from vllm.utils.flashinfer import has_flashinfer

    return {"flashinfer": bool(has_flashinfer()), "deepgemm": bool(import_utils.has_deep_gemm()),
            "humming": bool(import_utils.has_humming()), "triton_kernels": bool(import_utils.has_triton_kernels()),
            "b12x": bool(has_b12x())}


def _kernel_objects(obj, depth=0):
    """Kernel instances a quant method (or its compressed-tensors scheme) holds."""
    if obj is None or depth > 2:
        return []
    out = []
    for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
        mod = type(value).__module__
        if mod.startswith("vllm.model_executor.kernels."):
            out.append(type(value).__name__)
        elif mod.startswith("vllm.model_executor.layers.quantization.compressed_tensors.schemes"):
            out += _kernel_objects(value, depth + 1)
    return out


def _moe_facts(qm) -> dict:
    import enum

    facts = {}
    for key, value in vars(qm).items():
        if isinstance(value, enum.Enum) and key.endswith("backend"):
            facts["backend"] = value.name
        elif key == "experts_cls" and value is not None:
            facts["experts_cls"] = value.__name__
    return facts


def _layers(model) -> list[dict]:
    from vllm.model_executor.layers.fused_moe import RoutedExperts
    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    try:
        from vllm.model_executor.layers.attention import Attention
        attn_types: tuple = (Attention,)
    except ImportError:
        attn_types = ()
    seen, out = set(), []
    for name, module in model.named_modules():
        pattern = _DIGITS.sub(".*", name)
        entry = None
        if isinstance(module, VocabParallelEmbedding):       # embed_tokens and the lm_head (ParallelLMHead)
            qm = getattr(module, "quant_method", None)
            entry = {"kind": "linear", "quant_method": type(qm).__name__ if qm else None,
                     "kernels": _kernel_objects(qm), "scheme": None,
                     "shape": [int(getattr(module, "num_embeddings", 0)), int(getattr(module, "embedding_dim", 0))]}
        elif isinstance(module, LinearBase):
            qm = getattr(module, "quant_method", None)
            entry = {"kind": "linear", "quant_method": type(qm).__name__ if qm else None,
                     "kernels": _kernel_objects(qm) + _kernel_objects(getattr(qm, "scheme", None)),
                     "scheme": type(getattr(qm, "scheme", None)).__name__ if getattr(qm, "scheme", None) else None,
                     "shape": [int(getattr(module, "output_size", 0)), int(getattr(module, "input_size", 0))]}
        elif isinstance(module, RoutedExperts):
            qm = getattr(module, "quant_method", None)
            entry = {"kind": "moe", "quant_method": type(qm).__name__ if qm else None, **(_moe_facts(qm) if qm else {})}
        elif getattr(module, "attn_backend", None) is not None or (attn_types and isinstance(module, attn_types)):
            backend = getattr(module, "attn_backend", None)
            entry = {"kind": "attention", "backend": _backend_name(backend),
                     "kv_cache_dtype": getattr(module, "kv_cache_dtype", None)}
        if entry is None:
            continue
        key = (pattern, json.dumps(entry, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        out.append({"module": pattern, **entry})
    return out


def _backend_name(backend) -> str | None:
    if backend is None:
        return None
    if hasattr(backend, "get_name"):
        return backend.get_name()
    return getattr(backend, "name", str(backend))


def probe(folder: Path) -> dict:
    import torch
    import vllm.logger

    for once in (vllm.logger._print_info_once, vllm.logger._print_warning_once):
        once.cache_clear()    # each config logs its own "Using ..." lines
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    res: dict = {"stage": "config"}
    handler = _Lines().__enter__()
    try:
        # as `vllm serve MODEL` does: EngineArgs builds the ModelConfig (file choice, per-model rewrite
        # hooks, normaliser, method), resolves the KV-cache dtype 'auto', then VllmConfig (refusals)
        args = EngineArgs(model=str(folder), skip_tokenizer_init=True)
        mc = args.create_model_config()
        qcfg = mc.model_arch_config.quantization_config
        res["quantization"] = mc.quantization
        res["quant_method_seen"] = (qcfg or {}).get("quant_method") if isinstance(qcfg, dict) else None
        res["dtype"] = str(mc.dtype).replace("torch.", "")
        res["stage"] = "vllm_config"
        vc = args.create_engine_config()
        res["kv_cache_dtype"] = vc.cache_config.cache_dtype
        res["quant_config"] = type(vc.quant_config).__name__ if vc.quant_config else None
        res["stage"] = "build"
        with set_current_vllm_config(vc):
            _ensure_distributed()
            with set_default_torch_dtype(mc.dtype), torch.device("meta"), vllm_stubs.meta_build():
                model = initialize_model(vc)
        res["layers"] = _layers(model)
        res["stage"] = "built"
    except Exception as err:   # noqa: BLE001 - every failure is a result to compare
        res["error"] = _one_line(err)
        res["error_at"] = _where(err)
    finally:
        handler.__exit__()
    res["log"] = handler.lines
    return res


def _one_line(err: BaseException) -> str:
    """The message, pydantic's wrapper unwrapped (vLLM raises ValueError inside its config validators)."""
    text = f"{type(err).__name__}: {err}"
    m = re.search(r"Value error, (.*?)(?: \[type=|$)", text, re.S)
    if type(err).__name__ == "ValidationError" and m:
        text = "ValueError: " + m.group(1)
    return " ".join(text.split())[:800]


def _where(err: BaseException) -> str:
    """The innermost vLLM frame that raised (path:line)."""
    tb = traceback.extract_tb(err.__traceback__)
    for frame in reversed(tb):
        if "/vllm/" in frame.filename:
            return f"vllm/{frame.filename.split('/vllm/', 1)[1]}:{frame.lineno}"
    return ""


_DIST = {"done": False}


def _ensure_distributed() -> None:
    if _DIST["done"]:
        return
    import socket

    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                 distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo")
    initialize_model_parallel(1, 1)
    _DIST["done"] = True


_CONFIG_TIMEOUT_S = 300


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout(f"no answer within {_CONFIG_TIMEOUT_S} s")


def run_job(job: dict) -> dict:
    """One GPU, one install: stubs first, then vLLM, then every folder."""
    cache = tempfile.mkdtemp(prefix="vllm-harness-")
    vllm_stubs.install(vllm_stubs.FakeGpu(job["sm"], job["name"], job["memory"]), flashinfer=job["flashinfer"],
                       cache_root=cache)
    import vllm

    signal.signal(signal.SIGALRM, _on_alarm)
    logging.getLogger("vllm").setLevel(logging.INFO)   # vLLM configures its loggers only in its entry points
    results = {"vllm_version": vllm.__version__, "sm": job["sm"], "flashinfer": job["flashinfer"],
               "install": _install_facts(), "configs": {}}
    for folder in job["folders"]:
        t0 = time.time()
        signal.alarm(_CONFIG_TIMEOUT_S)     # a build that hangs becomes a result, not a stuck job
        try:
            r = probe(Path(folder))
        finally:
            signal.alarm(0)
        r["seconds"] = round(time.time() - t0, 2)
        results["configs"][Path(folder).name] = r
    results["foreign_platform_modules"] = vllm_stubs.check_platform_everywhere()
    return results


def _preload() -> None:
    """Modules every job imports and no stub touches, loaded once before the jobs fork."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch._inductor.lowering  # noqa: F401
    import transformers  # noqa: F401


def run_jobs(jobs: list[dict], parallel: int) -> None:
    """Each job in its own forked process (vLLM fixes the platform at import), PARALLEL at a time."""
    import os

    _preload()
    running: dict[int, dict] = {}
    pending = list(jobs)
    failed = []
    while pending or running:
        while pending and len(running) < parallel:
            job = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    Path(job["out"]).write_text(json.dumps(run_job(job), indent=1, sort_keys=True))
                except BaseException:   # noqa: BLE001 - report and exit the child
                    traceback.print_exc()
                    code = 1
                os._exit(code)
            running[pid] = job
        pid, status = os.wait()
        job = running.pop(pid)
        if status != 0:
            failed.append(f"sm_{job['sm']} flashinfer={job['flashinfer']}")
    if failed:
        raise SystemExit(f"harness jobs failed: {', '.join(failed)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("jobs", help="JSON file: a list of {sm, name, memory, flashinfer, folders, out}")
    ap.add_argument("--parallel", type=int, default=1)
    args = ap.parse_args(argv)
    run_jobs(json.loads(Path(args.jobs).read_text()), args.parallel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
