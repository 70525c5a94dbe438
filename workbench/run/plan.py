"""Spec → ordered trials. Variant-major, so each model loads once in its own worker process.

Within a variant: warm-up trials first (``warmup`` per workload, on that workload's first prompt, and
one more on the first prompt of every other prompt-length bucket of the workload (:func:`length_bucket`:
powers of two of the prompt's tokens), so that no measured trial pays a first use: CUDA's lazy module
loading, cuBLAS / oneDNN picking and building kernels for a new shape), then the measured repetitions, repetition-major (rep 0 of every
prompt, then rep 1...) so a slow drift of the machine spreads over all prompts instead of
landing on the last one. Every variant gets exactly the same prompts, budgets and seeds.

A variant with ``concurrency > 1`` gets the same trials workload-major (a workload's warm-ups, then
all its measured trials), so that each workload's trials form one group of parallel streams
(:func:`trial_groups`): N streams need more than one repetition's prompts to stay busy.

A workload with a ``variants`` key is left out of the other variants' plans; its rounds keep their
numbers, so the variants that run it still pair round by round.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, replace
from typing import Any

from workbench.core.strategy import Prompt
from workbench.core.variant import Variant
from workbench.spec.parse import Spec

__all__ = ["TrialPlan", "VariantPlan", "anchor_plans", "length_bucket", "plan_run", "trial_groups"]

#: characters per token, to estimate a prompt's length before it is tokenized (the worker tokenizes)
_CHARS_PER_TOKEN = 4
#: the most tokens a bucket's extra warm-up generates: it is there for the prefill's shape and the
#: first decode steps after it
_BUCKET_WARMUP_TOKENS = 4


@dataclass(frozen=True)
class TrialPlan:
    workload: str
    prompt: Prompt
    repetition: int
    warmup: bool
    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    seed: int
    ignore_eos: bool
    stop: tuple[str, ...]
    #: the round this measured trial belongs to: one (repetition, workload, prompt), which every variant
    #: runs once (rounds are numbered repetition-major); None for a warm-up
    round: int | None = None
    #: a conversation workload's turn (1-based) and the prompt tokens of its history (everything before
    #: this turn's user message, in the baseline's tokens: known once the history is anchored)
    turn: int | None = None
    history_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["prompt"] = self.prompt.to_dict()
        data["stop"] = list(self.stop)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialPlan:
        return cls(**{**data, "prompt": Prompt.from_dict(data["prompt"]), "stop": tuple(data["stop"])})


@dataclass(frozen=True)
class VariantPlan:
    variant: Variant
    trials: tuple[TrialPlan, ...]

    @property
    def measured(self) -> int:
        return sum(not t.warmup for t in self.trials)


def trial_seed(base: int, workload: str, prompt_id: str, repetition: int) -> int:
    """A seed that depends on the prompt and repetition but not on the variant."""
    return zlib.crc32(f"{base}/{workload}/{prompt_id}/{repetition}".encode()) & 0x7FFFFFFF


def length_bucket(prompt: Prompt) -> int:
    """The prompt-length bucket of ``prompt``: the bit length of its token count (``input_tokens``
    when the prompt is cut to a length, else estimated from its characters), so prompts of 64-127
    tokens share a bucket, 128-255 the next..."""
    if prompt.input_tokens is not None:
        return int(prompt.input_tokens).bit_length()
    text = prompt.prompt or ""
    if prompt.messages is not None:
        text = "".join(m.get("content", "") for m in prompt.messages)
    return (len(text) // _CHARS_PER_TOKEN).bit_length()


def plan_run(spec: Spec) -> list[VariantPlan]:
    trials: list[TrialPlan] = []
    for workload in spec.workloads:
        first = workload.items[0]
        for w in range(spec.warmup):
            trials.append(_trial(spec, workload, first, w, warmup=True))
        if spec.warmup:
            seen = {length_bucket(first.prompt)}
            for item in workload.items[1:]:
                bucket = length_bucket(item.prompt)
                if bucket not in seen:
                    seen.add(bucket)
                    trials.append(_trial(spec, workload, item, 0, warmup=True, cap=_BUCKET_WARMUP_TOKENS))
    warmups = len(trials)
    for repetition in range(spec.repetitions):
        for workload in spec.workloads:
            for item in workload.items:
                trials.append(
                    _trial(spec, workload, item, repetition, warmup=False, round=len(trials) - warmups)
                )
    order = {w.name: i for i, w in enumerate(spec.workloads)}
    workload_major = sorted(trials, key=lambda t: (order[t.workload], not t.warmup))  # stable
    workloads = {w.name: w for w in spec.workloads}
    return [
        VariantPlan(
            variant,
            tuple(
                t  # a workload's `variants` key leaves others out; rounds keep their numbers across variants
                for t in (trials if variant.concurrency == 1 and variant.batch_size == 1 else workload_major)
                if workloads[t.workload].runs(variant.name)
            ),
        )
        for variant in spec.variants
    ]


def trial_groups(
    trials: tuple[TrialPlan, ...] | list[TrialPlan], concurrency: int, batch_size: int = 1
) -> list[list[int]]:
    """Indices of ``trials`` in the groups the worker runs together: each trial alone when sequential;
    runs of consecutive trials of one workload (warm-ups apart) as parallel streams with
    ``concurrency > 1``; those runs cut into batches of ``batch_size`` (the last may be smaller) with
    ``batch_size > 1``. The server's own metrics are read before and after each group."""
    if concurrency == 1 and batch_size == 1:
        return [[i] for i in range(len(trials))]
    groups: list[list[int]] = []
    key = None
    for i, t in enumerate(trials):
        if (t.workload, t.warmup) != key or len(groups[-1]) == batch_size > 1:
            groups.append([])
            key = (t.workload, t.warmup)
        groups[-1].append(i)
    return groups


def _trial(
    spec: Spec,
    workload: Any,
    item: Any,
    repetition: int,
    *,
    warmup: bool,
    round: int | None = None,
    cap: int | None = None,
) -> TrialPlan:
    max_new_tokens = item.max_new_tokens
    if warmup and spec.warmup_max_new_tokens is not None:
        max_new_tokens = min(max_new_tokens, spec.warmup_max_new_tokens)
    if cap is not None:
        max_new_tokens = min(max_new_tokens, cap)
    return TrialPlan(
        workload=workload.name,
        prompt=item.prompt,
        repetition=repetition,
        warmup=warmup,
        max_new_tokens=max_new_tokens,
        temperature=workload.temperature,
        top_p=workload.top_p,
        top_k=workload.top_k,
        seed=trial_seed(spec.seed, workload.name, item.prompt.id, repetition),
        ignore_eos=workload.ignore_eos,
        stop=workload.stop,
        round=round,
        turn=item.turn,
    )


def anchor_plans(
    plans: list[VariantPlan],
    prompts: dict[tuple[str, str], tuple[Prompt, int | None]],
    *,
    warmup_max_new_tokens: int | None = None,
) -> list[VariantPlan]:
    """The plans with each conversation turn's prompt replaced by its anchored one (``(workload,
    prompt id)`` → (the prompt with its history, the history's tokens)): the same for every variant.

    The length buckets' extra warm-ups of those workloads are chosen again on the anchored prompts
    (:func:`_rebucket`): before anchoring a turn is its own message only, so every turn looked as short
    as the first and the later turns' lengths got no warm-up."""
    workloads = list(dict.fromkeys(w for w, _ in prompts))
    out = []
    for plan in plans:
        trials = []
        for t in plan.trials:
            anchored = prompts.get((t.workload, t.prompt.id))
            if anchored is not None:
                t = replace(t, prompt=anchored[0], history_tokens=anchored[1])
            trials.append(t)
        for workload in workloads:
            trials = _rebucket(trials, workload, warmup_max_new_tokens)
        out.append(VariantPlan(plan.variant, tuple(trials)))
    return out


def _rebucket(trials: list[TrialPlan], workload: str, warmup_max_new_tokens: int | None) -> list[TrialPlan]:
    """``trials`` with ``workload``'s bucket warm-ups chosen from its prompts as they are now, as
    :func:`plan_run` chooses them: the ``warmup`` trials on the first prompt stay, then one short
    warm-up on the first prompt of every other length bucket (:func:`length_bucket`), in the order
    the measured trials first meet them. Nothing changes for a workload without warm-ups."""
    own = [t for t in trials if t.workload == workload]
    warm = [t for t in own if t.warmup]
    if not warm:
        return trials
    first = warm[0].prompt.id
    kept = [t for t in warm if t.prompt.id == first]
    seen = {length_bucket(warm[0].prompt)}
    extra = []
    for t in own:
        if t.warmup or t.repetition != 0:
            continue
        bucket = length_bucket(t.prompt)
        if bucket in seen:
            continue
        seen.add(bucket)
        cap = min(t.max_new_tokens, _BUCKET_WARMUP_TOKENS)
        if warmup_max_new_tokens is not None:
            cap = min(cap, warmup_max_new_tokens)
        extra.append(replace(t, warmup=True, round=None, max_new_tokens=cap))
    last = max(i for i, t in enumerate(trials) if t is kept[-1])
    return [
        *(t for t in trials[: last + 1] if not (t.warmup and t.workload == workload and t not in kept)),
        *extra,
        *(t for t in trials[last + 1 :] if not (t.warmup and t.workload == workload and t not in kept)),
    ]
