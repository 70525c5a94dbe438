"""The experiment spec: TOML in, validated dataclasses out, with precise one-line errors.

The format is in ``docs/spec.md``. Every problem names its place: the TOML
line and column, the variant and key, or the JSONL file and line.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import shutil
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

from workbench.core import registry
from workbench.core.config import COMMON_VARIANT_KEYS, build_config, model_source_fields
from workbench.core.device import check_device_name
from workbench.core.errors import ModelSourceError, SpecError, StrategyError, error_context
from workbench.core.literals import TrialOrder, Workers
from workbench.core.variant import COMPILE_MODES, DTYPES, Variant
from workbench.formatting import count
from workbench.sources import parse_source
from workbench.spec.targets import Targets, parse_targets
from workbench.spec.workloads import (
    HISTORIES,
    MAX_INTEGER,
    Workload,
    as_chat,
    builtin_names,
    builtin_targets,
    builtin_workload,
    conversation_items,
    inline_items,
    load_conversations,
    load_jsonl,
    sweep_input_items,
    sweep_output_items,
    with_max_new_tokens,
)

__all__ = [
    "AUTO_MAX_REPETITIONS",
    "AUTO_MIN_REPETITIONS",
    "DTYPES",
    "INT_RANGE",
    "MAX_PLANNED_TRIALS",
    "ORDERS",
    "WORKERS",
    "Spec",
    "duration_s",
    "load_spec",
    "parse_spec",
    "recorded_auto_repetitions",
    "recorded_spec",
    "recorded_targets",
    "self_comparison",
    "spec_from_dict",
    "variant_from_dict",
    "without_variants",
]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: trial orders (docs/analysis.md "How trials are ordered")
ORDERS: tuple[TrialOrder, ...] = get_args(TrialOrder)
#: worker processes (docs/analysis.md "Processes"): fresh ones for every repetition, or one for the run
WORKERS: tuple[Workers, ...] = get_args(Workers)
#: ``repetitions = "auto"``: the fewest repetitions before the CIs are looked at, and the default cap
AUTO_MIN_REPETITIONS = 3
AUTO_MAX_REPETITIONS = 20
#: the whole numbers a spec may hold: SQLite's INTEGER (a signed 64-bit integer), where they are stored
INT_RANGE = (-MAX_INTEGER - 1, MAX_INTEGER)
#: the most trials one run may plan (variants × (warm-ups + repetitions × prompts)): each is held in
#: memory and sent to its worker, so a mistyped count is refused instead of filling the memory
MAX_PLANNED_TRIALS = 1_000_000

_TOP_KEYS = {
    "name",
    "description",
    "repetitions",
    "warmup",
    "warmup_max_new_tokens",
    "seed",
    "order",
    "workers",
    "max_repetitions",
    "ci_target",
    "budget",
    "baseline",
    "variants",
    "workloads",
    "temperature",
    "top_p",
    "top_k",
    "quality",
    "quality_text",
    "quality_ctx",
}
_VARIANT_KEYS = COMMON_VARIANT_KEYS  # the keys every variant has; everything else is a strategy parameter
_WORKLOAD_KEYS = {
    "name",
    "kind",
    "history",
    "file",
    "description",
    "max_new_tokens",
    "ignore_eos",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "limit",
    "as_chat",
    "input_tokens",
    "output_tokens",
    "prompts",
    "targets",
    "variants",
}


@dataclass(frozen=True)
class Spec:
    name: str
    variants: tuple[Variant, ...]
    workloads: tuple[Workload, ...]
    repetitions: int = 3
    warmup: int = 1
    #: cap on the tokens a warm-up trial generates (None: the workload's own max_new_tokens)
    warmup_max_new_tokens: int | None = None
    seed: int = 0
    #: how trials of different variants are ordered in time (:data:`ORDERS`): ``interleaved`` (every
    #: variant loaded at once, round by round), ``blocks`` (one variant loaded at a time, A B B A over
    #: passes of repetitions) or ``sequential`` (each variant's trials in one go, as before)
    order: TrialOrder = "interleaved"
    #: ``per-repetition``: interleaved runs start every variant's workers afresh (load, warm-ups) for
    #: each repetition, so its trials come from several processes and the paired CIs see how much two
    #: processes of one variant differ; ``one``: one worker per variant for the whole run
    workers: Workers = "per-repetition"
    #: ``repetitions = "auto"``: add rounds (at least :data:`AUTO_MIN_REPETITIONS`, at most
    #: ``repetitions``) until every paired speed-up CI is within ±``ci_target``
    auto_repetitions: bool = False
    ci_target: float = 0.03
    #: ``repetitions = "auto"``: the run's time budget in seconds (``budget = "5m"``): no repetition is
    #: started that would end after it; None: no budget (``max_repetitions`` alone caps the run)
    budget_s: float | None = None
    #: the quality pass after the timed trials (docs/metrics.md "Quality"): True, False, or None = on
    #: when the run has a baseline and a variant that is not lossless by construction
    quality: bool | None = None
    #: a UTF-8 text the quality pass also scores, in chunks of ``quality_ctx`` tokens (the second half
    #: of each chunk), for a perplexity on held-out text
    quality_text: Path | None = None
    #: the context the quality pass scores in: the corpus' chunk length; a prompt + output longer than
    #: it keeps the prompt's last tokens (at least half of it)
    quality_ctx: int = 512
    baseline: str | None = None
    description: str = ""
    #: the TOML text as written, stored with the run
    text: str = ""
    path: Path | None = None

    @property
    def baseline_variant(self) -> str:
        """The variant speed-ups are measured against: ``baseline`` if set, else one named
        "baseline", else the first."""
        if self.baseline:
            return self.baseline
        names = [v.name for v in self.variants]
        return "baseline" if "baseline" in names else names[0]


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM is tolerated, as in JSONL files
    except FileNotFoundError:
        raise SpecError(f"spec file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read spec file {path}: {exc}") from None
    return parse_spec(text, base_dir=path.parent, path=path)


def parse_spec(text: str, *, base_dir: str | Path = ".", path: Path | None = None) -> Spec:
    where = str(path) if path else "spec"
    text = text.removeprefix("\ufeff")  # a BOM (some Windows editors write one)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # the message carries "(at line L, column C)"
        raise SpecError(f"{where}: invalid TOML: {exc}") from None
    return spec_from_dict(data, base_dir=Path(base_dir), text=text, path=path)


def spec_from_dict(
    data: dict[str, Any], *, base_dir: Path = Path("."), text: str = "", path: Path | None = None
) -> Spec:
    _check_keys(data, _TOP_KEYS, "spec")
    _check_numbers(data)
    name = _get(data, "name", str, "spec", default=path.stem if path else "experiment")
    if not name.strip():
        raise SpecError("spec: 'name' must not be empty (leave it out to name the run after the file)")
    repetitions, auto_repetitions = _repetitions(data)
    warmup = _get(data, "warmup", int, "spec", default=1)
    order = cast(TrialOrder, _get(data, "order", str, "spec", default="interleaved"))
    if order not in ORDERS:
        raise SpecError(f"spec: 'order' must be one of {', '.join(ORDERS)}, got {order!r}")
    if auto_repetitions and order == "sequential":
        raise SpecError(
            'spec: repetitions = "auto" needs order = "interleaved" or "blocks" (sequential runs each '
            "variant's repetitions in one go, so no round can be added to all of them)"
        )
    workers = cast(Workers, _get(data, "workers", str, "spec", default="per-repetition"))
    if workers not in WORKERS:
        raise SpecError(f"spec: 'workers' must be one of {', '.join(WORKERS)}, got {workers!r}")
    if "ci_target" in data and not auto_repetitions:
        raise SpecError("spec: 'ci_target' applies to repetitions = \"auto\"")
    ci_target = _get(data, "ci_target", float, "spec", default=0.03)
    if not 0 < ci_target < 1:
        raise SpecError(f"spec: 'ci_target' is a fraction, e.g. 0.03 for ±3 %, got {ci_target!r}")
    if "budget" in data and not auto_repetitions:
        raise SpecError("spec: 'budget' applies to repetitions = \"auto\"")
    budget_s = duration_s(data["budget"], "spec: 'budget'") if "budget" in data else None
    if warmup < 0:
        raise SpecError("spec: 'warmup' must be 0 or more")
    warmup_tokens = _get(data, "warmup_max_new_tokens", int, "spec", default=None)
    if warmup_tokens is not None and warmup_tokens < 1:
        raise SpecError("spec: 'warmup_max_new_tokens' must be at least 1")
    raw_variants = data.get("variants")
    if not isinstance(raw_variants, list) or not raw_variants:
        raise SpecError("spec: needs at least one [[variants]] table")
    variants = tuple(
        variant
        for i, raw in enumerate(raw_variants)
        for variant in (_variant(v, i, base_dir) for v in _expand_sweep(raw, i))
    )
    names = [v.name for v in variants]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise SpecError(f"spec: variant name {sorted(duplicates)[0]!r} is used twice")
    defaults = {
        "temperature": _get(data, "temperature", float, "spec", default=0.0),
        "top_p": _get(data, "top_p", float, "spec", default=1.0),
        "top_k": _get(data, "top_k", int, "spec", default=0),
    }
    raw_workloads = data.get("workloads")
    if not isinstance(raw_workloads, list) or not raw_workloads:
        raise SpecError('spec: needs at least one [[workloads]] table (e.g. name = "chat")')
    workloads = tuple(_workload(w, i, base_dir, defaults) for i, w in enumerate(raw_workloads))
    wnames = [w.name for w in workloads]
    duplicates = {n for n in wnames if wnames.count(n) > 1}
    if duplicates:
        raise SpecError(f"spec: workload name {sorted(duplicates)[0]!r} is used twice")
    quality = _get(data, "quality", bool, "spec", default=None)
    quality_text, quality_ctx = _quality_text(data, base_dir)
    baseline = _get(data, "baseline", str, "spec", default=None)
    if baseline is not None and baseline not in names:
        raise SpecError(f"spec: baseline {baseline!r} is not a variant; variants: {', '.join(names)}")
    _check_plan_size(len(variants), warmup, repetitions, workloads)
    spec = Spec(
        name=name,
        description=_get(data, "description", str, "spec", default=""),
        variants=variants,
        workloads=workloads,
        repetitions=repetitions,
        warmup=warmup,
        warmup_max_new_tokens=warmup_tokens,
        seed=_get(data, "seed", int, "spec", default=0),
        order=order,
        workers=workers,
        auto_repetitions=auto_repetitions,
        ci_target=ci_target,
        budget_s=budget_s,
        quality=quality,
        quality_text=quality_text,
        quality_ctx=quality_ctx,
        baseline=baseline,
        text=text,
        path=path,
    )
    return dataclasses.replace(spec, workloads=_who_runs(spec, raw_workloads))


def _quality_text(data: dict[str, Any], base_dir: Path) -> tuple[Path | None, int]:
    """``quality_text`` (a readable UTF-8 file, relative to the spec) and ``quality_ctx``."""
    ctx = _get(data, "quality_ctx", int, "spec", default=512)
    if not 16 <= ctx <= 1_000_000:
        raise SpecError(f"spec: 'quality_ctx' is a context length in tokens, 16 or more, got {ctx!r}")
    name = _get(data, "quality_text", str, "spec", default=None)
    if name is None:
        return None, ctx
    if data.get("quality") is False:
        raise SpecError("spec: 'quality_text' needs the quality pass, which quality = false turns off")
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"spec: 'quality_text' file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"spec: 'quality_text' {path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SpecError(f"spec: cannot read 'quality_text' {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise SpecError(f"spec: 'quality_text' {path} is empty")
    return path, ctx


def recorded_spec(text: str | None) -> dict[str, Any]:
    """A recorded spec (a run's ``spec`` text) as parsed TOML, not validated (its models and
    strategies need not exist here); ``{}`` for one that does not parse (an old run, or none)."""
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError:
        return {}


def recorded_auto_repetitions(text: str) -> bool:
    """Whether a recorded spec (a run's ``spec`` text) asked for ``repetitions = "auto"``; False for
    one that does not parse."""
    return recorded_spec(text).get("repetitions") == "auto"


def recorded_targets(text: str) -> dict[str, Targets]:
    """The targets per workload of a recorded spec (a run's ``spec`` text), without validating the
    rest of it (its models and strategies need not exist here): a workload's own ``targets``, else a
    built-in's defaults. Workloads without targets, and a spec that does not parse, give none."""
    data = recorded_spec(text)
    out: dict[str, Targets] = {}
    workloads = data.get("workloads")
    for table in workloads if isinstance(workloads, list) else []:
        if not isinstance(table, dict) or not isinstance(table.get("name"), str):
            continue
        name = table["name"]
        targets: Targets | None
        try:
            if "targets" in table:
                targets = parse_targets(table["targets"], f"workload '{name}'")
            elif "file" in table or "prompts" in table:
                targets = None
            else:
                targets = builtin_targets(name)
        except SpecError:
            targets = None
        if targets:
            out[name] = targets
    return out


def self_comparison(spec: Spec, variant: str | None = None, repetitions: int | None = None) -> Spec:
    """An A/A spec for the noise floor: one variant of ``spec`` (default: its baseline) twice, the copy
    named "<name> again", interleaved, over the spec's workloads; ``repetitions`` overrides the spec's
    (its ``"auto"`` becomes the cap)."""
    from workbench.spec.writer import spec_to_toml

    names = [v.name for v in spec.variants]
    name = variant or spec.baseline_variant
    if name not in names:
        raise SpecError(f"variant {name!r} is not in the spec; variants: {', '.join(names)}")
    table = spec.variants[names.index(name)].to_dict()
    data = {
        key: value
        for key, value in tomllib.loads(spec.text).items()
        if key
        not in (
            "variants",
            "baseline",
            "order",
            "repetitions",
            "max_repetitions",
            "ci_target",
            "budget",
            "name",
        )
    }
    data = {
        "name": f"noise: {name} against itself",
        "repetitions": repetitions or spec.repetitions,
        "order": "interleaved",
        "baseline": name,
        **data,
        "variants": [table, {**table, "name": f"{name} again"}],
    }
    return parse_spec(spec_to_toml(data), base_dir=spec.path.parent if spec.path else ".")


def without_variants(spec: Spec, names: Collection[str]) -> Spec:
    """``spec`` less the variants named ``names`` (its stored text rewritten to match)."""
    from workbench.spec.writer import spec_to_toml

    data = tomllib.loads(spec.text)
    data["variants"] = [v for v in data.get("variants", []) if v.get("name") not in names]
    return parse_spec(spec_to_toml(data), base_dir=spec.path.parent if spec.path else ".", path=spec.path)


def variant_from_dict(data: dict[str, Any]) -> Variant:
    """Rebuild a validated variant from :meth:`Variant.to_dict` (used by the worker process)."""
    return _variant(data, 0)


_NOT_SWEEPABLE = {"name", "strategy", "sweep"}


def _expand_sweep(data: Any, index: int) -> list[Any]:
    """``sweep = {key = [v1, v2, ...]}`` in a variant table: one variant per value, named
    ``"<name> <key>=<value>"``. One key per sweep (a grid of several would multiply quietly)."""
    if not isinstance(data, dict) or "sweep" not in data:
        return [data]
    name = data.get("name", f"variants[{index}]")
    sweep = data["sweep"]
    if not isinstance(sweep, dict) or len(sweep) != 1:
        raise SpecError(
            f"variant '{name}': 'sweep' must be a table with exactly one key, e.g. sweep = {{num_draft_tokens = [2, 4, 8]}}"
        )
    ((key, values),) = sweep.items()
    if key in _NOT_SWEEPABLE:
        raise SpecError(f"variant '{name}': cannot sweep '{key}'")
    if key in data:
        raise SpecError(f"variant '{name}': '{key}' is both set and swept; remove one")
    if not isinstance(values, list) or not values:
        raise SpecError(f"variant '{name}': sweep '{key}' needs a non-empty list of values")
    if len({repr(v) for v in values}) != len(values):
        raise SpecError(f"variant '{name}': sweep '{key}' lists a value twice")
    base = {k: v for k, v in data.items() if k != "sweep"}
    return [
        {**base, key: value, "name": f"{name} {key}={_sweep_label(value)}", "_sweep": (key, value)}
        for value in values
    ]


def _sweep_label(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _variant(data: Any, index: int, base_dir: Path | None = None) -> Variant:
    if not isinstance(data, dict):
        raise SpecError(f"spec: variants[{index}] must be a table")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"spec: variants[{index}] needs a 'name'")
    where = f"variant '{name}'"
    data = dict(data)
    sweep = data.pop("_sweep", None)
    strategy_name = data.get("strategy", "baseline")
    if not isinstance(strategy_name, str):
        raise SpecError(f"{where}: 'strategy' must be a string")
    with error_context(where, StrategyError, catch=StrategyError):
        strategy_cls = registry.get(strategy_name)  # unknown -> StrategyError listing the available ones
    params = {k: v for k, v in data.items() if k not in _VARIANT_KEYS}
    config = build_config(strategy_cls.Config, params, where=where)
    model = _get(data, "model", str, where, default="")
    if strategy_cls.requires_model:
        if not model:
            raise SpecError(
                f"{where}: needs a 'model' (a Hugging Face id, a folder, a .gguf file or demo:smollm2-135m)"
            )
        with error_context(where, ModelSourceError, catch=ModelSourceError):
            source = parse_source(model, base_dir=base_dir)
        if source.path is not None:  # the worker may run elsewhere: keep an absolute path
            model = str(source.path)
    for key in model_source_fields(config):  # e.g. a speculative draft: same rules as `model`
        with error_context(f"{where}: '{key}'", ModelSourceError, catch=ModelSourceError):
            source = parse_source(getattr(config, key), base_dir=base_dir)
        if source.path is not None:
            params = {**params, key: str(source.path)}
            config = dataclasses.replace(config, **{key: str(source.path)})
    dtype = _get(data, "dtype", str, where, default="auto")
    if dtype not in DTYPES:
        raise SpecError(f"{where}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    device = _get(data, "device", str, where, default="auto")
    with error_context(where, SpecError, catch=SpecError):
        check_device_name(device)
    concurrency = _request_count(
        data,
        "concurrency",
        where,
        strategy_cls.supports_concurrency,
        f"strategy '{strategy_cls.name}' runs one stream at a time; 'concurrency' applies to "
        "strategies that serve parallel requests (endpoint)",
    )
    batch_size = _request_count(
        data,
        "batch_size",
        where,
        strategy_cls.supports_batching,
        f"strategy '{strategy_cls.name}' decodes one sequence at a time; 'batch_size' applies to "
        "baseline and quantized (speculative decoding accepts a different number of tokens per sequence "
        "each step: see docs/levers.md)",
    )
    if batch_size > 1 and concurrency > 1:
        raise SpecError(f"{where}: set 'batch_size' or 'concurrency', not both")
    compile_mode = _compile(data, where, strategy_cls, batch_size)
    return Variant(
        name=name,
        strategy=strategy_cls.name,
        strategy_ref=strategy_name,
        model=model,
        dtype=dtype,
        device=device,
        trust_remote_code=_get(data, "trust_remote_code", bool, where, default=False),
        concurrency=concurrency,
        batch_size=batch_size,
        threads=_threads(data, where),
        python=_python(data, where, base_dir),
        compile=compile_mode,
        params=params,
        config=config,
        sweep_param=sweep[0] if sweep else None,
        sweep_value=sweep[1] if sweep else None,
    )


def _workload(data: Any, index: int, base_dir: Path, defaults: dict[str, Any]) -> Workload:
    if not isinstance(data, dict):
        raise SpecError(f"spec: workloads[{index}] must be a table")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"spec: workloads[{index}] needs a 'name' (a built-in: {', '.join(builtin_names())})")
    where = f"workload '{name}'"
    _check_keys(data, _WORKLOAD_KEYS, where)
    file = _get(data, "file", str, where, default=None)
    max_new_tokens = _get(data, "max_new_tokens", int, where, default=None)
    if max_new_tokens is not None and max_new_tokens < 1:
        raise SpecError(f"{where}: 'max_new_tokens' must be at least 1")
    kind = _get(data, "kind", str, where, default=None)
    if kind not in (None, "prompts", "conversation"):
        raise SpecError(f'{where}: \'kind\' must be "prompts" or "conversation", got {kind!r}')
    if kind == "conversation" and (file is None or "prompts" in data):
        raise SpecError(f"{where}: kind = \"conversation\" needs a 'file' of conversations (JSONL)")
    if kind == "prompts" and file is None and "prompts" not in data:
        raise SpecError(f"{where}: kind = \"prompts\" needs a 'file' or 'prompts'")
    if "prompts" in data:
        if file is not None:
            raise SpecError(f"{where}: give either 'file' or 'prompts', not both")
        workload = Workload(
            name=name,
            items=inline_items(data["prompts"], where, default_max_new_tokens=max_new_tokens or 128),
            source="inline",
        )
    elif file is not None and kind == "conversation":
        conversations = load_conversations(base_dir / file, default_max_new_tokens=max_new_tokens or 128)
        workload = Workload(
            name=name,
            items=conversation_items(conversations),
            conversations=conversations,
            source=str(base_dir / file),
        )
    elif file is not None:
        workload = Workload(
            name=name,
            items=load_jsonl(base_dir / file, default_max_new_tokens=max_new_tokens or 128),
            source=str(base_dir / file),
        )
    elif name in builtin_names():
        workload = builtin_workload(name)
        workload = _sweep_overrides(workload, data, where)
        if max_new_tokens is not None:
            if workload.sweep == "output":
                raise SpecError(
                    f"{where}: sweep-output sets its lengths with 'output_tokens', not 'max_new_tokens'"
                )
            workload = with_max_new_tokens(workload, max_new_tokens)
    else:
        raise SpecError(
            f"{where}: not a built-in workload and no 'file' or 'prompts' given; built-ins: {', '.join(builtin_names())}"
        )
    limit = _get(data, "limit", int, where, default=None)
    if limit is not None:
        if limit < 1:
            raise SpecError(f"{where}: 'limit' must be at least 1")
        if workload.conversations:  # whole conversations: a turn needs the turns before it
            kept = workload.conversations[:limit]
            workload = dataclasses.replace(workload, conversations=kept, items=conversation_items(kept))
        else:
            workload = dataclasses.replace(workload, items=workload.items[:limit])
    history = _get(data, "history", str, where, default="baseline-anchored")
    if "history" in data and not workload.conversations:
        raise SpecError(f"{where}: 'history' applies to conversation workloads only")
    if history == "own":
        raise SpecError(
            f'{where}: history = "own" (each variant fed its own answers) is not supported yet; '
            'use "baseline-anchored" (every variant gets the baseline\'s answers as history)'
        )
    if history not in HISTORIES:
        raise SpecError(f"{where}: 'history' must be \"baseline-anchored\", got {history!r}")
    if _get(data, "as_chat", bool, where, default=False):
        workload = as_chat(workload)
    stop = data.get("stop", list(workload.stop))
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise SpecError(f"{where}: 'stop' must be a string or a list of non-empty strings")
    temperature = _get(data, "temperature", float, where, default=defaults["temperature"])
    if temperature < 0:
        raise SpecError(f"{where}: 'temperature' must be 0 (greedy) or more")
    top_p = _get(data, "top_p", float, where, default=defaults["top_p"])
    if not 0 < top_p <= 1:
        raise SpecError(f"{where}: 'top_p' must be in (0, 1]")
    targets = parse_targets(data["targets"], where) if "targets" in data else workload.targets
    return dataclasses.replace(
        workload,
        targets=targets or None,
        description=_get(data, "description", str, where, default=workload.description),
        ignore_eos=_get(data, "ignore_eos", bool, where, default=workload.ignore_eos),
        temperature=temperature,
        top_p=top_p,
        top_k=_get(data, "top_k", int, where, default=defaults["top_k"]),
        stop=tuple(stop),
        history=history,
    )


def _who_runs(spec: Spec, raw: list[Any]) -> tuple[Workload, ...]:
    """Each workload's ``variants`` key checked against the spec's variants and resolved to their
    names (a sweep's name as written stands for every variant it expands to). The baseline runs every
    workload (speed-ups and the quality pass pair every variant with it, and a conversation's history
    is its answers), and every variant runs at least one."""
    variants, baseline = spec.variants, spec.baseline_variant
    answers_to: dict[str, list[str]] = {}
    for v in variants:
        answers_to.setdefault(v.name, []).append(v.name)
        if v.sweep_param is not None:  # the name as written, before _expand_sweep added the value
            base = v.name.removesuffix(f" {v.sweep_param}={_sweep_label(v.sweep_value)}")
            answers_to.setdefault(base, []).append(v.name)
    resolved = []
    for workload, data in zip(spec.workloads, raw, strict=True):
        listed = data.get("variants")
        if listed is None:
            resolved.append(workload)
            continue
        where = f"workload '{workload.name}'"
        if isinstance(listed, str):
            listed = [listed]
        if not isinstance(listed, list) or not listed or not all(isinstance(n, str) for n in listed):
            raise SpecError(f"{where}: 'variants' must be a non-empty list of variant names")
        names: list[str] = []
        for name in listed:
            if name not in answers_to:
                close = difflib.get_close_matches(name, sorted(answers_to), n=1)
                hint = (
                    f" (did you mean '{close[0]}'?)"
                    if close
                    else f"; variants: {', '.join(v.name for v in variants)}"
                )
                raise SpecError(f"{where}: 'variants' lists {name!r}, which is not a variant{hint}")
            names += [n for n in answers_to[name] if n not in names]
        if baseline not in names:
            raise SpecError(
                f"{where}: 'variants' must list the baseline ({baseline!r}): every variant is compared "
                "with it on the same prompts"
            )
        resolved.append(dataclasses.replace(workload, variants=tuple(names)))
    idle = [v.name for v in variants if not any(w.runs(v.name) for w in resolved)]
    if idle:
        raise SpecError(f"variant {idle[0]!r} runs no workload: add it to a workload's 'variants'")
    return tuple(resolved)


def _sweep_overrides(workload: Workload, data: dict[str, Any], where: str) -> Workload:
    """Let a spec change the lengths of a built-in sweep."""
    if "input_tokens" not in data and "output_tokens" not in data:
        return workload
    if workload.sweep is None:
        raise SpecError(f"{where}: 'input_tokens'/'output_tokens' only apply to the sweep workloads")
    text = workload.items[0].prompt.prompt or ""
    settings = workload.settings
    if workload.sweep == "input":
        if "output_tokens" in data:
            raise SpecError(f"{where}: 'output_tokens' applies to sweep-output; use 'max_new_tokens' here")
        lengths = _int_list(data["input_tokens"], f"{where}: 'input_tokens'")
        max_new = data.get("max_new_tokens", settings["max_new_tokens"])
        return dataclasses.replace(workload, items=sweep_input_items(text, lengths, max_new))
    input_tokens = data.get("input_tokens", settings["input_tokens"])
    if isinstance(input_tokens, bool) or not isinstance(input_tokens, int) or input_tokens < 1:
        raise SpecError(f"{where}: 'input_tokens' must be one positive integer for sweep-output")
    lengths = _int_list(data.get("output_tokens", settings["output_tokens"]), f"{where}: 'output_tokens'")
    return dataclasses.replace(workload, items=sweep_output_items(text, input_tokens, lengths))


def _int_list(value: Any, where: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise SpecError(f"{where} must be a non-empty list of positive integers")
    return value


def _check_keys(data: dict[str, Any], known: set[str], where: str) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; valid keys: {', '.join(sorted(known))}"
            raise SpecError(f"{where}: unknown key '{key}'{hint}")


def _check_numbers(data: dict[str, Any]) -> None:
    """Every number anywhere in the spec (its own keys, each variant's and strategy parameters, each
    workload's, targets, inline prompts, sweep lists) is finite (TOML has ``nan`` and ``inf``) and a
    whole number is in SQLite's INTEGER range: one line naming the key and the value otherwise."""

    def table_name(kind: str, table: Any, index: int) -> str:
        name = table.get("name") if isinstance(table, dict) else None
        return f"{kind} {name!r}" if isinstance(name, str) and name else f"spec: {kind}s[{index}]"

    for key, value in data.items():
        if key in ("variants", "workloads") and isinstance(value, list):
            for i, table in enumerate(value):
                _check_value(table, table_name(key[:-1], table, i), "")
        else:
            _check_value(value, "spec", key)


def _check_value(value: Any, where: str, key: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _check_value(v, where, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_value(v, where, f"{key}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{where}: '{key}' must be a finite number, got {value}")
    elif isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise SpecError(
            f"{where}: '{key}' = {value} is out of range (whole numbers are stored as 64-bit integers: "
            f"at most {count(INT_RANGE[1], grouped=True)})"
        )


def _check_plan_size(variants: int, warmup: int, repetitions: int, workloads: Sequence[Workload]) -> None:
    prompts = sum(len(w.items) for w in workloads)
    planned = variants * (warmup * len(workloads) + repetitions * prompts)
    if planned > MAX_PLANNED_TRIALS:
        raise SpecError(
            f"spec: plans {count(planned, grouped=True)} trials ({variants} variants × ({warmup} warm-ups × {len(workloads)} "
            f"workloads + {repetitions} repetitions × {prompts} prompts)); one run holds at most "
            f"{count(MAX_PLANNED_TRIALS, grouped=True)}"
        )


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _repetitions(data: dict[str, Any]) -> tuple[int, bool]:
    """``repetitions``: a count, or ``"auto"`` (then ``max_repetitions`` is the cap). Returns the
    repetitions to plan and whether they are a cap."""
    value = data.get("repetitions", 3)
    if value == "auto":
        cap = _get(data, "max_repetitions", int, "spec", default=AUTO_MAX_REPETITIONS)
        if cap < AUTO_MIN_REPETITIONS:
            raise SpecError(f"spec: 'max_repetitions' must be at least {AUTO_MIN_REPETITIONS}, got {cap}")
        return cap, True
    if "max_repetitions" in data:
        raise SpecError("spec: 'max_repetitions' applies to repetitions = \"auto\"")
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"spec: 'repetitions' must be a whole number or \"auto\", got {value!r}")
    if value < 1:
        raise SpecError("spec: 'repetitions' must be at least 1")
    return value, False


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)s)?")


def duration_s(value: Any, where: str) -> float:
    """A time span: a number of seconds, or a string of hours, minutes and seconds ("5m", "90s",
    "1h30m", "2.5m"). At least one second."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch("".join(value.split()).lower()) if isinstance(value, str) else None
        if match is None or not any(match.groups()):
            raise SpecError(f'{where} must be a time such as "5m", "90s" or "1h30m", got {value!r}')
        hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not 1 <= seconds < float("inf"):
        raise SpecError(f"{where} must be at least one second, got {value!r}")
    return seconds


def _threads(data: dict[str, Any], where: str) -> int | None:
    """``threads``: a positive integer, or absent for the library's default (one per core)."""
    value = data.get("threads")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{where}: 'threads' must be a whole number of at least 1, got {value!r}")
    return value


def _compile(data: dict[str, Any], where: str, strategy_cls: Any, batch_size: int) -> str | None:
    """``compile``: false (eager, the default), true (torch.compile's ``default`` mode) or a mode; one
    line when the strategy, or a batch, is not compiled."""
    value = data.get("compile", False)
    if value is False or value == "false":
        return None
    mode = "default" if value is True or value == "true" else value
    if mode not in COMPILE_MODES:
        raise SpecError(
            f"{where}: 'compile' must be false, true or one of {', '.join(COMPILE_MODES)}, got {value!r}"
        )
    if strategy_cls.compile_refusal:
        raise SpecError(
            f"{where}: strategy '{strategy_cls.name}' is not compiled: {strategy_cls.compile_refusal} "
            "(compile applies to baseline and quantized)"
        )
    if batch_size > 1:
        raise SpecError(f"{where}: a batch is decoded eagerly; 'compile' applies to batch_size = 1")
    return str(mode)


def _python(data: dict[str, Any], where: str, base_dir: Path | None) -> str | None:
    """``python``: the interpreter the variant's worker runs with, as an absolute path (a venv's
    ``bin/python`` is a link to its base interpreter: not resolved, or the venv would be lost). A
    path relative to the spec, or a command found on PATH. Whether it runs and has the workbench is
    checked before the run starts (:func:`workbench.run.interpreter.probe`)."""
    value = data.get("python")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}: 'python' must be the path of a Python interpreter, got {value!r}")
    value = value.strip()
    if os.sep not in value and "/" not in value and not value.startswith("~"):
        found = shutil.which(value)
        if found is None:
            raise SpecError(f"{where}: 'python' {value!r} is not a path and not a command on PATH")
        return os.path.abspath(found)
    path = Path(value).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    path = Path(os.path.abspath(path))
    if path.is_dir():
        hint = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        raise SpecError(f"{where}: 'python' {path} is a folder; give its interpreter, e.g. {hint}")
    if not path.exists():
        raise SpecError(f"{where}: 'python' {path} does not exist")
    if not os.access(path, os.X_OK):
        raise SpecError(f"{where}: 'python' {path} is not executable")
    return str(path)


def _request_count(data: dict[str, Any], key: str, where: str, supported: bool, refusal: str) -> int:
    """``concurrency`` / ``batch_size``: at least 1, above 1 only where the strategy supports it."""
    value = _get(data, key, int, where, default=1)
    if value < 1:
        raise SpecError(f"{where}: '{key}' must be at least 1")
    if value > 1 and not supported:
        raise SpecError(f"{where}: {refusal}")
    return value


def _get(data: dict[str, Any], key: str, kind: type, where: str, *, default: Any) -> Any:
    if key not in data:
        return default
    value = data[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise SpecError(f"{where}: '{key}' must be {_TYPE_WORDS[kind]}, got {value!r}")
    return value
