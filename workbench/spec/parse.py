"""The experiment spec: TOML in, validated dataclasses out, with precise one-line errors.

The format is in ``docs/spec.md``. Every problem names its place: the TOML
line and column, the variant and key, or the JSONL file and line.
"""

from __future__ import annotations

import dataclasses
import os
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
from workbench.core.literals import CompileMode, TrialOrder, Workers
from workbench.core.variant import COMPILE_MODES, DTYPES, Variant
from workbench.formatting import count
from workbench.sources import parse_source
from workbench.spec.tables import INT_RANGE, check_keys, check_numbers, duration_s, get_typed
from workbench.spec.targets import Targets, parse_targets
from workbench.spec.workload_parse import parse_workload, who_runs
from workbench.spec.workloads import Workload, builtin_targets

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
    check_keys(data, _TOP_KEYS, "spec")
    check_numbers(data)
    name = get_typed(data, "name", str, "spec", default=path.stem if path else "experiment")
    if not name.strip():
        raise SpecError("spec: 'name' must not be empty (leave it out to name the run after the file)")
    repetitions, auto_repetitions = _repetitions(data)
    warmup = get_typed(data, "warmup", int, "spec", default=1)
    order = cast(TrialOrder, get_typed(data, "order", str, "spec", default="interleaved"))
    if order not in ORDERS:
        raise SpecError(f"spec: 'order' must be one of {', '.join(ORDERS)}, got {order!r}")
    if auto_repetitions and order == "sequential":
        raise SpecError(
            'spec: repetitions = "auto" needs order = "interleaved" or "blocks" (sequential runs each '
            "variant's repetitions in one go, so no round can be added to all of them)"
        )
    workers = cast(Workers, get_typed(data, "workers", str, "spec", default="per-repetition"))
    if workers not in WORKERS:
        raise SpecError(f"spec: 'workers' must be one of {', '.join(WORKERS)}, got {workers!r}")
    if "ci_target" in data and not auto_repetitions:
        raise SpecError("spec: 'ci_target' applies to repetitions = \"auto\"")
    ci_target = get_typed(data, "ci_target", float, "spec", default=0.03)
    if not 0 < ci_target < 1:
        raise SpecError(f"spec: 'ci_target' is a fraction, e.g. 0.03 for ±3 %, got {ci_target!r}")
    if "budget" in data and not auto_repetitions:
        raise SpecError("spec: 'budget' applies to repetitions = \"auto\"")
    budget_s = duration_s(data["budget"], "spec: 'budget'") if "budget" in data else None
    if warmup < 0:
        raise SpecError("spec: 'warmup' must be 0 or more")
    warmup_tokens = get_typed(data, "warmup_max_new_tokens", int, "spec", default=None)
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
        "temperature": get_typed(data, "temperature", float, "spec", default=0.0),
        "top_p": get_typed(data, "top_p", float, "spec", default=1.0),
        "top_k": get_typed(data, "top_k", int, "spec", default=0),
    }
    raw_workloads = data.get("workloads")
    if not isinstance(raw_workloads, list) or not raw_workloads:
        raise SpecError('spec: needs at least one [[workloads]] table (e.g. name = "chat")')
    workloads = tuple(parse_workload(w, i, base_dir, defaults) for i, w in enumerate(raw_workloads))
    wnames = [w.name for w in workloads]
    duplicates = {n for n in wnames if wnames.count(n) > 1}
    if duplicates:
        raise SpecError(f"spec: workload name {sorted(duplicates)[0]!r} is used twice")
    quality = get_typed(data, "quality", bool, "spec", default=None)
    quality_text, quality_ctx = _quality_text(data, base_dir)
    baseline = get_typed(data, "baseline", str, "spec", default=None)
    if baseline is not None and baseline not in names:
        raise SpecError(f"spec: baseline {baseline!r} is not a variant; variants: {', '.join(names)}")
    _check_plan_size(len(variants), warmup, repetitions, workloads)
    spec = Spec(
        name=name,
        description=get_typed(data, "description", str, "spec", default=""),
        variants=variants,
        workloads=workloads,
        repetitions=repetitions,
        warmup=warmup,
        warmup_max_new_tokens=warmup_tokens,
        seed=get_typed(data, "seed", int, "spec", default=0),
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


def _who_runs(spec: Spec, raw: list[Any]) -> tuple[Workload, ...]:
    """Each workload's ``variants`` key resolved (:func:`~workbench.spec.workload_parse.who_runs`):
    a variant answers to its name, and a sweep's name as written stands for every variant it expands
    to."""
    answers_to: dict[str, list[str]] = {}
    for v in spec.variants:
        answers_to.setdefault(v.name, []).append(v.name)
        if v.sweep_param is not None:  # the name as written, before _expand_sweep added the value
            base = v.name.removesuffix(f" {v.sweep_param}={_sweep_label(v.sweep_value)}")
            answers_to.setdefault(base, []).append(v.name)
    names = [v.name for v in spec.variants]
    return who_runs(spec.workloads, raw, names, answers_to, spec.baseline_variant)


def _quality_text(data: dict[str, Any], base_dir: Path) -> tuple[Path | None, int]:
    """``quality_text`` (a readable UTF-8 file, relative to the spec) and ``quality_ctx``."""
    ctx = get_typed(data, "quality_ctx", int, "spec", default=512)
    if not 16 <= ctx <= 1_000_000:
        raise SpecError(f"spec: 'quality_ctx' is a context length in tokens, 16 or more, got {ctx!r}")
    name = get_typed(data, "quality_text", str, "spec", default=None)
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
    model = get_typed(data, "model", str, where, default="")
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
    dtype = get_typed(data, "dtype", str, where, default="auto")
    if dtype not in DTYPES:
        raise SpecError(f"{where}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    device = get_typed(data, "device", str, where, default="auto")
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
        trust_remote_code=get_typed(data, "trust_remote_code", bool, where, default=False),
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


def _check_plan_size(variants: int, warmup: int, repetitions: int, workloads: Sequence[Workload]) -> None:
    prompts = sum(len(w.items) for w in workloads)
    planned = variants * (warmup * len(workloads) + repetitions * prompts)
    if planned > MAX_PLANNED_TRIALS:
        raise SpecError(
            f"spec: plans {count(planned, grouped=True)} trials ({variants} variants × ({warmup} warm-ups × {len(workloads)} "
            f"workloads + {repetitions} repetitions × {prompts} prompts)); one run holds at most "
            f"{count(MAX_PLANNED_TRIALS, grouped=True)}"
        )


def _repetitions(data: dict[str, Any]) -> tuple[int, bool]:
    """``repetitions``: a count, or ``"auto"`` (then ``max_repetitions`` is the cap). Returns the
    repetitions to plan and whether they are a cap."""
    value = data.get("repetitions", 3)
    if value == "auto":
        cap = get_typed(data, "max_repetitions", int, "spec", default=AUTO_MAX_REPETITIONS)
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


def _threads(data: dict[str, Any], where: str) -> int | None:
    """``threads``: a positive integer, or absent for the library's default (one per core)."""
    value = data.get("threads")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{where}: 'threads' must be a whole number of at least 1, got {value!r}")
    return value


def _compile(data: dict[str, Any], where: str, strategy_cls: Any, batch_size: int) -> CompileMode | None:
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
    return cast(CompileMode, mode)


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
    value = get_typed(data, key, int, where, default=1)
    if value < 1:
        raise SpecError(f"{where}: '{key}' must be at least 1")
    if value > 1 and not supported:
        raise SpecError(f"{where}: {refusal}")
    return value
