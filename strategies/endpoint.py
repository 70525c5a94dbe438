"""``endpoint``: measure an OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp...).

The variant's ``model`` is the *served* model name (empty: the server's first model). The session
streams each request (server-sent events) and reports a probe step as each chunk with new tokens
arrives, so the runner's clock gives client-side TTFT/TPOT/ITL: they include the network, HTTP and
the server's queue — ``timing_scope = "client"`` on every trial says so. One chunk may carry several
tokens (speculative decoding on the server); tokens are counted, never chunks (see
``docs/strategies.md`` for the order: the server's token ids or per-chunk usage, the final usage
chunk, a local tokenizer, the server's ``/tokenize``). Before and after each trial (or group of
parallel streams) the server's Prometheus ``/metrics`` is read, and its own TTFT, ITL, queueing and
speculative-decoding counters over that window are stored beside the client's figures.

No torch: it runs on the viewer install (httpx is a core dependency). The API key is read from the
environment variable named by ``api_key_env`` and is never stored.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from workbench.core.config import field_help, model_field
from workbench.core.errors import StrategyError
from workbench.core.strategy import Session, Strategy

if TYPE_CHECKING:
    from workbench.core.device import Device
    from workbench.core.variant import Variant

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

    def __post_init__(self) -> None:
        check_url(self.base_url, "base_url")
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


class EndpointStrategy(Strategy):
    name = "endpoint"
    description = "An OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp), timed as its client"
    Config = EndpointConfig
    requires_model = False  # `model` is the served model's name, not a source to load
    supports_concurrency = True

    def available(self) -> str | None:
        import importlib.util

        if importlib.util.find_spec("httpx") is None:
            return "needs httpx (pip install httpx)"
        return None

    def preflight(self, variant: Variant) -> None:
        env = variant.config.api_key_env
        if env and not os.environ.get(env):
            raise StrategyError(f"the environment variable {env} (api_key_env) is not set")

    def load(self, variant: Variant, device: Device) -> Session:
        from strategies._endpoint import EndpointSession

        return EndpointSession.connect(variant.config, variant.model)
