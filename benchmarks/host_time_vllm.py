"""Host time per decode step of vLLM 0.33's V1 engine core, measured with vLLM's own scheduler code on
this CPU, as a function of the number of running requests N.

    .venv-vllm/bin/python benchmarks/host_time_vllm.py [--json out.json] [--ns 1,8,...] [--passes P] [--smoke]

What runs (all of it vLLM's code, no GPU, no weights): a VllmConfig for a local config.json
(benchmarks/validation_configs/qwen3-8b by default; skip_tokenizer_init), the scheduler class vLLM picks
for it (`SchedulerConfig.get_scheduler_cls()`: AsyncScheduler with async scheduling, vLLM 0.33's default
for one GPU), built as EngineCore.__init__ builds it (v1/engine/core.py:168-190@0.33.0: block sizes from
`resolve_kv_cache_block_sizes`, the prefix-caching block hasher of core.py:219-229, log_stats on as
`vllm serve` has it) over a KVCacheConfig made by hand (one full-attention group, Qwen3-8B's 8 KV heads x
128, bf16, enough blocks that nothing is preempted). N requests of 120-135 distinct prompt tokens (mean
127.5; see prompt_len) are added; the prefill steps and a warm-up run untimed; then decode steps are timed the way
EngineCore.step_with_batch_queue runs them (core.py:708-805@0.33.0, batch queue of 2 under async
scheduling): `schedule()` of step k+1, then `update_from_output()` of step k with a ModelRunnerOutput
carrying one sampled token per request, then the msgpack encoding of the EngineCoreOutputs that the
engine core's output thread does (core.py:2042-2095, MsgpackEncoder, same process, same GIL).
`--sync` times the synchronous Scheduler instead (schedule k, update k).

Reported per N: the median over the timed steps of each part and of their per-step sum, in this thread's
CPU time (thread_time: the headline, as it leaves out the time other processes hold the core on a shared
machine, though not their cache and SMT interference) and wall clock (perf_counter), plus the mean, p10 and
p90 of the CPU sum (Python's garbage collector runs in some steps; the engine freezes its start-up heap
before requests arrive, as done here with its freeze_gc_heap()). All N are stepped in one process,
interleaved: each pass times --chunk consecutive steps of every N in turn (the order reversed every other
pass), so that the machine's load drifts over all N alike; the medians of each pass are kept to show the
spread. On a shared machine the passes fall in two groups, quiet and disturbed (CPU time too rises ~1.7x
when a neighbour runs: cache and core sharing under the hypervisor); "quiet" is the lower quartile of the
pass medians. A least-squares line t = a + b N over N >= 32 gives the per-request slope.

NOT covered (each is host work per step in a real server, so the figures are a lower bound on it):
- the model runner's input preparation in the same process under the uni executor (V2 GPU model runner:
  request-state updates, block tables, input ids/positions, attention metadata; its launch or CUDA-graph
  replay), the sampler's host side, and the wait for the sampled tokens' device-to-host copy;
- the frontend (API server) process: EngineCoreOutputs decoding, detokenization and the OpenAI response
  streaming of every request (another process: parallel to the engine core on a machine with spare cores,
  a bound of its own when it falls behind);
- the ZMQ send itself, request arrival (add_request) and finishing, structured output, spec decode,
  logprobs, LoRA, multimodal.

Exit 0 without vLLM (one line says so): the smoke test runs every benchmark under the main venv.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_NS = (1, 8, 32, 128, 256, 512, 1024)
PROMPT_LEN = 128
BLOCK_SIZE = 16                  # vLLM's CacheConfig default block size on CUDA
MAX_NUM_SEQS = 1024              # `vllm serve` on a >= 70 GiB non-A100 GPU: engine/arg_utils.py:2982-2992@0.33.0
MAX_NUM_BATCHED_TOKENS = 8192    # same place, OPENAI_API_SERVER
EOS_TOKEN_ID = 151645            # Qwen3's <|im_end|> (config.json); never sampled here (tokens 100-1099 are)


def _vllm_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def _prepare_import() -> None:
    """Two things this CPU-only box needs before vLLM's config code imports, neither of them scheduler code:
    the wheel's torchvision extension cannot load without CUDA ("operator torchvision::nms does not exist"
    at transformers' image_utils import), so torchvision is hidden (transformers then treats it as absent);
    and vLLM inspects the model class in a subprocess only to keep CUDA uninitialised, which is run in
    process here (the subprocess would import torchvision again). The model runner is V2, the default on
    CUDA (config/vllm.py:731-766@0.33.0), which the scheduler's output layout depends on."""
    sys.modules["torchvision"] = None  # type: ignore[assignment]
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    import vllm.model_executor.models.registry as registry

    registry._run_in_subprocess = lambda fn: fn()


def build_scheduler(model_dir: Path, n: int, total_steps: int, async_scheduling: bool, prompt_tokens: int):
    import torch
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash, resolve_kv_cache_block_sizes
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    model_config = ModelConfig(model=str(model_dir), skip_tokenizer_init=True, dtype="bfloat16")
    hf = model_config.hf_config
    scheduler_config = SchedulerConfig(
        max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        max_model_len=model_config.max_model_len, is_encoder_decoder=False,
        async_scheduling=async_scheduling)
    cache_config = CacheConfig(block_size=BLOCK_SIZE)
    # DeviceConfig: without a GPU platform vLLM cannot infer the device; the scheduler never uses it
    vc = VllmConfig(model_config=model_config, scheduler_config=scheduler_config, cache_config=cache_config,
                    device_config=DeviceConfig(device="cpu"))
    blocks_per_req = -(-(prompt_tokens + total_steps + 4 * BLOCK_SIZE) // BLOCK_SIZE)
    num_blocks = n * blocks_per_req + 64
    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=hf.num_key_value_heads,
                             head_size=getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads,
                             dtype=torch.bfloat16)
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(hf.num_hidden_layers)]
    kv_cache_config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                                    kv_cache_groups=[KVCacheGroupSpec(layers, spec)])
    vc.cache_config.num_gpu_blocks = num_blocks
    block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, vc)
    hasher = None
    if vc.cache_config.enable_prefix_caching:
        hash_fn = get_hash_fn_by_name(vc.cache_config.prefix_caching_hash_algo)
        init_none_hash(hash_fn)
        hasher = get_request_block_hasher(hash_block_size, hash_fn, vc.num_hash_lookahead_tokens)
    cls = vc.scheduler_config.get_scheduler_cls()
    sched = cls(vllm_config=vc, kv_cache_config=kv_cache_config,
                structured_output_manager=StructuredOutputManager(vc), include_finished_set=False,
                log_stats=True, block_size=block_size, hash_block_size=hash_block_size)
    return sched, vc, hasher


def prompt_len(i: int, mean: int = PROMPT_LEN) -> int:
    """Request i's prompt length: mean - 8 ... mean + 7 tokens (120-135 by default), so that the requests cross KV-block
    boundaries (allocation, block hashing) on different steps, ~N/16 of them each step, as in a server
    where requests arrive at different times; with equal lengths all N would cross on the same step."""
    return mean - BLOCK_SIZE // 2 + i % BLOCK_SIZE


def add_requests(sched, n: int, max_tokens: int, hasher, prompt_tokens: int, seed: int = 0) -> None:
    import random

    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    rng = random.Random(seed)
    for i in range(n):
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
        # as the frontend's input processor does: the EOS id (a stop check per token) and generation_config
        params.update_from_generation_config({"eos_token_id": [EOS_TOKEN_ID, 151643]}, EOS_TOKEN_ID)
        prompt = [rng.randrange(1000, 150000) for _ in range(prompt_len(i, prompt_tokens))]   # distinct: no prefix hits
        sched.add_request(Request(request_id=f"req-{i}", prompt_token_ids=prompt, sampling_params=params,
                                  pooling_params=None, arrival_time=time.time(), block_hasher=hasher))


def runner_output(sched, so, token: int):
    """What the model runner would hand back for `so`: one sampled token for each request whose prompt is
    complete after this step, none for a partial prefill chunk (the runner drops those samples). Built
    right after schedule(), when num_computed_tokens already counts the scheduled tokens; not timed."""
    from vllm.v1.outputs import ModelRunnerOutput

    req_ids = list(so.num_scheduled_tokens)
    sampled = []
    for rid in req_ids:
        req = sched.requests[rid]
        sampled.append([token] if req.num_computed_tokens >= req.num_prompt_tokens else [])
    return ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                             sampled_token_ids=sampled)


class Engine:
    """One scheduler with N running requests, stepped as EngineCore.step_with_batch_queue steps it."""

    def __init__(self, model_dir: Path, n: int, decode_steps: int, async_scheduling: bool,
                 prompt_tokens: int = PROMPT_LEN):
        from vllm.v1.serial_utils import MsgpackEncoder

        self.n, self.prompt_tokens = n, prompt_tokens
        # the prompts' tokens over the step budget left by the requests already decoding (at most n a step)
        self.prefill_limit = -(-n * (prompt_tokens + BLOCK_SIZE) // max(MAX_NUM_BATCHED_TOKENS - n, 1024)) + 8
        total = self.prefill_limit + decode_steps + 4
        self.sched, self.vc, self.hasher = build_scheduler(model_dir, n, total, async_scheduling, prompt_tokens)
        self.max_tokens = total + 16
        self.encoder = MsgpackEncoder()
        self.queue: deque = deque()
        self.depth = 2 if async_scheduling else 1      # vc.max_concurrent_batches under async scheduling
        self.steps = 0

    def step(self):
        """One engine step: schedule() of the next batch, then update_from_output() of the oldest one in
        the queue and the encoding of its EngineCoreOutputs. Returns the timings (ns) and counts."""
        perf, cpu, sched = time.perf_counter_ns, time.thread_time_ns, self.sched
        token = 100 + self.steps % 1000
        self.steps += 1
        w0, c0 = perf(), cpu()
        so = sched.schedule()
        w1, c1 = perf(), cpu()
        self.queue.appendleft((so, runner_output(sched, so, token)))
        if len(self.queue) < self.depth:
            return None
        old, mro = self.queue.pop()
        w2, c2 = perf(), cpu()
        outs = sched.update_from_output(old, mro)
        w3, c3 = perf(), cpu()
        for eco in outs.values():
            self.encoder.encode(eco)
        w4, c4 = perf(), cpu()
        n_out = sum(len(o.new_token_ids) for eco in outs.values() for o in eco.outputs)
        return (w1 - w0, w3 - w2, w4 - w3, c1 - c0, c3 - c2, c4 - c3, len(so.num_scheduled_tokens), n_out,
                so.total_num_scheduled_tokens)

    def prefill(self) -> None:
        sched = self.sched
        add_requests(sched, self.n, max_tokens=self.max_tokens, hasher=self.hasher, prompt_tokens=self.prompt_tokens)
        while len(sched.running) < self.n or any(r.num_computed_tokens < r.num_prompt_tokens
                                                 for r in sched.requests.values()):
            self.step()
            if self.steps > self.prefill_limit:
                raise RuntimeError(f"N={self.n}: prefill did not finish in {self.steps} steps")

    def timed(self, k: int) -> list[tuple]:
        rows = [self.step() for _ in range(k)]
        # every timed step is a pure decode step of all N requests, one token each, N tokens out
        bad = [r for r in rows if r is None or r[6] != self.n or r[7] != self.n or r[8] != self.n]
        if bad:
            raise RuntimeError(f"N={self.n}: {len(bad)} timed steps were not a full decode step: {bad[:3]}")
        if self.sched.waiting or len(self.sched.running) != self.n:
            raise RuntimeError(f"N={self.n}: running {len(self.sched.running)}, waiting {len(self.sched.waiting)}")
        return rows


def summarize(n: int, rows: list[tuple], chunk: int) -> dict:
    def us(vals):
        return round(statistics.median(vals) / 1e3, 2)

    sums_w = [r[0] + r[1] + r[2] for r in rows]
    sums_c = [r[3] + r[4] + r[5] for r in rows]
    passes = [sums_c[i:i + chunk] for i in range(0, len(sums_c), chunk)]
    return {
        "n": n, "timed_steps": len(rows),
        "schedule_cpu_us": us([r[3] for r in rows]), "update_cpu_us": us([r[4] for r in rows]),
        "encode_cpu_us": us([r[5] for r in rows]), "sum_cpu_us": us(sums_c),
        "sum_cpu_us_mean": round(statistics.fmean(sums_c) / 1e3, 2),
        "sum_cpu_us_p10": round(statistics.quantiles(sums_c, n=10)[0] / 1e3, 2),
        "sum_cpu_us_p90": round(statistics.quantiles(sums_c, n=10)[-1] / 1e3, 2),
        "schedule_us": us([r[0] for r in rows]), "update_us": us([r[1] for r in rows]),
        "encode_us": us([r[2] for r in rows]), "sum_us": us(sums_w),
        "sum_us_mean": round(statistics.fmean(sums_w) / 1e3, 2),
        "cpu_us_per_request": round(statistics.median(sums_c) / 1e3 / n, 2),
        # the lower quartile of the pass medians: the machine's quieter passes (see the module docstring)
        "sum_cpu_us_quiet": round(statistics.quantiles([statistics.median(p) for p in passes], n=4)[0] / 1e3, 2)
        if len(passes) >= 2 else us(sums_c),
        "sum_cpu_us_pass_medians": [us(p) for p in passes],
    }


def fit(points: list[tuple[int, float]]) -> dict:
    """Least squares t = a + b N over the points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return {"intercept_us": round(my - b * mx, 1), "slope_us_per_request": round(b, 3), "ns": xs}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns", default=",".join(map(str, DEFAULT_NS)))
    ap.add_argument("--passes", type=int, default=30, help="passes over all N, each timing --chunk steps per N")
    ap.add_argument("--chunk", type=int, default=20, help="consecutive timed steps per N in one pass")
    ap.add_argument("--warmup", type=int, default=32, help="untimed decode steps per N after the prefill")
    ap.add_argument("--sync", action="store_true", help="synchronous Scheduler instead of the async default")
    ap.add_argument("--prompt-tokens", type=int, default=PROMPT_LEN, help="mean prompt length (spread +-8)")
    ap.add_argument("--model", type=Path, default=ROOT / "benchmarks/validation_configs/qwen3-8b")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--smoke", action="store_true", help="N = 1, 8; a few steps")
    args = ap.parse_args(argv)

    if not _vllm_importable():
        print("host_time_vllm: vllm is not importable in this interpreter; run it with .venv-vllm/bin/python")
        return 0
    _prepare_import()
    import vllm

    ns = [1, 8] if args.smoke else [int(x) for x in args.ns.split(",")]
    warmup, passes, chunk = (3, 2, 5) if args.smoke else (args.warmup, args.passes, args.chunk)
    t0 = time.time()
    engines = {n: Engine(args.model, n, warmup + passes * chunk, not args.sync, args.prompt_tokens) for n in ns}
    from vllm.utils.gc_utils import freeze_gc_heap

    freeze_gc_heap()              # as EngineCore.__init__ does after start-up, before any request arrives
    for n in ns:
        engines[n].prefill()
        for _ in range(warmup):
            engines[n].step()
    print(f"{len(ns)} schedulers built, prefilled and warmed up in {time.time() - t0:.0f} s", flush=True)
    rows: dict[int, list] = {n: [] for n in ns}
    load = [os.getloadavg()]
    for p in range(passes):      # interleaved: the machine's load drifts over all N alike
        for n in (ns if p % 2 == 0 else ns[::-1]):
            rows[n] += engines[n].timed(chunk)
        load.append(os.getloadavg())
        if p % 5 == 4 or p == passes - 1:
            print(f"pass {p + 1}/{passes}, load {load[-1][0]:.2f}", flush=True)
    import gc

    gc.unfreeze()                 # else nanobind (xgrammar) reports the frozen objects as leaks at exit
    table = [summarize(n, rows[n], chunk) for n in ns]
    big = [(t["n"], t["sum_cpu_us"]) for t in table if t["n"] >= 32]
    big_quiet = [(t["n"], t["sum_cpu_us_quiet"]) for t in table if t["n"] >= 32]
    big_wall = [(t["n"], t["sum_us"]) for t in table if t["n"] >= 32]
    load_1min = [x[0] for x in load]
    sched0 = engines[ns[0]].sched
    vc = engines[ns[0]].vc
    result = {
        "what": "vLLM V1 engine-core host time per decode step (scheduler schedule + update_from_output + "
                "EngineCoreOutputs msgpack encode), measured with vLLM's own code on a CPU; medians of per-step "
                "times (thread CPU time and wall clock) over all timed steps; a lower bound on the "
                "engine core's host work per step (see not_covered)",
        "script": "benchmarks/host_time_vllm.py",
        "vllm_version": vllm.__version__,
        "python": platform.python_version(),
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
        "loadavg_1min_during": {"min": round(min(load_1min), 2), "max": round(max(load_1min), 2),
                                "median": round(statistics.median(load_1min), 2)},
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {"model": str(args.model.relative_to(ROOT)) if args.model.is_relative_to(ROOT) else str(args.model),
                   "async_scheduling": vc.scheduler_config.async_scheduling, "scheduler": type(sched0).__name__,
                   "model_runner": "V2" if vc.use_v2_model_runner else "V1",
                   "prompt_tokens": f"{prompt_len(0, args.prompt_tokens)}-"
                                    f"{prompt_len(BLOCK_SIZE - 1, args.prompt_tokens)} (request i: "
                                    f"{args.prompt_tokens - BLOCK_SIZE // 2} + i % {BLOCK_SIZE})",
                   "block_size": BLOCK_SIZE, "prefix_caching": vc.cache_config.enable_prefix_caching,
                   "prefix_caching_hash": vc.cache_config.prefix_caching_hash_algo,
                   "log_stats": True, "max_num_seqs": MAX_NUM_SEQS,
                   "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS, "sampled_tokens_per_request_per_step": 1,
                   "warmup_steps": warmup, "passes": passes, "steps_per_pass": chunk,
                   "timed_steps_per_n": passes * chunk, "smoke": args.smoke},
        "table": table,
        "fit_n_ge_32_cpu": fit(big) if len(big) >= 2 else None,
        "fit_n_ge_32_wall": fit(big_wall) if len(big_wall) >= 2 else None,
        "fit_n_ge_32_cpu_quiet": fit(big_quiet) if len(big_quiet) >= 2 else None,
        "not_covered": [
            "model runner input preparation, launch / CUDA-graph replay and sampler host side "
            "(same process under the uni executor)",
            "wait for the device-to-host copy of sampled tokens",
            "frontend process: output decoding, detokenization, response streaming",
            "ZMQ send, add_request / finish, structured output, spec decode, logprobs",
        ],
    }
    print(f"{'N':>6} {'schedule':>10} {'update':>10} {'encode':>10} {'sum cpu':>10} {'sum wall':>10} {'cpu/req':>8}"
          f" {'quiet cpu':>10}  (us per step, medians over the timed steps; schedule/update/encode in CPU time)")
    for t in table:
        print(f"{t['n']:6d} {t['schedule_cpu_us']:10.1f} {t['update_cpu_us']:10.1f} {t['encode_cpu_us']:10.1f} "
              f"{t['sum_cpu_us']:10.1f} {t['sum_us']:10.1f} {t['cpu_us_per_request']:8.2f} "
              f"{t['sum_cpu_us_quiet']:10.1f}")
    for key in ("fit_n_ge_32_cpu", "fit_n_ge_32_wall", "fit_n_ge_32_cpu_quiet"):
        if result[key]:
            f = result[key]
            print(f"{key}: {f['intercept_us']} us + {f['slope_us_per_request']} us x N")
    print(f"vllm {result['vllm_version']}, {result['cpu_model']} x{result['cpu_count']}, "
          f"load average {result['loadavg_end']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
