"""Properties that must hold for any GPU and checkpoint (hypothesis)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from cost_builders import dense_checkpoint, explanation, make_gpu, moe_checkpoint

from advisor.cost import context
from advisor.cost.engine_profile import GIB, load_engine_memory
from advisor.cost.overrides import Overrides

ENGINES = {e: load_engine_memory(e) for e in ("vllm", "sglang", "fastllm")}
KV = ENGINES["vllm"].kv_dtype("bfloat16")
FAST = settings(max_examples=40, deadline=None)


def _gpu(sms, clock, bw, mem=24.0, per_clk=1024):
    peak = sms * per_clk * clock / 1e6     # FP16/BF16 TFLOPS at per_clk FLOP/clk/SM
    return make_gpu("test-gpu", sm_count=sms, boost_clock_mhz=clock, bandwidth_gbs=bw, memory_gb=mem,
                    peaks={"fp16_fp32acc": peak, "fp16_fp16acc": peak, "bf16": peak, "tf32": peak / 2,
                           "fp8_fp32acc": None, "fp8_fp16acc": None, "fp6": None, "fp4": None,
                           "int8": 2 * peak, "int4": 4 * peak})


def _ctx(ck, scheme, gpu, engine="vllm", **ov):
    return context.build(ck, explanation(scheme, gpu=gpu.id), gpu, gpus=1, engine=ENGINES[engine],
                         overrides=Overrides(**ov))


@FAST
@given(bw=st.floats(100, 8000), factor=st.floats(1.0, 4.0), batch=st.integers(1, 512),
       ctx_len=st.integers(0, 131072),
       scheme=st.sampled_from(["BF16", "W8A16-FP8", "W4A16-NVFP4", "W4A16-INT4", "W8A8-FP8"]),
       moe=st.booleans(), graphs=st.booleans())
def test_more_bandwidth_never_predicts_slower_decode(bw, factor, batch, ctx_len, scheme, moe, graphs):
    ck = moe_checkpoint(scheme) if moe else dense_checkpoint(scheme)
    gpu = _gpu(82, 1700.0, bw)
    slow = _ctx(ck, scheme, gpu, bandwidth_gbs=bw).model.decode_step(batch, ctx_len, KV, graphs=graphs)
    fast = _ctx(ck, scheme, gpu, bandwidth_gbs=bw * factor).model.decode_step(batch, ctx_len, KV, graphs=graphs)
    assert fast.seconds <= slow.seconds * (1 + 1e-12)


@FAST
@given(sms=st.integers(20, 200), clock=st.floats(1000, 2800), per_clk=st.sampled_from([512, 1024, 2048, 4096, 8192]),
       bytes_per_slot=st.floats(0.3, 8.0), ctx_len=st.integers(0, 65536), moe=st.booleans())
def test_nvfp4_weights_never_slower_than_fp8_at_batch_1_on_the_same_path(sms, clock, per_clk, bytes_per_slot,
                                                                          ctx_len, moe):
    """Both weight-only (Marlin class, BF16 MMA). GPUs span real shapes: DRAM bytes per issue slot
    0.3-8 (RTX 5090 1.1, RTX 3090 1.7, H200 4.6, B200 6.6) and at least 70 tensor FLOP per DRAM byte
    (the lowest in the table: RTX 3060 / 3090 GeForce FP32-accumulate, ~71-76). That floor belongs to
    GDDR cards (< 3 DRAM bytes per issue slot); HBM cards with more bytes per slot have at least ~150
    tensor FLOP per byte (A100-80GB 153 at 3.4 bytes/slot, H200 206, B200 281): a 7-bytes-per-slot
    card with GeForce tensor throughput does not exist and would be issue-bound on any 4-bit unpack."""
    bw = bytes_per_slot * sms * 4 * clock * 1e6 / 1e9
    peak = sms * per_clk * clock / 1e6
    flop_per_byte = peak * 1e12 / (bw * 1e9)
    assume(flop_per_byte >= 70)
    assume(bytes_per_slot < 3 or flop_per_byte >= 150)
    gpu = _gpu(sms, clock, bw, per_clk=per_clk)
    mk = moe_checkpoint if moe else dense_checkpoint
    nv = _ctx(mk("W4A16-NVFP4"), "W4A16-NVFP4", gpu).model.decode_step(1, ctx_len, KV)
    f8 = _ctx(mk("W8A16-FP8"), "W8A16-FP8", gpu).model.decode_step(1, ctx_len, KV)
    assert nv.seconds <= f8.seconds


@FAST
@given(engine=st.sampled_from(sorted(ENGINES)), s1=st.floats(0.3, 0.98), s2=st.floats(0.3, 0.98),
       mem=st.sampled_from([11.0, 16.0, 24.0, 48.0, 80.0]), chunk=st.sampled_from([2048, 4096, 8192]),
       batch=st.integers(1, 256))
def test_kv_pool_is_monotone_in_memory_share(engine, s1, s2, mem, chunk, batch):
    lo, hi = sorted((s1, s2))
    gpu = _gpu(82, 1700.0, 936.0, mem)
    ctx = _ctx(dense_checkpoint("W4A16-NVFP4"), "W4A16-NVFP4", gpu, engine)
    kv = ENGINES[engine].kv_dtypes[1]
    a = ctx.pool_tokens(context.Settings(kv, batch, lo, chunk, 1, 0, True))
    b = ctx.pool_tokens(context.Settings(kv, batch, hi, chunk, 1, 0, True))
    assert a <= b


@FAST
@given(b1=st.integers(1, 512), b2=st.integers(1, 512), share=st.floats(0.5, 0.95))
def test_max_context_per_request_never_grows_with_batch(b1, b2, share):
    lo, hi = sorted((b1, b2))
    ctx = _ctx(dense_checkpoint("W4A16-NVFP4", max_pos=10**7), "W4A16-NVFP4", _gpu(82, 1700.0, 936.0))
    s = context.Settings(KV, 64, share, 2048, 1, 0, True)
    assert ctx.max_context(s, hi) <= ctx.max_context(s, lo)


@FAST
@given(vram=st.floats(8, 200))
def test_pool_grows_with_vram(vram):
    gpu = _gpu(82, 1700.0, 936.0)
    ck = dense_checkpoint("W4A16-NVFP4")
    s = context.Settings(KV, 16, 0.9, 2048, 1, 0, True)
    small = _ctx(ck, "W4A16-NVFP4", gpu, vram_gb=vram).pool_tokens(s)
    big = _ctx(ck, "W4A16-NVFP4", gpu, vram_gb=vram + 1).pool_tokens(s)
    assert big >= small
    assert big - small <= 0.9 * GIB / (32 * 2 * 8 * 128 * 2) + 1
