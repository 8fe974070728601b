"""nvfp4-advisor: what a quantized checkpoint really runs as on an NVIDIA GPU, and why."""

__version__ = "0.1.0"
