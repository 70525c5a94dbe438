"""``llama-cpp``: llama.cpp in the worker process (llama-cpp-python), on a GGUF file.

The model is a ``.gguf`` file, the demo model's own GGUF (Q4_1, as shipped), or either of them
re-quantized once to ``gguf_type`` with llama.cpp's own ``llama_model_quantize`` and cached beside
the other converted models (``<cache>/models/llama-cpp/``). A transformers folder or hub id is
converted to GGUF first with llama.cpp's converter (:mod:`.gguf`).

Generation is the low-level loop, not the high-level completion call (which yields text in chunks):
``Llama.eval`` on the whole prompt (prefill, in ``n_batch`` slices), then one ``llama_sampler_sample``
and one ``Llama.eval`` of that token per step, so every token reaches the probe on its own. Greedy is
llama.cpp's greedy sampler; ``temperature > 0`` is a sampler chain temperature → top-k → top-p →
distribution seeded with the request's seed (the baseline's order, llama.cpp's random stream). EOS is
every end-of-generation token of the GGUF's vocabulary (``llama_vocab_is_eog``); ``ignore_eos`` and
stop strings behave as in the baseline (``strategies/_text.py``). Chat prompts use the chat template
stored in the GGUF (``tokenizer.chat_template``), rendered with jinja2 as transformers does.

``score`` (the quality pass, untimed) decodes the given tokens on the same context with the logits
flag set only on the positions it scores, and reads each row with ``llama_get_logits_ith``: the full
distribution, as ``llama-perplexity --kl-divergence`` sees it; the context is built as for timing
(no ``logits_all``) and its KV cache is cleared before and after.

``weights_mb`` is llama.cpp's ``llama_model_size`` (the tensors as stored: quantized blocks with their
scales); ``kv_bytes_per_token`` follows from the layers, KV heads, head size and ``kv_type`` (a
quantized cache stores blocks of 32 values with a scale, e.g. 34 bytes per 32 for q8_0).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from workbench.strategy import (
    ModelSourceError,
    Output,
    Probe,
    Prompt,
    Request,
    Session,
    Strategy,
    StrategyError,
    TokenScores,
    error_context,
)

from .._text import Stopper
from .config import GgufType, LlamaCppConfig

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

__all__ = [
    "GgufType",
    "LlamaCppConfig",
    "LlamaCppSession",
    "LlamaCppStrategy",
    "Placement",
    "check_gguf",
    "gpu_placement",
    "offload_backend",
    "parse_offload",
    "quantized_gguf",
    "source_gguf",
]

INSTALL = (
    "pip install 'llm-workbench[llama-cpp]' or `make llama-cpp`; it builds llama.cpp from source, "
    "~7 min on 2 cores once, CUDA flags in docs/runtimes.md"
)

#: bytes per element of a KV-cache type (ggml block size: quantized types hold 32 values + scales)
KV_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q5_1": 24 / 32, "q5_0": 22 / 32,
            "q4_1": 20 / 32, "q4_0": 18 / 32}  # fmt: skip

#: GGUF ``general.file_type`` numbers (``llama_ftype``) to names, for the record
_FTYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
                11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
                17: "Q5_K_M", 18: "Q6_K", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16"}  # fmt: skip


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the GGUF file ---------------------------------------------------------------------------------


def check_gguf(path: Path) -> None:
    """A file that does not start with the GGUF magic is refused before llama.cpp reads it."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelSourceError(f"cannot read {path}: {exc.strerror}") from None
    if magic != b"GGUF":
        raise ModelSourceError(f"{path} is not a GGUF file (it does not start with the GGUF magic bytes)")


def source_gguf(model: str, gguf_type: str = "as-is", *, log: Callable[[str], None] = _log) -> Path:
    """The GGUF file a model source stands for: the file itself, the demo model's shipped GGUF, or a
    transformers model converted to GGUF once with llama.cpp's converter (cached): in F32 or BF16
    when ``gguf_type`` asks for them, else F16, the usual start for quantizing."""
    from workbench.sources import ensure_demo_gguf, parse_source

    source = parse_source(model)
    if source.kind == "gguf":
        assert source.path is not None
        check_gguf(source.path)
        return source.path
    if source.kind == "demo":
        return ensure_demo_gguf(source.ref.split(":", 1)[1], log=log)
    from workbench.sources import local_folder

    from .gguf import hf_to_gguf

    outtype = {"F32": "f32", "BF16": "bf16"}.get(gguf_type, "f16")
    return hf_to_gguf(local_folder(source, log=log), outtype=outtype, log=log)


def quantized_gguf(
    source: Path, gguf_type: str, *, threads: int | None = None, log: Callable[[str], None] = _log
) -> Path:
    """``source`` re-quantized to ``gguf_type`` with llama.cpp's ``llama_model_quantize``, once: the
    result is cached by the source's path, size and mtime; written beside and renamed into place, so
    a failure leaves nothing half-written."""
    import llama_cpp

    from workbench.sources import cache_dir, cache_key, staged

    target = cache_dir() / "models" / "llama-cpp" / f"{source.stem}-{cache_key(source)}-{gguf_type}.gguf"
    if target.exists():
        return target
    ftype_name = "LLAMA_FTYPE_ALL_F32" if gguf_type == "F32" else f"LLAMA_FTYPE_MOSTLY_{gguf_type}"
    ftype = getattr(llama_cpp, ftype_name, None)
    if ftype is None:
        raise StrategyError(
            f"this llama-cpp-python ({llama_cpp.__version__}) does not know gguf_type {gguf_type!r}"
        )
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True  # a quantized source (the demo's Q4_1) is de-quantized first
    params.nthread = threads or 0
    log(f"quantizing {source.name} to {gguf_type} with llama.cpp (once; cached in {target})")
    with staged(target) as part:
        _silence_llama_log()
        rc = llama_cpp.llama_model_quantize(str(source).encode(), str(part).encode(), params)
        if rc != 0 or not part.exists():
            raise StrategyError(
                f"llama.cpp could not quantize {source.name} to {gguf_type} (llama_model_quantize returned {rc})"
            )
    return target


_LOG_CALLBACK: Any = None
#: the last "offloaded N/M layers to GPU" llama.cpp logged (the layers it really put on the GPU)
_OFFLOADED: list[tuple[int, int]] = []
_OFFLOAD_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def parse_offload(text: str) -> tuple[int, int] | None:
    """(layers offloaded, layers in all) from llama.cpp's load log line, else ``None``."""
    found = _OFFLOAD_RE.search(text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _silence_llama_log() -> None:
    """llama.cpp logs every tensor it loads or quantizes; route its log to nowhere (errors surface as
    return codes and exceptions) but for the line that says how many layers it offloaded. The
    callback is kept alive at module level (ctypes)."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None:
        return
    import llama_cpp

    @llama_cpp.llama_log_callback
    def _drop(level: int, text: bytes, user_data: Any) -> None:
        if b"offloaded" in text:
            found = parse_offload(text.decode("utf-8", errors="replace"))
            if found is not None:
                _OFFLOADED.append(found)
        return None

    _LOG_CALLBACK = _drop
    llama_cpp.llama_log_set(_LOG_CALLBACK, None)


# --- where it runs ---------------------------------------------------------------------------------

CUDA_BUILD = (
    'CMAKE_ARGS="-DGGML_CUDA=on" pip install --no-cache-dir --force-reinstall llama-cpp-python '
    "(needs the CUDA toolkit; docs/runtimes.md)"
)


@dataclass(frozen=True)
class Placement:
    """The ``Llama(...)`` arguments that decide where llama.cpp computes, and the record of it."""

    kwargs: dict[str, Any]
    backend: str


#: ggml backends that offload to a GPU but are not CUDA: their builds also answer
#: ``llama_supports_gpu_offload()``, and a ``cuda`` variant on one would be recorded ``cuda:N``
_OTHER_GPU_BACKENDS = ("Vulkan", "SYCL", "Metal", "HIP", "ROCm", "MUSA", "CANN", "OpenCL", "Kompute")


def _gpu_backends(llama_cpp: Any) -> str:
    """The ggml backends this build registered, as ``llama_print_system_info`` lists them
    (``CUDA : ARCHS = 900 | ... | CPU : AVX2 = 1 | ...``); "" when it cannot say."""
    info = getattr(llama_cpp, "llama_print_system_info", None)
    try:
        text = info() if info is not None else b""
    except Exception:
        return ""
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text or "")


def gpu_placement(
    llama_cpp: Any, device: Device, n_gpu_layers: int, *, flash_attn: bool | None = None
) -> Placement:
    """Where llama.cpp runs, decided here and recorded as ``backend``, never left to the build.

    A ``cuda`` variant needs a build with CUDA offload: a CPU-only build ignores ``n_gpu_layers`` and
    would run on the CPU while the trial says ``cuda:N``, so it is refused (one line: how to build it
    with CUDA); so is a GPU build whose backend is not CUDA (Vulkan, SYCL...: its system info names no
    CUDA backend), and ``n_gpu_layers = 0`` (nothing offloaded: a CPU run recorded as ``cuda``). The
    device index is ``main_gpu`` with ``split_mode`` none (the whole model on that GPU); the layers
    really offloaded are recorded after the load (:func:`offload_backend`).
    A ``cpu`` variant offloads nothing: no layers, and no *op offload* either (a GPU build otherwise
    moves large prefill batches to the GPU, and a "CPU" TTFT would be partly GPU time); a
    llama-cpp-python too old to switch op offload off is refused on a GPU build for the same reason.
    ``flash_attn`` unset is on for ``cuda`` (as torch's SDPA flash attention there), off on the CPU."""
    import inspect

    offload = bool(llama_cpp.llama_supports_gpu_offload())
    accepted = inspect.signature(llama_cpp.Llama.__init__).parameters
    flash = bool(flash_attn) if flash_attn is not None else device.type == "cuda"
    if device.type == "cuda":
        if not offload:
            raise StrategyError(
                f"device = {str(device)!r} but this llama-cpp-python ({llama_cpp.__version__}) is a CPU-only "
                f"build (no GPU offload: it would run on the CPU); build it with CUDA: {CUDA_BUILD}"
            )
        backends = _gpu_backends(llama_cpp)
        if not re.search(r"\bCUDA\b", backends):
            other = [b for b in _OTHER_GPU_BACKENDS if re.search(rf"\b{b}\b", backends)]
            what = (
                f"its GPU backend is {', '.join(other)}" if other else "its system info names no CUDA backend"
            )
            raise StrategyError(
                f"device = {str(device)!r} but this llama-cpp-python ({llama_cpp.__version__}) is not a CUDA "
                f"build ({what}); build it with CUDA: {CUDA_BUILD}"
            )
        if n_gpu_layers == 0:
            raise StrategyError(
                f"device = {str(device)!r} with n_gpu_layers = 0 offloads nothing: it would run on the CPU "
                'while recorded as cuda; use n_gpu_layers = -1 (all), or device = "cpu"'
            )
        index = device.index or 0
        kwargs: dict[str, Any] = {"n_gpu_layers": n_gpu_layers, "main_gpu": index, "flash_attn": flash}
        kwargs["split_mode"] = getattr(llama_cpp, "LLAMA_SPLIT_MODE_NONE", 0)
        layers = "all layers" if n_gpu_layers < 0 else f"{n_gpu_layers} layers"
        return Placement(kwargs, f"llama.cpp CUDA offload on cuda:{index} ({layers} asked)")
    kwargs = {"n_gpu_layers": 0, "flash_attn": flash}
    if offload:
        if "op_offload" not in accepted:
            raise StrategyError(
                f"this llama-cpp-python ({llama_cpp.__version__}) is a GPU build that cannot switch op "
                "offload off: a cpu variant's prefill would partly run on the GPU; use a newer "
                "llama-cpp-python, or a CPU-only build for cpu variants"
            )
        kwargs["op_offload"] = False
        return Placement(kwargs, "llama.cpp CPU (GPU build, no layer or op offload)")
    return Placement(kwargs, "llama.cpp CPU (CPU-only build)")


def offload_backend(index: int, *, requested: int, model_layers: int, logged: tuple[int, int] | None) -> str:
    """The ``backend`` of a ``cuda`` variant after its load: the layers llama.cpp says it offloaded
    (its log line), else as ``n_gpu_layers`` gives them (the repeating layers plus the output layer),
    a partial offload labelled as such (its TPOT is partly the CPU's)."""
    if logged is not None:
        done, total = logged
    else:
        total = model_layers + 1
        done = total if requested < 0 or requested >= total else requested
    text = f"llama.cpp CUDA offload on cuda:{index} ({done}/{total} layers"
    return text + (": partial, the rest on the CPU)" if done < total else ")")


# --- the session -----------------------------------------------------------------------------------


class LlamaCppSession(Session):
    def __init__(self, llm: Any, *, path: Path, kv_type: str) -> None:
        import llama_cpp

        self.llm = llm
        self.path = path
        model = llm.model
        self._ctx = llm.ctx
        vocab = llama_cpp.llama_model_get_vocab(model)
        self.eos_ids = frozenset(t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t))
        self.n_ctx = int(llm.n_ctx())
        self.context_length = self.n_ctx
        self.weights_mb = llama_cpp.llama_model_size(model) / 2**20
        file_type = llm.metadata.get("general.file_type")
        self.gguf_type = _FTYPE_NAMES.get(int(file_type), f"ftype {file_type}") if file_type else "unknown"
        self.dtype = self.gguf_type
        layers = int(llama_cpp.llama_model_n_layer(model))
        heads = int(llama_cpp.llama_model_n_head(model))
        kv_heads = int(llama_cpp.llama_model_n_head_kv(model))
        arch = llm.metadata.get("general.architecture", "")
        head_dim = int(
            llm.metadata.get(f"{arch}.attention.key_length") or llama_cpp.llama_model_n_embd(model) // heads
        )
        per_element = KV_BYTES[kv_type]
        shape: dict[str, int] = {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim}
        if per_element.is_integer():
            shape["bytes_per_element"] = int(per_element)
        self.model_shape = shape
        self.kv_bytes_per_token = 2 * layers * kv_heads * head_dim * per_element
        self.kv_type = kv_type
        self.chat_template = llm.metadata.get("tokenizer.chat_template")
        self._bos = self._token_text(llm.token_bos())
        self._eos = self._token_text(llm.token_eos())
        #: llama.cpp's own counters for the last generate (prompt eval / eval ms and tokens), beside
        #: the runner's clock (benchmarks/runtimes.py compares them)
        self.last_timings: dict[str, float] = {}

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def encode(self, prompt: Prompt) -> list[int]:
        if prompt.messages is not None:
            if not self.chat_template:
                raise StrategyError(
                    f"prompt {prompt.id!r} is a chat (messages) but this GGUF has no chat template "
                    '(tokenizer.chat_template); use plain {"prompt": ...} lines for base models'
                )
            text = self._render_chat(list(prompt.messages))
            return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        return list(self.llm.tokenize((prompt.prompt or "").encode("utf-8"), add_bos=True, special=True))

    def _render_chat(self, messages: list[dict[str, str]]) -> str:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        formatter = Jinja2ChatFormatter(
            template=self.chat_template, eos_token=self._eos, bos_token=self._bos, add_generation_prompt=True
        )
        return formatter(messages=cast(Any, messages)).prompt

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(token_ids), special=False).decode("utf-8", errors="replace")

    def _sampler(self, request: Request) -> Any:
        import llama_cpp

        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if request.temperature <= 0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
            return chain
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(request.temperature))
        if request.top_k > 0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(request.top_k))
        if request.top_p < 1.0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(request.top_p, 1))
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(request.seed & 0xFFFFFFFF))
        return chain

    def generate(self, request: Request, probe: Probe) -> Output:
        import llama_cpp

        needed = len(request.input_ids) + request.max_new_tokens
        if needed > self.n_ctx:
            raise StrategyError(
                f"prompt ({len(request.input_ids)} tokens) + max_new_tokens ({request.max_new_tokens}) "
                f"exceed the context llama.cpp allocated (n_ctx = {self.n_ctx}); raise n_ctx"
            )
        llm = self.llm
        stopper = Stopper(request, self.eos_ids, self.decode)
        sampler = self._sampler(request)
        tokens: list[int] = []
        reason: str | None = None
        try:
            llm.reset()
            llama_cpp.llama_perf_context_reset(self._ctx)
            llm.eval(list(request.input_ids))  # prefill
            while True:
                token = int(llama_cpp.llama_sampler_sample(sampler, self._ctx, -1))
                tokens.append(token)
                probe.step((token,))
                reason = stopper(tokens)
                if reason is not None:
                    break
                llm.eval([token])
        finally:
            llama_cpp.llama_sampler_free(sampler)
        perf = llama_cpp.llama_perf_context(self._ctx)
        self.last_timings = {
            "prompt_eval_ms": perf.t_p_eval_ms,
            "prompt_tokens": perf.n_p_eval,
            "eval_ms": perf.t_eval_ms,
            "eval_tokens": perf.n_eval,
        }
        return Output(token_ids=tokens, text=self.decode(tokens), finish_reason=reason)  # type: ignore[arg-type]

    def score(self, token_ids: Sequence[int], start: int) -> TokenScores:
        """Teacher forcing on the session's own context, untimed: the KV cache is cleared, the
        sequence but its last token is decoded in ``n_batch`` slices of one ``llama_batch`` whose
        logits flag is set only on the positions that predict ``token_ids[start:]`` (the context's
        own settings stay as they were: no ``logits_all``), each row read with
        ``llama_get_logits_ith``; the cache is cleared again, so the next ``generate`` starts as
        after any other (it clears from position 0 anyway)."""
        import llama_cpp
        import numpy as np

        ids = [int(t) for t in token_ids]
        if not 1 <= start < len(ids):
            raise ValueError(f"start {start} outside 1..{len(ids) - 1}")
        if len(ids) - 1 > self.n_ctx:
            raise StrategyError(
                f"the sequence to score ({len(ids)} tokens) is longer than the context llama.cpp "
                f"allocated (n_ctx = {self.n_ctx}); raise n_ctx"
            )
        llm, ctx = self.llm, self._ctx
        n_vocab = int(llm.n_vocab())
        n_batch = int(llama_cpp.llama_n_batch(ctx))
        decoded = ids[:-1]  # the last token predicts nothing that is scored
        rows = np.empty((len(ids) - start, n_vocab), dtype=np.float32)
        batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        memory = llama_cpp.llama_get_memory(ctx)
        try:
            llama_cpp.llama_memory_clear(memory, True)
            llm.reset()
            filled = 0
            for begin in range(0, len(decoded), n_batch):
                chunk = decoded[begin : begin + n_batch]
                wanted = []
                for j, token in enumerate(chunk):
                    pos = begin + j
                    batch.token[j] = token
                    batch.pos[j] = pos
                    batch.n_seq_id[j] = 1
                    batch.seq_id[j][0] = 0
                    batch.logits[j] = pos >= start - 1
                    if pos >= start - 1:
                        wanted.append(j)
                batch.n_tokens = len(chunk)
                rc = llama_cpp.llama_decode(ctx, batch)
                if rc != 0:
                    raise StrategyError(f"llama_decode returned {rc} while scoring")
                for j in wanted:
                    pointer = llama_cpp.llama_get_logits_ith(ctx, j)
                    rows[filled] = np.ctypeslib.as_array(pointer, shape=(n_vocab,))
                    filled += 1
            assert filled == len(rows)
        finally:
            llama_cpp.llama_batch_free(batch)
            llama_cpp.llama_memory_clear(memory, True)
            llm.reset()
        return TokenScores.from_logits(rows)

    def close(self) -> None:
        self.llm.close()


class LlamaCppStrategy(Strategy[LlamaCppConfig]):
    name = "llama-cpp"
    description = "llama.cpp in-process (llama-cpp-python) on a GGUF: as shipped or re-quantized (gguf_type)"
    Config = LlamaCppConfig

    def available(self) -> str | None:
        if importlib.util.find_spec("llama_cpp") is None:
            return f"needs llama-cpp-python: {INSTALL}"
        return None

    def preflight(self, variant: Variant[LlamaCppConfig]) -> None:
        from workbench.sources import parse_source

        if variant.dtype != "auto":
            raise StrategyError(
                f"dtype = {variant.dtype!r} does not apply to llama-cpp: the weights' precision is gguf_type "
                "(F32, F16, Q8_0, Q4_K_M...)"
            )
        source = parse_source(variant.model)
        if source.kind == "gguf":
            assert source.path is not None
            check_gguf(source.path)
        elif source.kind in ("dir", "hub"):
            from .gguf import converter_unavailable_reason

            reason = converter_unavailable_reason()
            if reason:
                raise StrategyError(f"model {variant.model!r} is not a GGUF and {reason}")

    def load(self, variant: Variant[LlamaCppConfig], device: Device) -> Session:
        import llama_cpp

        from workbench.sources import parse_source

        config = variant.config
        self.preflight(variant)
        _silence_llama_log()
        _OFFLOADED.clear()  # this load's log line, not an earlier model's
        path = source_gguf(variant.model, config.gguf_type)
        converted = parse_source(variant.model).kind in ("dir", "hub")
        if config.gguf_type != "as-is" and not (converted and path.stem.endswith(f"-{config.gguf_type}")):
            path = quantized_gguf(path, config.gguf_type, threads=variant.threads)
        placement = gpu_placement(llama_cpp, device, config.n_gpu_layers, flash_attn=config.flash_attn)
        kv = getattr(llama_cpp, f"GGML_TYPE_{config.kv_type.upper()}")
        with error_context(
            f"llama.cpp cannot load {path.name}",
            ModelSourceError,
            catch=(ValueError, RuntimeError),
            hint="a truncated or damaged GGUF, or an architecture this llama.cpp does not know",
        ):
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=config.n_ctx,
                n_batch=config.n_batch,
                n_ubatch=config.n_batch,
                n_threads=variant.threads,
                n_threads_batch=variant.threads,
                type_k=kv,
                type_v=kv,
                verbose=False,
                **placement.kwargs,
            )
        session = LlamaCppSession(llm, path=path, kv_type=config.kv_type)
        session.backend = placement.backend
        if device.type == "cuda":
            session.backend = offload_backend(
                device.index or 0,
                requested=config.n_gpu_layers,
                model_layers=int(llama_cpp.llama_model_n_layer(llm.model)),
                logged=_OFFLOADED[-1] if _OFFLOADED else None,
            )
        return session
