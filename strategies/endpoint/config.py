"""The ``endpoint`` strategy's parameters (a spec's keys beside ``strategy = "endpoint"``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from workbench.strategy import field_help, model_field

__all__ = ["EndpointConfig", "check_url"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class EndpointConfig:
    base_url: str = field_help(
        "the server's OpenAI-compatible API root (vLLM: http://HOST:8000/v1)",
        default="http://127.0.0.1:8000/v1",
    )
    api: Literal["auto", "chat", "completions"] = field_help(
        "auto: /chat/completions for chat prompts, /completions for raw text (as local variants see them)",
        default="auto",
    )
    api_key_env: str | None = field_help(
        "name of the environment variable holding the API key (the key itself is never stored)", default=None
    )
    timeout_s: float = field_help(
        "seconds to wait for the server: to connect, for the first token, between chunks", default=60.0
    )
    extra: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "extra fields merged into every request body (server-specific options); never secrets"
        },
    )
    tokenizer: str | None = model_field(
        "a model source whose tokenizer counts tokens locally when the server does not (needs transformers)",
        default=None,
    )
    metrics_url: str | None = field_help(
        "the server's Prometheus metrics (default: /metrics at the server's root; \"\" = do not read)",
        default=None,
    )
    server: Literal["auto", "vllm", "generic"] = field_help(
        "vllm: ask for vLLM's extensions (token ids and usage in every chunk); auto: detect vLLM",
        default="auto",
    )

    score_top_k: int = field_help(
        "top tokens per position the quality pass asks the server for (vLLM's prompt_logprobs, or echo + "
        "logprobs); a server that allows fewer (vLLM's --max-logprobs, 20 by default) is asked for its most",
        default=32,
    )

    def __post_init__(self) -> None:
        check_url(self.base_url, "base_url")
        if not 1 <= self.score_top_k <= 1000:
            raise ValueError(f"score_top_k must be 1..1000, got {self.score_top_k}")
        if self.metrics_url:
            check_url(self.metrics_url, "metrics_url")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            raise ValueError(
                "api_key_env names an environment variable (e.g. OPENAI_API_KEY), not the key itself"
            )


def check_url(url: str, key: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{key} must be an http:// or https:// URL with a host, got {url!r}")
    if parts.username or parts.password:
        # the spec is stored with the run: credentials in a URL would land in the database
        raise ValueError(f"{key} must not carry credentials; name an environment variable in api_key_env")
