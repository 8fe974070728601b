"""Triton microbenchmark kernels (torch + triton: the optional [kernels] extra).

Modules: decode (in-register weight decode), weight_only (NVFP4 / FP8 / INT4 GEMV + GEMM),
bandwidth (copy / read-only streams), baseline (torch.matmul), formats (random weights in the
layout contract). Import them only where torch and triton are wanted; this package itself
imports nothing heavy. Measured numbers per version and card: kernels/NOTES.md.
"""
