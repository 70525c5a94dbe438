"""A small real OpenAI-compatible streaming server with known costs, for tests and benchmarks.

Standard library only: ``http.server`` in a thread on 127.0.0.1, HTTP/1.1 with chunked server-sent
events, like vLLM's. It "serves" a deterministic pretend model: it waits ``prefill_ms`` (+
``prefill_ms_per_token`` per prompt token), then sends ``tokens_per_chunk`` tokens every
``decode_ms_per_token × tokens_per_chunk`` ms (several tokens per chunk imitate speculative decoding
on the server). Parallel requests do not slow each other (ideal batching), so aggregate throughput
grows with concurrency. It also serves ``/v1/models``, ``/version``, ``/tokenize`` and a Prometheus
``/metrics`` page with vLLM's metric names, and can misbehave on purpose (HTTP errors, a stream that
stops, a server that never answers). Non-streamed ``/v1/completions`` score a token-id prompt as vLLM
does (``prompt_logprobs``: one ``{"<id>": {"logprob", "rank", "decoded_token"}}`` per prompt token,
``null`` first, the top-k plus the given token; refused above ``max_logprobs`` with vLLM's message)
and as OpenAI's legacy API does (``echo`` + ``logprobs``: tokens and top logprobs named by text, or
``token_id:<id>`` with vLLM's ``return_tokens_as_token_ids``), from a pretend distribution
(:meth:`FakeOpenAIServer.distribution`) that ``logit_noise`` perturbs like a quantization would::

    with FakeOpenAIServer(prefill_ms=30, decode_ms_per_token=5) as server:
        ...  # a spec variant: strategy = "endpoint", base_url = server.base_url

Every switch is an attribute; change them between requests.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer"]

VOCAB = 32_000
EOS_ID = 2


def words_to_ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % VOCAB for w in text.split()]


class FakeOpenAIServer:
    def __init__(
        self,
        *,
        model: str = "fake-model",
        prefill_ms: float = 20.0,
        prefill_ms_per_token: float = 0.0,
        decode_ms_per_token: float = 4.0,
        tokens_per_chunk: int = 1,
        max_model_len: int = 4096,
        vllm: bool = True,
    ) -> None:
        self.model = model
        self.prefill_ms = prefill_ms
        self.prefill_ms_per_token = prefill_ms_per_token
        self.decode_ms_per_token = decode_ms_per_token
        self.tokens_per_chunk = tokens_per_chunk
        self.max_model_len = max_model_len
        #: behave like vLLM: owned_by "vllm", /version, token ids and usage in every chunk on request
        self.vllm = vllm
        self.honour_usage = True  # stream_options.include_usage
        self.serve_tokenize = True
        self.serve_metrics = True
        self.eos_after: int | None = None  # end the answer with EOS after this many tokens
        self.fail: tuple[int, str] | None = None  # answer every generation request with this error
        self.drop_after: int | None = None  # close the connection after this many chunks
        self.stall_after: int | None = None  # send this many chunks, then nothing
        self.require_key: str | None = None  # 401 unless "Authorization: Bearer <key>"
        self.serve_prompt_logprobs = True  # vLLM's prompt_logprobs (only when vllm)
        self.serve_echo_logprobs = True  # OpenAI-style echo + logprobs on /v1/completions
        self.max_logprobs = 20  # vLLM's --max-logprobs default: more top logprobs are refused
        self.logit_noise = 0.0  # perturbs the pretend distribution (a "quantized" server)
        self.requests: list[dict[str, Any]] = []  # bodies of the generation requests received
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._counters: dict[str, float] = defaultdict(float)
        self._histograms: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # sum, count
        self._per_pos: dict[int, float] = defaultdict(float)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"app": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root(self) -> str:
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    # -- the pretend model -----------------------------------------------------------------------

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        if "messages" in body:
            text = " ".join(f"<|{m.get('role')}|> {m.get('content', '')}" for m in body["messages"])
            return words_to_ids(text + " <|assistant|>")
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):
            return [int(t) for t in prompt]
        return words_to_ids(str(prompt))

    def output_ids(self, prompt_ids: list[int], n: int, seed: int) -> list[int]:
        base = zlib.crc32(repr((prompt_ids[:8], seed)).encode())
        return [(base + 7919 * i) % VOCAB or 3 for i in range(n)]

    @staticmethod
    def token_text(token: int) -> str:
        return "" if token == EOS_ID else f" t{token}"

    #: tokens the pretend distribution ranks (the rest share a small uniform mass)
    RANKED = 64
    OTHER_MASS = 0.05

    def distribution(self, prefix: list[int]) -> tuple[list[tuple[int, float]], float]:
        """The pretend model's next-token distribution after ``prefix``: the ``RANKED`` most likely
        tokens with their log-probabilities (best first), and the log-probability of every other
        token (each the same). It depends on the last 4 tokens; ``logit_noise`` adds a deterministic
        perturbation of that size to the ranked tokens' logits."""
        h = zlib.crc32(repr(prefix[-4:]).encode())
        logits = {}
        for j in range(self.RANKED):
            token = (h + 104_729 * j) % VOCAB  # 104729 is prime, VOCAB = 2^8 * 5^3: all distinct
            noise = (zlib.crc32(f"{h}:{j}".encode()) % 1000 / 1000 - 0.5) * self.logit_noise
            logits[token] = -j / 8 + noise
        top = max(logits.values())
        z = sum(math.exp(v - top) for v in logits.values())
        ranked = sorted(
            ((t, math.log(1 - self.OTHER_MASS) + v - top - math.log(z)) for t, v in logits.items()),
            key=lambda item: -item[1],
        )
        return ranked, math.log(self.OTHER_MASS / (VOCAB - self.RANKED))

    def logprob_of(self, prefix: list[int], token: int) -> tuple[float, int]:
        """``token``'s log-probability after ``prefix`` and its rank (1 = most likely; every token
        outside the ranked ones shares rank ``RANKED + 1``)."""
        ranked, other = self.distribution(prefix)
        for rank, (t, lp) in enumerate(ranked, 1):
            if t == token:
                return lp, rank
        return other, self.RANKED + 1

    # -- metrics ---------------------------------------------------------------------------------

    def _record(self, **values: Any) -> None:
        with self._lock:
            for name, value in values.items():
                if name.endswith("_seconds"):
                    for v in value if isinstance(value, list) else [value]:
                        self._histograms[name][0] += v
                        self._histograms[name][1] += 1
                elif name == "per_pos":
                    for pos, v in value.items():
                        self._per_pos[pos] += v
                else:
                    self._counters[name] += value

    def metrics_text(self) -> str:
        label = f'engine="0",model_name="{self.model}"'
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {float(self.in_flight)}",
        ]
        with self._lock:
            for name, value in sorted(self._counters.items()):
                lines += [
                    f"# TYPE vllm:{name} counter",
                    f"vllm:{name}_total{{{label}}} {value}",
                    f"vllm:{name}_created{{{label}}} 1.7e9",
                ]
            for name, (total, count) in sorted(self._histograms.items()):
                lines += [
                    f"# TYPE vllm:{name} histogram",
                    f'vllm:{name}_bucket{{{label},le="0.1"}} {count}',
                    f'vllm:{name}_bucket{{{label},le="+Inf"}} {count}',
                    f"vllm:{name}_count{{{label}}} {count}",
                    f"vllm:{name}_sum{{{label}}} {total}",
                ]
            if self._per_pos:
                lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
                for pos, value in sorted(self._per_pos.items()):
                    lines.append(
                        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="{pos}"}} {value}'
                    )
        return "\n".join(lines) + "\n"


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog (5) drops the SYNs of many parallel streams, which then
    # retry a second later; uvicorn's is 2048.
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that hung up (a cancelled or failed trial) is not the server's problem


class _Handler(BaseHTTPRequestHandler):
    app: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # like uvicorn: small SSE chunks leave at once instead of waiting for the client's ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    # -- plumbing --------------------------------------------------------------------------------

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"message": message, "type": "BadRequestError", "code": status}})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _authorized(self) -> bool:
        key = self.app.require_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Invalid API key")
        return False

    def _chunk(self, payload: str) -> None:
        data = payload.encode()
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, payload: Any) -> None:
        self._chunk(f"data: {json.dumps(payload)}\n\n")

    # -- routes ----------------------------------------------------------------------------------

    def do_GET(self) -> None:
        app = self.app
        if not self._authorized():
            return
        if self.path == "/v1/models":
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": app.model,
                            "object": "model",
                            "owned_by": "vllm" if app.vllm else "fake",
                            "max_model_len": app.max_model_len,
                        }
                    ],
                },
            )
        elif self.path == "/version" and app.vllm:
            self._json(200, {"version": "0.0.0-fake"})
        elif self.path == "/metrics" and app.serve_metrics:
            self._text(200, app.metrics_text())
        else:
            self._error(404, f"Not Found: {self.path}")

    def do_POST(self) -> None:
        app = self.app
        try:
            body = self._body()
        except ValueError:
            self._error(400, "invalid JSON body")
            return
        if not self._authorized():
            return
        if self.path == "/tokenize" and app.serve_tokenize:
            ids = app.prompt_ids(body)
            self._json(200, {"count": len(ids), "max_model_len": app.max_model_len, "tokens": ids})
        elif self.path in ("/v1/completions", "/v1/chat/completions"):
            self._generate(body, chat=self.path.endswith("chat/completions"))
        else:
            self._error(404, f"Not Found: {self.path}")

    def _generate(self, body: dict[str, Any], *, chat: bool) -> None:
        app = self.app
        app.requests.append(body)
        if app.fail is not None:
            self._error(*app.fail)
            return
        if body.get("model") != app.model:
            self._error(404, f"The model `{body.get('model')}` does not exist.")
            return
        if not body.get("stream"):
            if chat:
                self._error(400, "this fake server only streams chat")
            else:
                self._complete(body)
            return
        t_arrival = time.perf_counter()
        prompt_ids = app.prompt_ids(body)
        max_tokens = int(body.get("max_tokens") or 16)
        if len(prompt_ids) + max_tokens > app.max_model_len:
            self._error(400, f"This model's maximum context length is {app.max_model_len} tokens.")
            return
        tokens = app.output_ids(prompt_ids, max_tokens, int(body.get("seed") or 0))
        finish = "length"
        if app.eos_after is not None and app.eos_after < max_tokens and not body.get("ignore_eos"):
            tokens = [*tokens[: app.eos_after], EOS_ID]
            finish = "stop"
        options = body.get("stream_options") or {}
        usage_wanted = bool(options.get("include_usage")) and app.honour_usage
        continuous = usage_wanted and bool(options.get("continuous_usage_stats")) and app.vllm
        with_ids = bool(body.get("return_token_ids")) and app.vllm

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with app._lock:
            app.in_flight += 1
            app.max_in_flight = max(app.max_in_flight, app.in_flight)
        try:
            self._stream(
                body, chat, prompt_ids, tokens, finish, usage_wanted, continuous, with_ids, t_arrival
            )
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a cancelled trial)
        finally:
            with app._lock:
                app.in_flight -= 1

    def _complete(self, body: dict[str, Any]) -> None:
        """A non-streamed completion: the tokens, and the prompt's logprobs where asked (vLLM's
        ``prompt_logprobs``, OpenAI's ``echo`` + ``logprobs``)."""
        app = self.app
        prompt_ids = app.prompt_ids(body)
        asked_tokens = body.get("max_tokens")
        max_tokens = 16 if asked_tokens is None else int(asked_tokens)
        if len(prompt_ids) + max_tokens > app.max_model_len:
            self._error(400, f"This model's maximum context length is {app.max_model_len} tokens.")
            return
        tokens = app.output_ids(prompt_ids, max_tokens, int(body.get("seed") or 0))
        for key, what in (("prompt_logprobs", "prompt"), ("logprobs", "sample")):
            asked = body.get(key)
            if isinstance(asked, int) and asked > app.max_logprobs:
                self._error(
                    400,
                    f"Requested {what} logprobs of {asked}, which is greater than max allowed: {app.max_logprobs}",
                )
                return
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(app.token_text(t) for t in tokens),
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
        }
        k = body.get("prompt_logprobs")
        if app.vllm and app.serve_prompt_logprobs and isinstance(k, int):
            rows: list[Any] = [None]
            for i in range(1, len(prompt_ids)):
                rows.append(self._position(prompt_ids[:i], prompt_ids[i], k))
            choice["prompt_logprobs"] = rows
        k = body.get("logprobs")
        if app.serve_echo_logprobs and body.get("echo") and isinstance(k, int):
            by_id = app.vllm and bool(body.get("return_tokens_as_token_ids"))
            name = (lambda t: f"token_id:{t}") if by_id else app.token_text
            sequence = [*prompt_ids, *tokens]
            given: list[float | None] = [None]
            top: list[dict[str, float] | None] = [None]
            for i in range(1, len(sequence)):
                ranked, _ = app.distribution(sequence[:i])
                given.append(app.logprob_of(sequence[:i], sequence[i])[0])
                top.append({name(t): lp for t, lp in ranked[:k]})
            offsets, at = [], 0
            for t in sequence:
                offsets.append(at)
                at += len(name(t))
            choice["text"] = "".join(name(t) for t in sequence)
            choice["logprobs"] = {
                "tokens": [name(t) for t in sequence],
                "token_logprobs": given,
                "top_logprobs": top,
                "text_offset": offsets,
            }
        done = len(tokens)
        self._json(
            200,
            {
                "id": "cmpl-fake",
                "object": "text_completion",
                "model": app.model,
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(prompt_ids),
                    "completion_tokens": done,
                    "total_tokens": len(prompt_ids) + done,
                },
            },
        )

    def _position(self, prefix: list[int], token: int, k: int) -> dict[str, dict[str, Any]]:
        """One entry of vLLM's ``prompt_logprobs``: the top-k and the given token, by id."""
        app = self.app
        ranked, _ = app.distribution(prefix)
        entry = {
            str(t): {"logprob": lp, "rank": rank, "decoded_token": app.token_text(t)}
            for rank, (t, lp) in enumerate(ranked[:k], 1)
        }
        lp, rank = app.logprob_of(prefix, token)
        entry.setdefault(str(token), {"logprob": lp, "rank": rank, "decoded_token": app.token_text(token)})
        return entry

    def _stream(
        self,
        body: dict[str, Any],
        chat: bool,
        prompt_ids: list[int],
        tokens: list[int],
        finish: str,
        usage_wanted: bool,
        continuous: bool,
        with_ids: bool,
        t_arrival: float,
    ) -> None:
        app = self.app
        kind = "chat.completion.chunk" if chat else "text_completion"

        def usage(done: int) -> dict[str, int]:
            return {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": done,
                "total_tokens": len(prompt_ids) + done,
            }

        def chunk(ids: list[int], done: int, finish_reason: str | None, role: bool = False) -> dict[str, Any]:
            text = "".join(app.token_text(t) for t in ids)
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason}
            if chat:
                choice["delta"] = {"role": "assistant", "content": ""} if role else {"content": text}
            else:
                choice["text"] = text
            if finish_reason == "stop":
                choice["stop_reason"] = None
            if with_ids and not role:
                choice["token_ids"] = ids
            payload: dict[str, Any] = {
                "id": "cmpl-fake",
                "object": kind,
                "model": app.model,
                "choices": [choice],
            }
            if continuous:
                payload["usage"] = usage(done)
            return payload

        if chat:
            self._event(chunk([], 0, None, role=True))
        deadline = t_arrival + (app.prefill_ms + app.prefill_ms_per_token * len(prompt_ids)) / 1000
        per_token = app.decode_ms_per_token / 1000
        sent = chunks = 0
        stream = _StreamCounts(speculative=app.tokens_per_chunk - 1)
        while sent < len(tokens):
            size = 1 if sent == 0 else app.tokens_per_chunk
            piece = tokens[sent : sent + size]
            if sent > 0:
                deadline += per_token * len(piece)
            if app.stall_after is not None and chunks >= app.stall_after:
                app._stop.wait(3600)  # hold the connection open, send nothing
                return
            if app.drop_after is not None and chunks >= app.drop_after:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            _sleep_until(deadline)
            sent += len(piece)
            now = stream.sent(piece, first=sent == len(piece))
            done = sent == len(tokens)
            if done:  # the server counts the request as finished before its last chunk leaves
                app._record(**stream.metrics(len(prompt_ids), len(tokens), t_arrival, now))
            self._event(chunk(piece, sent, finish if done else None))
            chunks += 1
        if usage_wanted:
            self._event(
                {"id": "cmpl-fake", "object": kind, "model": app.model, "choices": [], "usage": usage(sent)}
            )
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@dataclass
class _StreamCounts:
    """What one stream's chunks add up to, for the server's /metrics when the request finishes: the
    first chunk's time, the gaps between chunks, and (``speculative`` tokens drafted per chunk) the
    drafts and how many of their tokens each chunk accepted."""

    speculative: int
    first_at: float | None = None
    last_at: float | None = None
    gaps: list[float] = field(default_factory=list)
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: dict[int, float] = field(default_factory=lambda: defaultdict(float))

    def sent(self, piece: list[int], *, first: bool) -> float:
        """A chunk of ``piece`` tokens left now (returned: the time)."""
        if not first and self.speculative > 0:
            self.drafts += 1
            self.draft_tokens += self.speculative
            self.accepted += len(piece) - 1
            for pos in range(len(piece) - 1):
                self.per_pos[pos] += 1
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        elif self.last_at is not None:
            self.gaps.append(now - self.last_at)
        self.last_at = now
        return now

    def metrics(self, prompt_tokens: int, tokens: int, t_arrival: float, now: float) -> dict[str, Any]:
        """The finished request's figures, as :meth:`FakeOpenAIServer._record` takes them."""
        first_at = self.first_at if self.first_at is not None else now
        out: dict[str, Any] = {
            "request_success": 1,
            "prompt_tokens": prompt_tokens,
            "generation_tokens": tokens,
            "time_to_first_token_seconds": first_at - t_arrival,
            "inter_token_latency_seconds": self.gaps,
            "e2e_request_latency_seconds": now - t_arrival,
            "request_queue_time_seconds": 0.0,
            "request_prefill_time_seconds": first_at - t_arrival,
            "request_decode_time_seconds": now - first_at,
            "request_time_per_output_token_seconds": (now - first_at) / max(tokens - 1, 1),
        }
        if self.speculative > 0:
            out.update(
                spec_decode_num_drafts=self.drafts,
                spec_decode_num_draft_tokens=self.draft_tokens,
                spec_decode_num_accepted_tokens=self.accepted,
                per_pos=self.per_pos,
            )
        return out


def _sleep_until(deadline: float) -> None:
    # No spinning: with many parallel streams, spinning threads would fight over the GIL.
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)
