"""Triton microbenchmarks: measure what this card achieves per kernel class, calibrate `plan`.

Pure parts (no torch): shapes (what to run), configs (launch candidates), results (metrics,
Doc table, JSON payload, calibration). runner (torch + triton, imported lazily) executes them.
"""
