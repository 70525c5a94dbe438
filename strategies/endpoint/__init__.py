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
from typing import TYPE_CHECKING

from workbench.strategy import Session, Strategy, StrategyError

from .config import EndpointConfig, check_url

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

__all__ = ["EndpointConfig", "EndpointStrategy", "check_url"]


class EndpointStrategy(Strategy[EndpointConfig]):
    name = "endpoint"
    lever = "a served engine"
    phase = "both"
    description = "An OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp), timed as its client"
    Config = EndpointConfig
    requires_model = False  # `model` is the served model's name, not a source to load
    supports_concurrency = True

    def available(self) -> str | None:
        import importlib.util

        if importlib.util.find_spec("httpx") is None:
            return "needs httpx (pip install httpx)"
        return None

    def preflight(self, variant: Variant[EndpointConfig]) -> None:
        env = variant.config.api_key_env
        if env and not os.environ.get(env):
            raise StrategyError(f"the environment variable {env} (api_key_env) is not set")

    def load(self, variant: Variant[EndpointConfig], device: Device) -> Session:
        from .session import EndpointSession

        return EndpointSession.connect(variant.config, variant.model)
