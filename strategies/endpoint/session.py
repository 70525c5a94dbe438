"""The ``endpoint`` session: an httpx client of an OpenAI-compatible streaming server.

Imported by ``EndpointStrategy.load`` only. Thread-safe: with ``concurrency = N`` the runner calls
``generate`` from N threads at once (one httpx client, a connection per stream).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from workbench.core.errors import first_line
from workbench.formatting import duration
from workbench.strategy import (
    Output,
    Probe,
    Prompt,
    Request,
    Session,
    StrategyError,
    TokenScores,
    error_context,
)

from .config import EndpointConfig
from .prometheus import Scrape, parse_prometheus, requests_done, window_figures
from .scoring import echo_position, first_choice, scores, vllm_position
from .stream import Stream, split_counts, transport_error

__all__ = ["EndpointSession", "split_counts"]

#: a server's refusal of too many logprobs names its limit (vLLM: "... greater than max allowed: 20")
_LOGPROB_LIMIT = re.compile(r"(?:max(?:imum)? allowed|<=|at most|maximum of)\D{0,3}(\d+)", re.IGNORECASE)

#: answers to a scoring request that mean the server does not offer it (rather than that it failed)
_REFUSED = (400, 404, 405, 422, 501)

#: how long the server's request counter may lag behind the streams' ends before a window is closed
METRICS_SETTLE_S = 2.0


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _root(base_url: str) -> str:
    """The server's root (where vLLM serves /metrics, /tokenize, /version): the API root minus /v1."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _error_text(response: httpx.Response) -> str:
    """The server's own message from an error response (OpenAI, vLLM, FastAPI and TGI shapes)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        message = message or body.get("message") or body.get("detail")
    if not message:
        message = response.text.strip() or response.reason_phrase
    text = message if isinstance(message, str) else json.dumps(message)
    return " ".join(text.split())[:300]


def http_error(response: httpx.Response) -> StrategyError:
    hint = " (check api_key_env)" if response.status_code in (401, 403) else ""
    return StrategyError(
        f"HTTP {response.status_code} from {response.request.url}: {_error_text(response)}{hint}"
    )


class EndpointSession(Session):
    timing_scope = "client"
    dtype = "server"  # the server's choice; not visible through its API

    def __init__(self, config: EndpointConfig, client: httpx.Client, model: str) -> None:
        self.config = config
        self.client = client
        self.model = model
        self.base = config.base_url.rstrip("/")
        self.root = _root(config.base_url)
        self.flavor = "generic"
        self.version: str | None = None
        self.can_tokenize = False
        self.metrics_url: str | None = None
        self.tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()

    # -- connecting ------------------------------------------------------------------------------

    @classmethod
    def connect(cls, config: EndpointConfig, model: str) -> EndpointSession:
        """Open a client, check the server answers and serves ``model``, and find what it offers."""
        headers = {"Accept": "text/event-stream, application/json"}
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise StrategyError(f"the environment variable {config.api_key_env} (api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        host = urlsplit(config.base_url).hostname or ""
        client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
            # the request's headers and body leave at once, not after a delayed ACK (Nagle)
            transport=httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]),
            # a proxy from the environment must not sit between us and a server on this machine
            trust_env=host not in ("127.0.0.1", "localhost", "::1"),
        )
        session = cls(config, client, model)
        try:
            session._discover()
        except BaseException:
            client.close()
            raise
        return session

    def _get(self, url: str) -> httpx.Response:
        try:
            return self.client.get(url)
        except httpx.HTTPError as exc:
            raise StrategyError(transport_error(exc, url, self.config.timeout_s)) from None

    def _discover(self) -> None:
        config = self.config
        response = self._get(f"{self.base}/models")
        served: list[dict[str, Any]] = []
        if response.status_code == 200:
            data = response.json().get("data") or []
            served = [m for m in data if isinstance(m, dict) and m.get("id")]
        elif response.status_code != 404:  # a server without /models is fine; a refusal is not
            raise http_error(response)
        ids = [m["id"] for m in served]
        if not self.model:
            if not ids:
                raise StrategyError(
                    f"{self.base}/models lists no model; set the variant's model to the served name"
                )
            self.model = ids[0]
        elif ids and self.model not in ids:
            raise StrategyError(f"the server at {self.base} serves {', '.join(ids)}, not {self.model!r}")
        entry = next((m for m in served if m["id"] == self.model), {})
        if isinstance(entry.get("max_model_len"), int):
            self.context_length = entry["max_model_len"]
        if config.server != "generic":
            self.version = self._vllm_version()
            if config.server == "vllm" or entry.get("owned_by") == "vllm":
                self.flavor = "vllm"
        self.can_tokenize = self._probe_tokenize()
        if config.tokenizer:
            self.tokenizer = _load_tokenizer(config.tokenizer)
        self.metrics_url = config.metrics_url if config.metrics_url is not None else f"{self.root}/metrics"
        if self.metrics_url:
            try:
                self.server_snapshot()
            except StrategyError as exc:
                _log(f"not reading server metrics: {exc}")
                self.metrics_url = None
        self.server_info = {
            "base_url": config.base_url,
            "served_model": self.model,
            "server": self.flavor,
            "version": self.version,
            "max_model_len": self.context_length,
            "metrics_url": self.metrics_url,
            "tokenize_endpoint": self.can_tokenize,
            "local_tokenizer": config.tokenizer,
        }

    def _vllm_version(self) -> str | None:
        try:
            response = self.client.get(f"{self.root}/version")
            version = response.json().get("version") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return str(version) if version else None

    def _probe_tokenize(self) -> bool:
        try:
            response = self.client.post(
                f"{self.root}/tokenize", json={"model": self.model, "prompt": "hello"}
            )
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        try:
            return isinstance(response.json().get("tokens"), list)
        except (ValueError, AttributeError):
            return False

    # -- tokens ----------------------------------------------------------------------------------

    def encode(self, prompt: Prompt) -> list[int]:
        """Token ids of the prompt as the server will see it (untimed): the local tokenizer, else the
        server's /tokenize; ``[]`` when neither exists (the server's usage then gives the count)."""
        if self.tokenizer is not None:
            return self._local_encode(prompt)
        if self.can_tokenize:
            body: dict[str, Any] = {"model": self.model}
            if prompt.messages is not None:
                body.update(messages=list(prompt.messages), add_generation_prompt=True)
            else:
                body["prompt"] = prompt.prompt or ""
            response = self.client.post(f"{self.root}/tokenize", json=body)
            if response.status_code != 200:
                raise http_error(response)
            return [int(t) for t in response.json()["tokens"]]
        if prompt.input_tokens is not None:
            raise StrategyError(
                "an input-length sweep needs token ids: set tokenizer to a local copy of the served model, "
                "or use a server with /tokenize"
            )
        return []

    def _local_encode(self, prompt: Prompt) -> list[int]:
        tok = self.tokenizer
        with self._tokenizer_lock:  # a Rust tokenizer object must not be borrowed by two threads
            if prompt.messages is not None:
                text = tok.apply_chat_template(
                    list(prompt.messages), add_generation_prompt=True, tokenize=False
                )
                return list(tok(text, add_special_tokens=False)["input_ids"])
            return list(tok(prompt.prompt or "")["input_ids"])

    def _count_text(self, text: str) -> tuple[int, list[int] | None, str] | None:
        """Tokens in generated text: (count, end offset of each token or None, source)."""
        if self.tokenizer is not None:
            with self._tokenizer_lock:
                enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            return len(enc["input_ids"]), [int(end) for _, end in enc["offset_mapping"]], "tokenizer"
        if self.can_tokenize:
            response = self.client.post(
                f"{self.root}/tokenize",
                json={"model": self.model, "prompt": text, "add_special_tokens": False},
            )
            if response.status_code == 200:
                return len(response.json()["tokens"]), None, "server-tokenize"
        return None

    # -- generating ------------------------------------------------------------------------------

    def _request(self, request: Request) -> tuple[str, dict[str, Any]]:
        prompt = request.prompt
        api = self.config.api
        if api == "auto":
            api = "chat" if prompt.messages is not None and prompt.input_tokens is None else "completions"
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "max_tokens": request.max_new_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream_options": {"include_usage": True},
        }
        if self.flavor == "vllm":
            body["stream_options"]["continuous_usage_stats"] = True
            body["return_token_ids"] = True
        if request.top_k > 0:
            body["top_k"] = request.top_k
        if request.temperature > 0:
            body["seed"] = request.seed
        if request.ignore_eos:
            body["ignore_eos"] = True
        if request.stop:
            body["stop"] = list(request.stop)
        if api == "chat":
            if prompt.input_tokens is not None:
                raise StrategyError(
                    "an input-length sweep sends token ids: use api = 'completions' or 'auto'"
                )
            messages = (
                list(prompt.messages)
                if prompt.messages is not None
                else [{"role": "user", "content": prompt.prompt or ""}]
            )
            body["messages"] = [dict(m) for m in messages]
            path = "/chat/completions"
        else:
            if prompt.messages is not None or prompt.input_tokens is not None:
                if not request.input_ids:
                    raise StrategyError(
                        "a chat prompt on api = 'completions' is sent as token ids, and none could be had: "
                        "set tokenizer, or use a server with /tokenize"
                    )
                body["prompt"] = list(request.input_ids)
            else:
                body["prompt"] = prompt.prompt or ""
            path = "/completions"
        body.update(self.config.extra)
        return f"{self.base}{path}", body

    def generate(self, request: Request, probe: Probe) -> Output:
        url, body = self._request(request)
        stream = Stream(url)
        deadline = time.monotonic() + self.config.timeout_s
        try:
            with self.client.stream("POST", url, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise http_error(response)
                for line in response.iter_lines():
                    if stream.feed(line, probe):
                        break
                    if not stream.steps and time.monotonic() > deadline:
                        raise StrategyError(
                            f"no first token from {url} within {duration(self.config.timeout_s)}"
                        )
        except httpx.HTTPError as exc:
            raise StrategyError(stream.transport_error(exc, self.config.timeout_s)) from None
        probe.end()  # the answer is complete: what follows is bookkeeping, not generation
        if not stream.done and stream.finish is None:
            raise StrategyError(
                f"the stream from {url} ended before the answer was complete (no finish_reason, no [DONE]) "
                f"after {stream.chunks} chunks"
            )
        text = "".join(stream.texts)
        source = stream.mode
        counted = (stream.usage or {}).get("completion_tokens")
        if stream.mode is None and counted:
            raise StrategyError(f"the server counted {counted} tokens but streamed none")
        if stream.mode == "text":
            source = self._recount(stream, text, probe)
        usage = stream.usage or {}
        return Output(
            token_ids=list(stream.ids) if stream.mode == "server-token-ids" else [],
            text=text,
            finish_reason=stream.finish_reason(),
            input_tokens=usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None,
            token_count_source=source,
        )

    def _recount(self, stream: Stream, text: str, probe: Probe) -> str:
        """Steps reported as text only: count the tokens and tell the probe how many each step held."""
        usage_total = (stream.usage or {}).get("completion_tokens")
        counted = self._count_text(text) if self.tokenizer is not None or usage_total is None else None
        if isinstance(usage_total, int):
            total, source = usage_total, "usage"
        elif counted is not None:
            total, source = counted[0], counted[2]
        else:
            raise StrategyError(
                "cannot count the generated tokens: the server sent no usage (stream_options.include_usage) "
                "and has no /tokenize; set tokenizer to a local copy of the served model"
            )
        ends = counted[1] if counted is not None else None
        chars = [len(t) for t in stream.step_texts]
        if not chars:
            if total:
                raise StrategyError(f"the server counted {total} tokens but streamed none")
            return source
        if ends is None and stream.finish == "stop" and chars[-1] == 0 and total > len(chars) - 1:
            # An empty finishing chunk after a stop carries the end-of-sequence (or stop) token.
            counts = [*split_counts(chars[:-1], total - 1), 1]
        else:
            counts = split_counts(chars, total, ends)
        probe.recount(counts)
        split = "tokenizer" if ends is not None else "chars"
        return source if source in ("tokenizer",) else f"{source}+{split}"

    # -- scoring (the quality pass; untimed) -----------------------------------------------------

    def score(self, token_ids: Sequence[int], start: int) -> TokenScores:
        """What the server tells of its distribution at each position of a given token sequence, sent
        as token ids in one non-streamed ``/completions`` request (``max_tokens = 1``): vLLM's
        ``prompt_logprobs`` (a vLLM server), else OpenAI-style ``echo`` + ``logprobs`` with the
        tokens named by id (``return_tokens_as_token_ids``). Only a top-k is known (``score_top_k``,
        or the server's own limit when it allows fewer), plus the given token's log-probability.
        A server that offers neither raises ``NotImplementedError`` saying why (the quality pass
        records the variant "not scored" with it); a failed request raises :class:`StrategyError`."""
        ids = [int(t) for t in token_ids]
        if not 1 <= start < len(ids):
            raise ValueError(f"start {start} outside 1..{len(ids) - 1}")
        if self.context_length and len(ids) >= self.context_length:
            raise StrategyError(
                f"the sequence to score ({len(ids)} tokens) leaves no room in the server's context "
                f"({self.context_length})"
            )
        body: dict[str, Any] = {
            **self.config.extra,
            "model": self.model,
            "prompt": ids,
            "max_tokens": 1,
            "temperature": 0.0,
            "stream": False,
        }
        if self.flavor == "vllm":
            data, k = self._score_request(body, "prompt_logprobs")
            rows = first_choice(data).get("prompt_logprobs")
            if not isinstance(rows, list):
                raise NotImplementedError("the server's answer has no prompt_logprobs")
            return scores(ids, start, k, rows, vllm_position)
        body.update(echo=True, return_tokens_as_token_ids=True)
        data, k = self._score_request(body, "logprobs")
        logprobs = first_choice(data).get("logprobs")
        if not isinstance(logprobs, dict) or not isinstance(logprobs.get("top_logprobs"), list):
            raise NotImplementedError(
                "the server answered without logprobs (it offers neither vLLM's prompt_logprobs "
                "nor echo with logprobs)"
            )
        tokens = logprobs.get("tokens") or []
        if [str(t) for t in tokens[: len(ids)]] != [f"token_id:{t}" for t in ids]:
            raise NotImplementedError(
                "the server's echoed tokens are not named by id (return_tokens_as_token_ids), "
                "so its top tokens cannot be matched to the baseline's"
            )
        given = logprobs.get("token_logprobs") or []
        rows = [
            None if i == 0 else (top, given[i] if i < len(given) else None)
            for i, top in enumerate(logprobs["top_logprobs"])
        ]
        return scores(ids, start, k, rows, echo_position)

    def _score_request(self, body: dict[str, Any], key: str) -> tuple[dict[str, Any], int]:
        """POST /completions asking for ``score_top_k`` logprobs under ``key``; once more with the
        server's limit when it names a lower one."""
        url = f"{self.base}/completions"
        k = self.config.score_top_k
        for _ in range(2):
            body[key] = k
            try:
                response = self.client.post(url, json=body)
            except httpx.HTTPError as exc:
                raise StrategyError(f"scoring: {transport_error(exc, url, self.config.timeout_s)}") from None
            if response.status_code == 400:
                limit = _LOGPROB_LIMIT.search(_error_text(response))
                if limit and 1 <= int(limit.group(1)) < k:
                    k = int(limit.group(1))
                    continue
            if response.status_code in _REFUSED:
                raise NotImplementedError(f"the server refused the scoring request: {http_error(response)}")
            if response.status_code >= 400:
                raise StrategyError(f"scoring: {http_error(response)}")
            try:
                data = response.json()
            except ValueError:
                raise StrategyError(f"scoring: {url} answered with no JSON") from None
            if not isinstance(data, dict):
                raise StrategyError(f"scoring: {url} answered with no JSON object")
            return data, k
        raise NotImplementedError(f"the server refused {key} = {k} (below the limit it named)")

    # -- the server's own figures ----------------------------------------------------------------

    def _scrape(self) -> Scrape:
        assert self.metrics_url
        response = self._get(self.metrics_url)
        if response.status_code != 200:
            raise http_error(response)
        return parse_prometheus(response.text)

    def server_snapshot(self) -> Scrape | None:
        if not self.metrics_url:
            return None
        # Always a fresh scrape: the end of this variant's last window is no start for the next one,
        # since other variants (interleaved in the same run) may have used the server in between.
        return self._scrape()

    def server_figures(self, before: Scrape, requests: int) -> dict[str, Any] | None:
        """Deltas since ``before``, once the server has counted the window's ``requests``."""
        if not self.metrics_url:
            return None
        give_up = time.monotonic() + METRICS_SETTLE_S
        start = requests_done(before, self.model) or 0.0
        while True:
            after = self._scrape()
            done = requests_done(after, self.model)
            if done is None or done - start >= requests or time.monotonic() > give_up:
                break
            time.sleep(0.05)
        figures = window_figures(before, after, self.model)
        figures["source"] = self.metrics_url
        return figures

    def close(self) -> None:
        self.client.close()


def _load_tokenizer(source: str) -> Any:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise StrategyError(
            "tokenizer needs transformers (pip install 'llm-workbench[engine]'), or leave tokenizer unset "
            "to count with the server"
        ) from None
    from workbench.sources import materialize, parse_source

    where = materialize(parse_source(source), log=_log)
    with error_context(
        f"cannot load the tokenizer of {source!r}", StrategyError, catch=OSError, detail=first_line
    ):
        return AutoTokenizer.from_pretrained(where.location, local_files_only=where.local_files_only)
