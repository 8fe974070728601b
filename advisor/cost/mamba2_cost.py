"""A Mamba2 layer's decode step (Nemotron-H), apart from its in_proj/out_proj GEMMs: the kernels vLLM and
SGLang launch per layer and what each is charged.

  causal_conv1d_update    vllm/model_executor/layers/mamba/mamba_mixer2.py:949@0.33.0,
                          sglang/srt/layers/attention/mamba/mamba.py:695@0.5.23
      measured: AIConfigurator's mamba2_perf decode conv update (TRT-LLM 1.3.0rc20's kernel; the tables hold
      no vLLM or SGLang row) at the conv window bytes it loads and stores. It stands in for the engines' own
      kernel of the same op (vLLM's Triton port, SGLang's sgl-kernel/Triton one): the same work, the conv
      window of (conv kernel - 1) rows x the conv channels per request, read and written once.
  selective_state_update  mamba_mixer2.py:1090@0.33.0, mamba.py:756@0.5.23
      not measured (mamba2_perf has no such rows): the SSM state bytes it loads and stores over the estimated
      bandwidth (the estimate every linear-attention state gets), at least one measured small kernel (the
      elementwise stand-in at the rows x inner width it writes) for its launch and latency.
  gated RMSNorm           mamba_mixer2.py:609 -> rms_norm_gated :185@0.33.0, mamba.py:775@0.5.23
      the measured small kernel at the bytes it moves (reads the SSM output and the gate, writes the
      result: twice the stand-in's bytes per element of the inner width).

Three kernels per layer and step, each with its launch gap in its measured time (the step's gap count drops
by them). Without a measured system for the card, the caller keeps the state-bytes estimate. The prefill
chunk scan (mamba_chunk_scan_combined) is not measured either and stays an estimate in
advisor.cost.attention_cost.linear_prefill.
"""

from __future__ import annotations

from advisor.cost import measured
from advisor.cost.measured import Ops
from advisor.cost.rates import Rates
from advisor.cost.recurrent_state import RecurrentState
from advisor.cost.step_costs import Attention

DECODE_KERNELS = 3          # causal_conv1d_update + selective_state_update + gated RMSNorm (cited above)
CONV_CITE = ("causal_conv1d_update: vllm/model_executor/layers/mamba/mamba_mixer2.py:949@0.33.0, "
             "sglang/srt/layers/attention/mamba/mamba.py:695@0.5.23")
SSM_CITE = "selective_state_update: mamba_mixer2.py:1090@0.33.0, mamba.py:756@0.5.23"
NORM_CITE = "gated RMSNorm: mamba_mixer2.py:609 (rms_norm_gated :185)@0.33.0, mamba.py:775@0.5.23"


def decode(rates: Rates, ops: Ops | None, st: RecurrentState, batch: int, verify_tokens: int,
           inner: int) -> Attention | None:
    """The Mamba2 layers of one decode step of ``batch`` sequences scoring ``verify_tokens`` positions each;
    ``inner`` is the mixer's inner width on one GPU (heads/N x head dim). None: no measured evidence for
    this card (the caller keeps the estimate)."""
    if ops is None or not ops.measured or inner <= 0:
        return None
    ev, eng = ops.evidence, ops.engine
    moves = 1 + max(1, verify_tokens)                 # load once, store per verified position
    conv = measured.linear_attention_time(ev.gpu, "decode", batch * st.conv_bytes * moves, kind="mamba2",
                                          engine=eng, evidence=ev)
    rows = float(batch * max(1, verify_tokens))
    small = measured.elementwise_time(ev.gpu, rows, inner, engine=eng, evidence=ev)
    norm = measured.elementwise_time(ev.gpu, rows, 2 * inner, engine=eng, evidence=ev)
    if conv.seconds is None or small.seconds is None or norm.seconds is None:
        return None
    c_fix, s_fix, n_fix = conv.fixed_s or 0.0, small.fixed_s or 0.0, norm.fixed_s or 0.0
    ssm = max(batch * st.ssm_bytes * moves / rates.bw("kv"), small.seconds)
    busy = (conv.seconds - c_fix) * ops.bandwidth_scale + (ssm - s_fix) + (norm.seconds - n_fix)
    what = ("conv measured at one position; further verified positions' stores charged as bytes"
            if verify_tokens > 1 else "")
    source = "; ".join(x for x in (
        f"Mamba2 decode, {DECODE_KERNELS} kernels per layer. {CONV_CITE}: measured {conv.source}",
        conv.scaling, conv.note and f"{conv.note} (the same op on the same conv window bytes)", what,
        f"{SSM_CITE}: estimate, SSM state bytes / (DRAM x bandwidth_eff.kv), at least the measured small kernel "
        f"({small.source})", f"{NORM_CITE}: the measured small kernel at 2 x the inner width") if x)
    return Attention(st.layers * busy, 0.0, st.layers * (c_fix + s_fix + n_fix), st.layers * DECODE_KERNELS,
                     source)
