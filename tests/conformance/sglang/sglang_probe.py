"""Ask SGLang 0.5.23 itself which kernels it picks: one process per GPU (and install variant), many configs.

Run by the .venv-sglang interpreter (tests/conformance/sglang/test_sglang_conformance.py starts it):
    python sglang_probe.py --sm 86 [--no-flashinfer] [--no-deepgemm] < jobs.json > results.jsonl
jobs.json is a list of {"key", "model_path", "layers": [{"kind": "dense"|"moe", "prefix", "n", "k",
"num_experts", "top_k"}], "flags": {server-arg: value}, "env": {name: value}}; one JSON line per job comes
back. The chain is SGLang's own, in the order a server runs it:
  1. ServerArgs(model_path=...) and its resolution pipeline (per-model overrides, backend defaults),
     published as the scheduler does (runtime_context.publish);
  2. ModelConfig.from_server_args (quantization detection; "Unknown quantization method");
  3. Scheduler.init_moe_gemm_config (initialize_moe_config, initialize_fp8_gemm_config,
     initialize_fp4_gemm_config);
  4. the loader's _get_quantization_config (the minimum-capability refusal);
  5. under torch.device("meta"): a real RowParallelLinear per dense layer and the experts layer from
     get_moe_impl_class, built with the checkpoint's prefixes and shapes; the quant method, its
     scheme, its bound kernel functions and the MoE runner backend are read back;
  6. for a Triton FP8 MoE runner: SGLang's fused_moe_kernel compiled for the target (Triton compiles
     offline for any cuda:NN), which is where an FP8 MoE fails below sm_89.
Only device queries and compiled kernels are stubbed (sglang_stubs.py). Platform probes are cached per
process by SGLang (lru_cache), hence one process per GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import logging
import os
import sys
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sglang_stubs  # noqa: E402

_SIMPLE = (bool, int, float, str, type(None))


def _facts(obj) -> dict:
    """Plain attributes of a quant method / scheme: flags, the names of bound kernel functions and
    kernel objects (what selection decided), nothing bulky."""
    out = {}
    for name, value in sorted(vars(obj).items()):
        if name.startswith("__") or name in ("quant_config", "moe_runner_config", "runner"):
            continue
        if isinstance(value, _SIMPLE):
            out[name] = value
        elif hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
            out[name] = value.value                       # an enum
        elif isinstance(value, functools.partial):
            out[name] = value.func.__name__               # a bound kernel function with arguments
        elif callable(value) and hasattr(value, "__name__"):
            out[name] = value.__name__                    # a bound kernel function
        elif isinstance(value, (list, tuple)) and all(isinstance(v, _SIMPLE) for v in value):
            out[name] = list(value)
        elif type(value).__module__.startswith("sglang."):
            out[name] = type(value).__name__              # a kernel / scheme object
    return out


def _error(stage: str, err: BaseException) -> dict:
    text = f"{type(err).__name__}: {err}".strip()
    return {"stage": stage, "error": text.splitlines()[0][:2000] if text else type(err).__name__,
            "trace": traceback.format_exception(err)[-3:]}


def _enum(v):
    return getattr(v, "value", None if v is None else str(v))


class Probe:
    def __init__(self, sm: int):
        self.sm = sm
        self.dist_ready = False
        self.compiled: dict[str, str] = {}

    def run(self, job: dict) -> dict:
        from sglang.srt.runtime_context import SpawnRanks, publish
        from sglang.srt.server_args import ServerArgs

        out: dict = {"key": job["key"], "sm": self.sm}
        old_env = {k: os.environ.get(k) for k in job.get("env", {})}
        os.environ.update(job.get("env", {}))
        try:
            # 1. server arguments, resolved and published as the scheduler process does
            try:
                sa = ServerArgs(model_path=job["model_path"], **job.get("flags", {}))
                publish(sa, role="scheduler", ranks=SpawnRanks(world_rank=0, dp_rank=None, gpu_id=0))
            except Exception as err:  # noqa: BLE001 - SGLang's refusal is the result
                out.update(_error("server_args", err))
                return out
            d = sa.resolved_dict()
            out["server_args"] = {k: d.get(k) for k in (
                "quantization", "dtype", "kv_cache_dtype", "attention_backend", "prefill_attention_backend",
                "decode_attention_backend", "moe_runner_backend", "moe_a2a_backend", "fp8_gemm_runner_backend",
                "fp4_gemm_runner_backend", "page_size")}
            # 2. model config: quantization detection
            from sglang.srt.configs.model_config import ModelConfig
            try:
                mc = ModelConfig.from_server_args(sa)
            except Exception as err:  # noqa: BLE001
                out.update(_error("model_config", err))
                return out
            out["model_config"] = {"quantization": mc.quantization, "dtype": str(mc.dtype),
                                   "architecture": (getattr(mc.hf_config, "architectures", None) or [None])[0]}
            # 3. what the scheduler configures at start
            from sglang.srt.managers.scheduler import Scheduler
            try:
                Scheduler.init_moe_gemm_config(types.SimpleNamespace(model_config=mc))
            except Exception as err:  # noqa: BLE001
                out.update(_error("scheduler", err))
                return out
            from sglang.srt.layers.moe.utils import get_moe_runner_backend
            from sglang.srt.layers.quantization import fp4_utils, fp8_utils
            out["scheduler"] = {"moe_runner_backend": _enum(get_moe_runner_backend()),
                                "fp8_gemm_backend": _enum(fp8_utils.FP8_GEMM_RUNNER_BACKEND),
                                "fp4_gemm_backend": _enum(fp4_utils.FP4_GEMM_RUNNER_BACKEND)}
            # 4. the loader's quantization config and its minimum-capability check
            from sglang.srt.configs.load_config import LoadConfig
            from sglang.srt.model_loader.loader import _get_quantization_config
            try:
                qc = _get_quantization_config(mc, LoadConfig(load_format="auto"))
            except Exception as err:  # noqa: BLE001
                out.update(_error("quant_config", err))
                return out
            out["quant_config"] = None if qc is None else {
                "class": type(qc).__name__, "name": qc.get_name(), "min_capability": qc.get_min_capability()}
            # the KV cache dtype ModelRunner resolves (a quant config's kv_cache_quant_algo FP8 makes auto FP8)
            from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
            try:
                name, dtype = configure_kv_cache_dtype(
                    server_args_kv_cache_dtype=sa.kv_cache_dtype, model=types.SimpleNamespace(quant_config=qc),
                    model_dtype=mc.dtype, is_draft_worker=False, is_dflash=False,
                    speculative_draft_attention_backend=None)
                out["kv_cache"] = {"resolved": name, "dtype": str(dtype)}
            except Exception as err:  # noqa: BLE001
                out["kv_cache"] = _error("kv_cache", err)
            # 5. real layers on the meta device
            self._distributed()
            out["layers"] = [self._layer(spec, qc, mc) for spec in job.get("layers", [])]
            return out
        finally:
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _distributed(self) -> None:
        """A one-rank gloo world; the group's device is the CPU (no GPU to place NCCL tensors on)."""
        if self.dist_ready:
            return
        import torch
        from sglang.srt.distributed import parallel_state as ps

        ps._group_coordinator_device = lambda local_rank: torch.device("cpu")
        port = 29000 + os.getpid() % 20000
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}")
        ps.initialize_model_parallel()
        self.dist_ready = True

    def _layer(self, spec: dict, qc, mc) -> dict:
        import torch

        res = {"kind": spec["kind"], "prefix": spec["prefix"]}
        try:
            with torch.device("meta"):
                if spec["kind"] == "dense":
                    from sglang.srt.layers.linear import RowParallelLinear

                    layer = RowParallelLinear(spec["k"], spec["n"], bias=False, quant_config=qc,
                                              prefix=spec["prefix"], params_dtype=mc.dtype)
                else:
                    from sglang.srt.layers.moe.ep_moe.layer import get_moe_impl_class

                    layer = get_moe_impl_class(qc)(
                        num_experts=spec["num_experts"], top_k=spec["top_k"], layer_id=0,
                        hidden_size=spec["k"], intermediate_size=spec["n"], quant_config=qc,
                        prefix=spec["prefix"], params_dtype=mc.dtype)
        except Exception as err:  # noqa: BLE001 - SGLang refusing the layer is a result
            res.update(_error("layer", err))
            return res
        qm = layer.quant_method
        res["method"] = type(qm).__name__
        res["method_facts"] = _facts(qm)
        scheme = getattr(layer, "scheme", None) or getattr(qm, "scheme", None)
        if scheme is not None:
            res["scheme"] = type(scheme).__name__
            res["scheme_facts"] = _facts(scheme)
        if spec["kind"] == "moe":
            res["layer_class"] = type(layer).__name__
            res["runner_backend"] = _enum(getattr(layer, "runner_backend", None))
            fp8 = "Fp8" in res["method"] + res.get("scheme", "") and "W8A16" not in res.get("scheme", "")
            if res["runner_backend"] == "triton" and fp8:
                res["triton_fp8_compile"] = self._compile_fused_moe_fp8()
        return res

    def _compile_fused_moe_fp8(self) -> str:
        """SGLang's fused_moe_kernel with FP8 (float8_e4m3fn) operands, as the TRITON runner launches it
        for an FP8 MoE, compiled by Triton for this GPU: 'ok' or Triton's error."""
        if "fp8" in self.compiled:
            return self.compiled["fp8"]
        import triton
        import triton.language as tl
        from sglang.kernels.ops.moe.fused_moe_triton_kernels import fused_moe_kernel
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        pointers = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "a_scale_ptr": "*fp32",
                    "b_scale_ptr": "*fp32", "topk_weights_ptr": "*fp32", "sorted_token_ids_ptr": "*i32",
                    "expert_ids_ptr": "*i32", "num_tokens_post_padded_ptr": "*i32"}
        absent = ("a_desc", "b_desc", "bias_ptr", "add_mask_ptr")
        consts = dict(group_n=128, group_k=128, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128,
                      GROUP_SIZE_M=1, MUL_ROUTED_WEIGHT=False, top_k=8, compute_type=tl.bfloat16,
                      use_fp8_w8a8=True, use_int8_w8a8=False, use_int8_w8a16=False, per_channel_quant=False,
                      even_Ks=True, c_sorted=False, swap_ab=False, FUSE_ADD_TO_OUTPUT=False, MASK_OUTPUT=False,
                      FUSE_SUM_ALL_REDUCE=False, ROUTER_TOPK=8)
        sig, constexprs = {}, {}
        for p in fused_moe_kernel.params:
            if p.name in pointers:
                sig[p.name] = pointers[p.name]
            elif p.name in absent:
                sig[p.name], constexprs[p.name] = "constexpr", None
            elif p.is_constexpr:
                sig[p.name], constexprs[p.name] = "constexpr", consts.get(p.name, p.default)
            else:
                sig[p.name] = "i32"
        try:
            triton.compile(ASTSource(fused_moe_kernel, sig, constexprs=constexprs),
                           target=GPUTarget("cuda", self.sm, 32))
            result = "ok"
        except Exception as err:  # noqa: BLE001 - the compile error is the result
            result = str(err).strip().splitlines()[-1]
        self.compiled["fp8"] = result
        return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sm", type=int, required=True)
    ap.add_argument("--name", default="NVIDIA GPU")
    ap.add_argument("--memory-gb", type=float, default=80.0)
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--no-deepgemm", action="store_true")
    args = ap.parse_args()
    jobs = json.load(sys.stdin)
    os.environ.pop("TRITON_INTERPRET", None)
    sglang_stubs.install(args.sm, name=args.name, memory_gb=args.memory_gb,
                         flashinfer=not args.no_flashinfer, deepgemm=not args.no_deepgemm)
    logging.disable(logging.WARNING)
    real_stdout = sys.stdout
    probe = Probe(args.sm)
    for job in jobs:
        noise = io.StringIO()   # SGLang prints to stdout; only the result lines go there
        with contextlib.redirect_stdout(noise):
            try:
                result = probe.run(job)
            except Exception as err:  # noqa: BLE001 - a harness failure, reported as such
                result = {"key": job["key"], "sm": args.sm, **_error("harness", err)}
        real_stdout.write(json.dumps(result, sort_keys=True) + "\n")
        real_stdout.flush()


if __name__ == "__main__":
    main()
