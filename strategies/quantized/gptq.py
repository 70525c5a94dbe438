"""GPTQ through GPTQModel: ``method = "gptq"`` of the ``quantized`` strategy.

Two ways in, one way out (the model GPTQModel loads with its best kernel for the device and dtype):

- **a GPTQ checkpoint** (a folder or hub id whose ``config.json`` carries a GPTQ
  ``quantization_config``, or that has GPTQModel's ``quantize_config.json``): loaded as it is;
  ``bits`` / ``group_size`` come from the checkpoint.
- **any other model** is *quantized on load*: GPTQ (``bits``, ``group_size``) with a calibration set
  cut from the built-in workload texts (:func:`calibration_set`), saved as a GPTQ checkpoint under
  the user cache (``<cache>/gptq/<model>-<bits>b-g<group>-<key>``) and loaded from there. The key
  hashes the model source's identity, the quantization parameters, the calibration token ids, the
  calibration dtype and device kind and the GPTQModel version, so calibration is paid once per
  combination. The checkpoint is written into a staging folder beside its final place and renamed
  at the end: an interrupted calibration (Ctrl-C, SIGTERM, SIGKILL, a crash) never leaves a
  half-written entry, and the next quantization removes staging folders whose process is gone.

Quantizing happens inside ``Strategy.load``, so it is part of the variant's ``load_ms`` and never of
a trial. Nothing here imports torch or GPTQModel at module level (``available()`` stays cheap).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.core.errors import one_line
from workbench.core.lifetime import pid_alive
from workbench.formatting import duration
from workbench.sources import staged
from workbench.strategy import ModelSourceError, StrategyError, error_context

if TYPE_CHECKING:
    from workbench.sources import ModelSource
    from workbench.strategy import Device, Variant

    from .._hf import HFModel

__all__ = [
    "CALIBRATION_WORKLOADS",
    "GPTQ_BITS",
    "GPTQ_INSTALL",
    "GPTQ_REQUIREMENTS",
    "GPTQLoad",
    "cache_entry",
    "calibration_set",
    "checkpoint_quantization",
    "gptq_unavailable_reason",
    "load_gptq",
]

#: bit widths offered. GPTQModel also has 2 and 3 bits; they are left out: on small models their
#: output is mostly noise, and 3-bit packing needs every layer's output size to be a multiple of 32.
GPTQ_BITS = (4, 8)

#: GPTQModel 7.7.0 declares torch >= 2.14.1, so CI (torch 2.13.0 CPU) installs it with --no-deps
#: plus what it really imports (``make gptq``, docs/quantized.md). import name -> distribution.
GPTQ_REQUIREMENTS = {
    "gptqmodel": "gptqmodel==7.7.0",
    "pcre": "pypcre==0.6.4",
    "logbar": "logbar==0.4.15",
    "threadpoolctl": "threadpoolctl==3.8.0",
    "device_smi": "device-smi==0.5.7",
    "tokenicer": "tokenicer==0.0.14",
    "defuser": "defuser==0.0.28",
    "PIL": "pillow>=11",
}
GPTQ_INSTALL = "pip install --no-deps " + " ".join(f"'{r}'" for r in GPTQ_REQUIREMENTS.values())

#: built-in workloads whose texts make the calibration set, in this order (round-robin)
CALIBRATION_WORKLOADS = ("chat", "code", "rag", "summarise")
#: tokens per calibration sample (longer prompts are cut into windows of this size)
CALIBRATION_WINDOW = 512
#: windows shorter than this are not used (a code prompt is ~40 tokens)
CALIBRATION_MIN_TOKENS = 16

_MANIFEST = "workbench-gptq.json"
_STAGING = ".staging-"


def gptq_unavailable_reason() -> str | None:
    """``None`` when GPTQModel and what it imports are installed; else what is missing and how to
    install it. Cheap: ``find_spec`` only."""
    if importlib.util.find_spec("gptqmodel") is None:
        return (
            f"GPTQModel is not installed (`make gptq`, i.e. {GPTQ_INSTALL}; on a GPU machine with "
            "torch >= 2.14.1: pip install gptqmodel; see docs/quantized.md)"
        )
    missing = [dist for name, dist in GPTQ_REQUIREMENTS.items() if importlib.util.find_spec(name) is None]
    if missing:
        return (
            "GPTQModel is installed without what it imports: "
            + ", ".join(missing)
            + " (pip install --no-deps "
            + " ".join(f"'{m}'" for m in missing)
            + ")"
        )
    return None


# --- what kind of checkpoint ------------------------------------------------------------------------


def checkpoint_quantization(folder: Path) -> dict[str, Any] | None:
    """The ``quantization_config`` of the checkpoint in ``folder`` (its ``config.json``, else
    GPTQModel's ``quantize_config.json``), or ``None`` for a float checkpoint."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    quant = config.get("quantization_config") if isinstance(config, dict) else None
    if isinstance(quant, dict) and quant:
        return quant
    try:
        quant = json.loads((folder / "quantize_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return quant if isinstance(quant, dict) and quant else None


def _quant_method(quant: dict[str, Any]) -> str:
    return str(quant.get("quant_method") or quant.get("method") or "unknown").lower()


# --- calibration ------------------------------------------------------------------------------------


def _token_ids(tokenizer: Any, prompt: Any) -> list[int]:
    """The prompt as the model sees it in a trial: the chat template applied to messages (or, for a
    tokenizer without one, the message contents joined by blank lines), raw text tokenized as is."""
    if prompt.messages is not None:
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(
                list(prompt.messages), add_generation_prompt=True, tokenize=False
            )
            return list(tokenizer(text, add_special_tokens=False)["input_ids"])
        text = "\n\n".join(m["content"] for m in prompt.messages)
        return list(tokenizer(text)["input_ids"])
    return list(tokenizer(prompt.prompt or "")["input_ids"])


def calibration_set(tokenizer: Any, samples: int, *, window: int = CALIBRATION_WINDOW) -> list[list[int]]:
    """``samples`` calibration sequences (token ids) drawn deterministically from the built-in
    workloads :data:`CALIBRATION_WORKLOADS`.

    Each prompt is tokenized as a trial would see it and cut into consecutive windows of
    ``window`` tokens; a window seen before is skipped (the chat workload resends its growing
    history, so its early turns would otherwise count six times) and so is a tail shorter than
    :data:`CALIBRATION_MIN_TOKENS`. The windows are then taken round-robin across the workloads
    (chat, code, rag, summarise, chat, ...), each workload's in file order, until ``samples`` are
    chosen or the texts run out. Same tokenizer, same ``samples`` -> same list, on every machine.
    """
    from workbench.spec.workloads import builtin_workload

    per_workload: list[list[list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    for name in CALIBRATION_WORKLOADS:
        windows = []
        for item in builtin_workload(name).items:
            ids = _token_ids(tokenizer, item.prompt)
            for start in range(0, len(ids), window):
                piece = ids[start : start + window]
                if len(piece) < CALIBRATION_MIN_TOKENS or tuple(piece) in seen:
                    continue
                seen.add(tuple(piece))
                windows.append(piece)
        per_workload.append(windows)
    chosen: list[list[int]] = []
    depth = 0
    while len(chosen) < samples and any(depth < len(w) for w in per_workload):
        for windows in per_workload:
            if depth < len(windows) and len(chosen) < samples:
                chosen.append(windows[depth])
        depth += 1
    return chosen


def calibration_digest(calibration: Sequence[Sequence[int]]) -> str:
    h = hashlib.sha256()
    for ids in calibration:
        h.update(json.dumps(list(ids), separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


# --- the cache --------------------------------------------------------------------------------------


def source_identity(source: ModelSource, folder: Path) -> str:
    """What makes a model source *these* weights: the demo model's checksum, a hub snapshot's
    commit, or a local folder's (GGUF file's) path with each weight and config file's size and mtime."""
    from workbench.sources import DEMO_MODELS

    if source.kind == "demo":
        demo = DEMO_MODELS[source.ref.split(":", 1)[1]]
        return f"demo:{demo.name}:sha256={demo.sha256}"
    if source.kind == "hub":
        return f"hub:{source.ref}@{folder.name}"  # snapshot folders are named by commit
    if source.kind == "gguf" and source.path is not None:
        stat = source.path.stat()
        return f"gguf:{source.path}|{stat.st_size}|{stat.st_mtime_ns}"
    files = []
    for path in sorted(folder.iterdir()):
        if path.suffix in (".safetensors", ".bin", ".json") and path.is_file():
            stat = path.stat()
            files.append(f"{path.name}|{stat.st_size}|{stat.st_mtime_ns}")
    return f"dir:{folder}|" + ";".join(files)


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    key: str
    fields: dict[str, Any]

    @property
    def complete(self) -> bool:
        return (self.path / _MANIFEST).is_file()


def gptq_cache_root() -> Path:
    from workbench.sources import cache_dir

    return cache_dir() / "gptq"


def cache_entry(
    *,
    identity: str,
    model_ref: str,
    bits: int,
    group_size: int,
    calibration: Sequence[Sequence[int]],
    calibration_dtype: str,
    device_type: str,
    gptqmodel_version: str,
) -> CacheEntry:
    """Where the quantized checkpoint for these inputs lives (whether or not it exists yet)."""
    fields = {
        "source": identity,
        "bits": bits,
        "group_size": group_size,
        "sym": True,
        "desc_act": False,
        "calibration_sha256": calibration_digest(calibration),
        "calibration_samples": len(calibration),
        "calibration_tokens": sum(len(ids) for ids in calibration),
        "calibration_dtype": calibration_dtype,
        "device_type": device_type,
        "gptqmodel": gptqmodel_version,
    }
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model_ref.rstrip("/\\")).name or model_ref).strip("-.")[:48]
    return CacheEntry(gptq_cache_root() / f"{slug or 'model'}-{bits}b-g{group_size}-{key}", key, fields)


def remove_stale_staging(root: Path) -> list[Path]:
    """Remove staging folders left by quantizations whose process is gone (SIGKILL, power loss)."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for path in root.iterdir():
        match = re.search(re.escape(_STAGING) + r"(\d+)-", path.name)
        if path.is_dir() and match and not pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def staging_dir(target: Path) -> contextlib.AbstractContextManager[Path]:
    """A fresh folder beside ``target``; renamed to ``target`` only when the block completes
    (:func:`workbench.sources.staged`).

    Any exception (KeyboardInterrupt, a GPTQModel error) removes the staging folder; a killed
    process leaves it behind under a name that is never an entry (removed later by
    :func:`remove_stale_staging`: the name holds the process id). If another process finished the
    same entry meanwhile, ours is discarded and theirs is kept."""
    return staged(
        target,
        directory=True,
        prefix=f"{target.name}{_STAGING}{os.getpid()}-",
        keep_if=lambda entry: (entry / _MANIFEST).is_file(),
    )


# --- loading ----------------------------------------------------------------------------------------


@dataclass
class GPTQLoad:
    """What :func:`load_gptq` did, for the session and the log."""

    hf: HFModel
    checkpoint: Path  # the GPTQ checkpoint loaded
    quantized_now: bool  # calibration ran in this load
    quantize_s: float | None  # seconds of calibration + saving (None: nothing was quantized)
    bits: int
    group_size: int
    kernels: tuple[str, ...]  # GPTQModel's quantized linear classes in the model
    layers: int


def _prepare_gptqmodel() -> Any:
    # GPTQModel 7.7 sizes its CPU thread pool as (cores + 1) // 2 workers, then asks for a 2-worker
    # model-loading pool inside it: on a 2-core machine that is 1 < 2 and GPTQModel.load raises
    # "Virtual pool 'model_loader:cpu' requests 2 workers but parent 'cpu' only has 1".
    if (os.cpu_count() or 1) < 4:
        os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")
    import gptqmodel

    return gptqmodel


def _local_folder(source: ModelSource, where: Any) -> Path:
    """The model as a local folder: demo / GGUF / folder sources already are; a hub id is fetched
    into (or found in) the Hugging Face cache."""
    if source.kind != "hub":
        return Path(where.location)
    from huggingface_hub import snapshot_download

    with error_context(f"cannot fetch model {source.ref!r}", ModelSourceError, detail=one_line):
        return Path(
            snapshot_download(
                source.ref,
                local_files_only=where.local_files_only,
                allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"],
            )
        )


def check_kernel(bits: int, group_size: int, device: Device, dtype: Any) -> None:
    """Fail before calibration when GPTQModel has no kernel for ``bits`` at ``dtype`` on ``device``
    (GPTQModel 7.7 on CPU: 4 bits runs float32/float16/bfloat16, 8 bits only float16/bfloat16)."""
    import torch
    from gptqmodel.utils.importer import select_quant_linear

    try:
        select_quant_linear(
            bits=bits,
            group_size=group_size,
            desc_act=False,
            sym=True,
            device=str(device),
            dtype=dtype,
            pack_dtype=torch.int32,
        )
    except Exception as exc:
        dtype_name = str(dtype).removeprefix("torch.")
        raise StrategyError(
            f"method 'gptq' with bits = {bits} cannot run here at dtype {dtype_name} on {device.type}: "
            f"GPTQModel has no kernel for it ({one_line(exc)})"
            + ('; try dtype = "bfloat16" or bits = 4' if dtype == torch.float32 else "")
        ) from None


def _quantize(
    folder: Path,
    entry: CacheEntry,
    calibration: list[list[int]],
    *,
    trust_remote_code: bool,
    device: Device,
    dtype: Any,
    log: Callable[[str], None],
) -> float:
    """Quantize the float model in ``folder`` into the cache entry; returns the seconds it took."""
    gptqmodel = _prepare_gptqmodel()
    from gptqmodel import GPTQModel, QuantizeConfig

    remove_stale_staging(entry.path.parent)
    t0 = time.perf_counter()
    log(
        f"gptq: quantizing {folder.name} to {entry.fields['bits']} bits, group {entry.fields['group_size']}, "
        f"with {len(calibration)} calibration samples ({entry.fields['calibration_tokens']} tokens); "
        f"once, cached in {entry.path}"
    )
    with staging_dir(entry.path) as staging:
        config = QuantizeConfig(
            bits=entry.fields["bits"],
            group_size=entry.fields["group_size"],
            sym=True,
            desc_act=False,
            offload_to_disk=False,  # no temporary files outside the staging folder
        )
        # GPTQModel 7.7 writes a per-quantization log to ./logs (relative to the working directory);
        # keep it inside the checkpoint instead of littering wherever `workbench` was started
        from gptqmodel.looper import loop_processor

        previous_logs = getattr(loop_processor, "_PROJECT_LOG_DIR", None)
        if previous_logs is not None:
            loop_processor._PROJECT_LOG_DIR = staging / "gptqmodel-logs"
        try:
            with error_context(
                f"method 'gptq': quantizing {folder.name} failed",
                StrategyError,
                passthrough=StrategyError,
                detail=one_line,
            ):
                model = GPTQModel.load(
                    str(folder), config, device=str(device), dtype=dtype, trust_remote_code=trust_remote_code
                )
                model.quantize(
                    [{"input_ids": ids, "attention_mask": [1] * len(ids)} for ids in calibration],
                    batch_size=1,
                )
                model.save(str(staging))
        finally:
            if previous_logs is not None:
                loop_processor._PROJECT_LOG_DIR = previous_logs
        seconds = time.perf_counter() - t0
        manifest = {
            **entry.fields,
            "key": entry.key,
            "quantize_s": round(seconds, 2),
            "torch": metadata.version("torch"),
            "gptqmodel_path": gptqmodel.__file__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        del model
        (staging / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"gptq: quantized in {duration(seconds, 1)}")
    return seconds


def load_gptq(
    variant: Variant,
    device: Device,
    *,
    bits: int,
    group_size: int,
    calibration_samples: int,
    log: Callable[[str], None] | None = None,
) -> GPTQLoad:
    """Load ``variant.model`` as a GPTQ model on ``device``, quantizing (and caching) it first when
    it is a float checkpoint."""
    reason = gptq_unavailable_reason()
    if reason is not None:
        raise StrategyError(f"method 'gptq' is not available here: {reason}")
    import torch
    from transformers import AutoTokenizer

    from workbench.sources import materialize, parse_source

    from .._hf import _log, resolve_dtype, wrap_hf_model

    log = log or _log
    source = parse_source(variant.model)
    folder = _local_folder(source, materialize(source, log=log))
    dtype = resolve_dtype(variant.dtype, device)
    common = {"trust_remote_code": variant.trust_remote_code}
    with error_context(
        f"cannot load the tokenizer of {variant.model!r}", ModelSourceError, catch=OSError, detail=one_line
    ):
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, **common)

    quant = checkpoint_quantization(folder)
    quantize_s: float | None = None
    if quant is not None:
        if _quant_method(quant) != "gptq":
            raise StrategyError(
                f"method 'gptq' needs a float or GPTQ checkpoint; {variant.model!r} is already quantized "
                f"with {_quant_method(quant)!r}"
            )
        checkpoint, quantized_now = folder, False
        bits, group_size = int(quant.get("bits", bits)), int(quant.get("group_size", group_size))
        log(f"gptq: {variant.model} is a GPTQ checkpoint ({bits} bits, group {group_size}); loading it as is")
    else:
        _prepare_gptqmodel()
        check_kernel(bits, group_size, device, dtype)  # before paying for calibration
        calibration = calibration_set(tokenizer, calibration_samples)
        if not calibration:
            raise StrategyError("method 'gptq': the built-in workloads gave no calibration text")
        # calibrate in float32 on CPU (bf16/fp16 matmuls are slow there), in the variant's dtype elsewhere
        calibration_dtype = torch.float32 if device.type == "cpu" else dtype
        entry = cache_entry(
            identity=source_identity(source, folder),
            model_ref=variant.model,
            bits=bits,
            group_size=group_size,
            calibration=calibration,
            calibration_dtype=str(calibration_dtype).removeprefix("torch."),
            device_type=device.type,
            gptqmodel_version=metadata.version("gptqmodel"),
        )
        quantized_now = not entry.complete
        if quantized_now:
            quantize_s = _quantize(
                folder,
                entry,
                calibration,
                trust_remote_code=variant.trust_remote_code,
                device=device,
                dtype=calibration_dtype,
                log=log,
            )
        else:
            log(f"gptq: using the cached quantized checkpoint {entry.path}")
        checkpoint = entry.path

    from gptqmodel import GPTQModel
    from gptqmodel.nn_modules.qlinear import BaseQuantLinear

    with error_context(
        f"method 'gptq': GPTQModel cannot load {checkpoint}",
        StrategyError,
        passthrough=StrategyError,
        detail=one_line,
    ):
        qmodel = GPTQModel.load(str(checkpoint), device=str(device), dtype=dtype, **common)
    model = qmodel.model
    quantized = [m for m in model.modules() if isinstance(m, BaseQuantLinear)]
    kernels = tuple(sorted({type(m).__name__ for m in quantized}))
    log(f"gptq: {len(quantized)} quantized layers, GPTQModel kernel {', '.join(kernels) or 'none'}")
    hf = wrap_hf_model(model, tokenizer, device, dtype)
    return GPTQLoad(
        hf=hf,
        checkpoint=checkpoint,
        quantized_now=quantized_now,
        quantize_s=quantize_s,
        bits=bits,
        group_size=group_size,
        kernels=kernels,
        layers=len(quantized),
    )


if __name__ == "__main__":  # pragma: no cover - a quick look at the calibration set
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(sys.argv[1])
    chosen = calibration_set(tok, int(sys.argv[2]) if len(sys.argv) > 2 else 10_000)
    print(len(chosen), "samples,", sum(map(len, chosen)), "tokens;", calibration_digest(chosen)[:16])
