"""Secrets never leave the machine in a report, a log excerpt or a displayed command.

Two sources: values the caller knows are secret (an --api-key argument) and well-known token
environment variables; plus token-shaped strings (hf_…, sk-…) anywhere in the text.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

REDACTED = "***"

SECRET_ENV_VARS = (
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "OPENAI_API_KEY", "VLLM_API_KEY",
    "SGLANG_API_KEY", "API_KEY", "NGC_API_KEY", "WANDB_API_KEY",
)
SECRET_FLAGS = ("--api-key", "--api_key", "--token", "--hf-token", "--hf_token")
# Token shapes: Hugging Face user tokens, OpenAI-style keys, bearer headers.
_TOKEN_RE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{16,})\b|(?<=Bearer )[A-Za-z0-9._\-]{16,}")


def env_secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Secret values present in an environment mapping (passed in: no global reads here)."""
    return tuple(v for k in SECRET_ENV_VARS if (v := environ.get(k)) and len(v) >= 4)


def argv_secrets(argv: Iterable[str]) -> tuple[str, ...]:
    """Values following a secret flag (``--api-key X`` or ``--api-key=X``)."""
    out, take = [], False
    for arg in argv:
        if take:
            out.append(arg)
            take = False
        elif arg in SECRET_FLAGS:
            take = True
        elif "=" in arg and arg.split("=", 1)[0] in SECRET_FLAGS:
            out.append(arg.split("=", 1)[1])
    return tuple(s for s in out if s)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return _TOKEN_RE.sub(REDACTED, text)


def redact_argv(argv: Iterable[str], secrets: Iterable[str] = ()) -> list[str]:
    argv = list(argv)
    known = set(secrets) | set(argv_secrets(argv))
    return [redact(a, known) for a in argv]
