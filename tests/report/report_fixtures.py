"""Constants and helpers of the report tests (a plain module: `conftest` names are ambiguous)."""

from __future__ import annotations

DEMO = "demo:qwen3-8b-nvfp4"
GPUS = ("rtx-3090", "rtx-5090", "h100-sxm")
FORMATS = ("md", "json", "html")
# Planted secrets: a hub token in the environment and an API key on the command line.
HF_TOKEN = "hf_PlantedTokenAbCdEfGhIjKlMnOpQrSt"
API_KEY = "sk-planted-api-key-0123456789abcdef"
ENV_KEY = "planted-openai-key-value-42"


def run_cli(argv) -> int:
    from advisor.cli import main

    return main([str(a) for a in argv])
