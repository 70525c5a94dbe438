"""``onnxruntime-genai``: ONNX Runtime GenAI in the worker process, on a model its builder made.

The model is either an ONNX Runtime GenAI folder (``genai_config.json`` + ``model.onnx``), used as it
is, or any model source (the demo model, a transformers folder, a cached hub id) built once with the
library's model builder, ``python -m onnxruntime_genai.models.builder``, at ``precision`` for the
execution provider of the variant's device (``cpu`` or ``cuda``), and cached under
``<cache>/models/ort-genai/`` (built beside, renamed into place: a failed build leaves nothing).

Tokens come one at a time from ``Generator.generate_next_token()`` and go to the probe one by one.
Greedy is the builder's ``do_sample = false``; ``temperature > 0`` samples with ONNX Runtime GenAI's
own sampler (``temperature``, ``top_k`` — the whole vocabulary when the request has none — and
``top_p``, seeded with the request's seed). ``ignore_eos`` sets ``min_length`` to the full budget, so
the library masks EOS until then (as ``generate(min_new_tokens=...)`` does in transformers: after a
first EOS the output differs from the baseline's, which carries on past it). Prompts are tokenized
with the model folder's tokenizer through transformers, exactly as the baseline tokenizes them.

``weights_mb`` is the size of the ONNX weights as stored (``*.onnx`` + external data, int4 blocks with
their scales); ``kv_bytes_per_token`` comes from the layers, KV heads and head size in
``genai_config.json`` and the KV element type of the graph's ``past_key_values`` inputs.

``score`` (the quality pass, untimed) runs the given tokens through a generator of its own in one
``append_tokens`` and reads the graph's logits for every position (``get_output("logits")``): the
full distribution at each scored position.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from workbench.core.errors import first_line
from workbench.sources import cache_dir, cache_key, local_folder, staged
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
    field_help,
)

from ._text import Stopper, encode_prompt

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

INSTALL = "pip install 'llm-workbench[engine,ort-genai]' (or `make ort-genai`)"
_DONE = ".workbench-built"
#: ONNX tensor element types of a KV cache, in bytes
_ELEMENT_BYTES = {1: 4, 10: 2, 16: 2}  # float, float16, bfloat16


@dataclass
class OrtGenAIConfig:
    precision: Literal["int4", "int8", "fp16", "bf16", "fp32"] = field_help(
        "weights the model builder writes (int4/int8: MatMulNBits, block-wise; on a cpu the activations "
        "and KV cache stay fp32); ignored for a model that is already an ONNX Runtime GenAI folder",
        default="int4",
    )
    int4_block_size: Literal[16, 32, 64, 128, 256] = field_help(
        "int4/int8: weights per scale block (the builder's int4_block_size)", default=32
    )


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def is_genai_folder(path: Path) -> bool:
    return (path / "genai_config.json").is_file()


#: the distributions that install the ``onnxruntime_genai`` module (one of them, per environment)
GENAI_DISTRIBUTIONS = ("onnxruntime-genai", "onnxruntime-genai-cuda", "onnxruntime-genai-directml")


def genai_version() -> str:
    """The installed ONNX Runtime GenAI's version, whichever distribution installed it (a GPU user
    has ``onnxruntime-genai-cuda``, not ``onnxruntime-genai``); the module's own ``__version__`` else."""
    for dist in GENAI_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    import onnxruntime_genai as og

    return str(getattr(og, "__version__", "unknown"))


def build_model(
    source_folder: Path, precision: str, provider: str, block_size: int, *, log: Callable[[str], None] = _log
) -> Path:
    """``source_folder`` (a transformers model) built with ONNX Runtime GenAI's model builder, once."""
    version = genai_version()
    key = cache_key(source_folder, precision, provider, str(block_size), version)
    target = cache_dir() / "models" / "ort-genai" / f"{source_folder.name}-{key}-{precision}-{provider}"
    if (target / _DONE).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log(
        f"building {source_folder.name} for ONNX Runtime GenAI ({precision}, {provider}; once; cached in {target})"
    )
    with staged(target, directory=True) as staging:
        with tempfile.TemporaryDirectory(prefix="ort-builder-cache-", dir=target.parent) as scratch:
            command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(source_folder),
                       "-o", str(staging), "-p", precision, "-e", provider, "-c", scratch,
                       "--extra_options", f"int4_block_size={block_size}"]  # fmt: skip
            logfile = Path(scratch) / "builder.log"
            with open(logfile, "w") as out:
                proc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
            if proc.returncode != 0 or not is_genai_folder(staging):
                raise ModelSourceError(
                    f"the ONNX Runtime GenAI model builder could not build {source_folder.name} "
                    f"({precision}, {provider}): {_last_error(logfile)}"
                )
        built = {
            "source": str(source_folder),
            "precision": precision,
            "provider": provider,
            "onnxruntime_genai": version,
        }
        (staging / _DONE).write_text(json.dumps(built) + "\n")
    return target


def built_precision(folder: Path) -> str | None:
    """The precision a folder was built at by :func:`build_model`; ``None`` for one made elsewhere."""
    try:
        return str(json.loads((folder / _DONE).read_text())["precision"])
    except (OSError, ValueError, KeyError):
        return None


def _last_error(logfile: Path) -> str:
    lines = [ln.strip() for ln in logfile.read_text(errors="replace").splitlines() if ln.strip()]
    for line in reversed(lines):  # the exception's own line, not the traceback's last frame
        if "Error" in line.split(":", 1)[0] or line.startswith(("NotImplementedError", "ValueError")):
            return line
    return lines[-1] if lines else "no output"


def builder_architectures() -> frozenset[str]:
    """The architectures (``config.json``'s ``architectures[0]``) the installed ONNX Runtime GenAI
    model builder dispatches on, read from its source without importing it (the import is slow);
    empty when the source cannot be read or its dispatch changed shape (then nothing is refused
    before the builder runs)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("onnxruntime_genai")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    source = Path(next(iter(spec.submodule_search_locations))) / "models" / "builder.py"
    try:
        text = source.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(re.findall(r'config\.architectures\[0\] == "(\w+)"', text))


def check_architecture(folder: Path) -> None:
    """Refuse in one line a transformers model whose architecture the builder does not take (GPT-2 and
    other families it has no graph for), before spending a build on it."""
    known = builder_architectures()
    try:
        architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError):
        return
    if not known or not architectures or architectures[0] in known:
        return
    raise StrategyError(
        f"the ONNX Runtime GenAI model builder has no graph for {architectures[0]} "
        f"({folder.name}); it builds {len(known)} architectures, e.g. LlamaForCausalLM, Qwen3ForCausalLM, "
        "Gemma3ForCausalLM, Phi3ForCausalLM, MistralForCausalLM"
    )


def model_folder(
    variant: Variant, config: OrtGenAIConfig, provider: str, *, log: Callable[[str], None] = _log
) -> Path:
    from workbench.sources import parse_source

    source = parse_source(variant.model)
    if source.kind == "dir" and source.path is not None and is_genai_folder(source.path):
        return source.path
    if source.kind == "gguf":
        raise StrategyError(
            f"model {variant.model!r} is a GGUF; the ONNX Runtime GenAI builder reads transformers models "
            "(give a folder or the demo model; GGUF files are the llama-cpp strategy's)"
        )
    folder = local_folder(source, log=log)
    check_architecture(folder)
    return build_model(folder, config.precision, provider, config.int4_block_size, log=log)


def kv_element_bytes(folder: Path, genai: dict[str, Any]) -> int | None:
    """Bytes per element of the KV cache: the type of the graph's first past-key input."""
    decoder = genai["model"]["decoder"]
    name = decoder.get("inputs", {}).get("past_key_names", "past_key_values.%d.key") % 0
    try:
        import onnx
    except ImportError:
        return None
    graph = onnx.load(str(folder / decoder["filename"]), load_external_data=False).graph
    for value in graph.input:
        if value.name == name:
            return _ELEMENT_BYTES.get(value.type.tensor_type.elem_type)
    return None


def configure_provider(config: Any, provider: str, device_id: int) -> None:
    """The execution provider of the variant's device on an ``og.Config``: only that one (the
    folder's ``genai_config.json`` may name another), and on CUDA the device the variant names
    (``cuda:N`` -> ``device_id`` N; without it ONNX Runtime takes device 0)."""
    config.clear_providers()
    if provider != "cpu":
        config.append_provider(provider)
        config.set_provider_option(provider, "device_id", str(device_id))


class OrtGenAISession(Session):
    def __init__(
        self, folder: Path, provider: str, threads: int | None, precision: str | None, device_id: int = 0
    ) -> None:
        import onnxruntime_genai as og
        from transformers import AutoTokenizer

        self.folder = folder
        self.provider = provider
        genai = json.loads((folder / "genai_config.json").read_text())
        config = og.Config(str(folder))
        configure_provider(config, provider, device_id)
        self.backend = (
            f"ONNX Runtime GenAI, {provider} execution provider (device_id {device_id})"
            if provider != "cpu"
            else "ONNX Runtime GenAI, CPU execution provider"
        )
        if threads:
            config.overlay(
                json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}})
            )
        self.model = og.Model(config)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        eos = genai["model"].get("eos_token_id")
        self.eos_ids = frozenset(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.vocab_size = int(genai["model"].get("vocab_size") or len(self.tokenizer))
        self.context_length = int(genai["model"].get("context_length") or 0) or None
        decoder = genai["model"]["decoder"]
        files = [folder / decoder["filename"], *folder.glob("*.onnx.data"), *folder.glob("*.onnx_data")]
        self.weights_mb = sum(p.stat().st_size for p in files if p.exists()) / 2**20
        element = kv_element_bytes(folder, genai)
        shape = {
            "layers": int(decoder["num_hidden_layers"]),
            "kv_heads": int(decoder["num_key_value_heads"]),
            "head_dim": int(decoder["head_size"]),
        }
        if element:
            shape["bytes_per_element"] = element
            self.kv_bytes_per_token = float(
                2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * element
            )
        self.model_shape = shape
        self.dtype = precision or "onnx"  # None: a folder given as it is

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def generate(self, request: Request, probe: Probe) -> Output:
        import numpy as np
        import onnxruntime_genai as og

        total = len(request.input_ids) + request.max_new_tokens
        if self.context_length and total > self.context_length:
            raise StrategyError(
                f"prompt ({len(request.input_ids)} tokens) + max_new_tokens ({request.max_new_tokens}) exceed "
                f"the model's context ({self.context_length})"
            )
        options: dict[str, Any] = {"max_length": total, "batch_size": 1}
        if request.temperature <= 0:
            options["do_sample"] = False
        else:
            options.update(
                do_sample=True,
                temperature=request.temperature,
                top_k=request.top_k or self.vocab_size,
                top_p=request.top_p,
                random_seed=request.seed & 0x7FFFFFFF,
            )
        if request.ignore_eos:
            options["min_length"] = total
        params = og.GeneratorParams(self.model)
        params.set_search_options(**options)
        generator = og.Generator(self.model, params)
        stopper = Stopper(request, self.eos_ids, self.decode)
        tokens: list[int] = []
        reason: str | None = None
        try:
            generator.append_tokens(np.asarray(request.input_ids, dtype=np.int32))  # prefill
            while reason is None:
                generator.generate_next_token()
                token = int(generator.get_next_tokens()[0])
                tokens.append(token)
                probe.step((token,))
                reason = stopper(tokens)
                if reason is None and generator.is_done():
                    reason = "eos" if token in self.eos_ids else "length"
        finally:
            del generator
        return Output(token_ids=tokens, text=self.decode(tokens), finish_reason=reason)  # type: ignore[arg-type]

    def score(self, token_ids: Sequence[int], start: int) -> TokenScores:
        """A generator of its own (the timed ones are made per request anyway): the sequence but its
        last token appended in one ``append_tokens``, whose ``get_output("logits")`` holds the
        graph's logits for every appended position (``[1, n, vocab]``); the rows that predict
        ``token_ids[start:]``."""
        import numpy as np
        import onnxruntime_genai as og

        ids = [int(t) for t in token_ids]
        if not 1 <= start < len(ids):
            raise ValueError(f"start {start} outside 1..{len(ids) - 1}")
        if self.context_length and len(ids) > self.context_length:
            raise StrategyError(
                f"the sequence to score ({len(ids)} tokens) is longer than the model's context "
                f"({self.context_length})"
            )
        params = og.GeneratorParams(self.model)
        params.set_search_options(max_length=len(ids), batch_size=1, do_sample=False)
        generator = og.Generator(self.model, params)
        try:
            generator.append_tokens(np.asarray(ids[:-1], dtype=np.int32))
            logits = np.asarray(generator.get_output("logits"), dtype=np.float32)
        finally:
            del generator
        if logits.ndim != 3 or logits.shape[1] != len(ids) - 1:
            raise StrategyError(
                f"the model's logits output has shape {list(logits.shape)}, not one row per "
                f"position ({len(ids) - 1})"
            )
        return TokenScores.from_logits(logits[0, start - 1 :])

    def close(self) -> None:
        del self.model


class OrtGenAIStrategy(Strategy[OrtGenAIConfig]):
    name = "onnxruntime-genai"
    description = (
        "ONNX Runtime GenAI in-process: a model built once by its model builder (int4/int8/fp16/fp32)"
    )
    Config = OrtGenAIConfig

    def available(self) -> str | None:
        missing = [m for m in ("onnxruntime_genai", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            return f"needs {' and '.join(m.replace('_', '-') for m in missing)} ({INSTALL})"
        return None

    def preflight(self, variant: Variant[OrtGenAIConfig]) -> None:
        from workbench.sources import parse_source

        if variant.dtype != "auto":
            raise StrategyError(
                f"dtype = {variant.dtype!r} does not apply to onnxruntime-genai: the weights' precision is "
                "`precision` (int4, int8, fp16, bf16, fp32)"
            )
        source = parse_source(variant.model)
        if source.kind == "gguf":
            raise StrategyError(
                f"model {variant.model!r} is a GGUF; the ONNX Runtime GenAI builder reads transformers models "
                "(GGUF files are the llama-cpp strategy's)"
            )
        if not (source.kind == "dir" and source.path is not None and is_genai_folder(source.path)):
            missing = [m for m in ("torch", "onnx", "onnx_ir") if importlib.util.find_spec(m) is None]
            if missing:
                raise StrategyError(
                    f"building {variant.model!r} with the ONNX Runtime GenAI model builder needs "
                    f"{' and '.join(m.replace('_', '-') for m in missing)} ({INSTALL})"
                )

    def load(self, variant: Variant[OrtGenAIConfig], device: Device) -> Session:
        if device.type not in ("cpu", "cuda"):
            raise StrategyError(f"onnxruntime-genai runs on cpu or cuda here, not on {device.type}")
        self.preflight(variant)
        config = variant.config
        folder = model_folder(variant, config, device.type)
        precision = built_precision(folder)
        with error_context(
            f"ONNX Runtime GenAI cannot load {folder}",
            ModelSourceError,
            passthrough=(StrategyError, ModelSourceError),
            detail=first_line,
        ):
            return OrtGenAISession(folder, device.type, variant.threads, precision, device.index or 0)
