"""``speculative`` and ``prompt-lookup`` (the shared draft → verify loop in workbench_strategies.speculative.loop):
greedy output identical to the baseline, step accounting, stopping, the runner, sampling exactness."""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")

from workbench.core.device import Device  # noqa: E402
from workbench.core.errors import SpecError, StrategyError  # noqa: E402
from workbench.core.strategy import Cancelled, Prompt, Request  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402
from workbench.testing.helpers import ListProbe, request_for, tiny_prompt, trial_plan  # noqa: E402
from workbench.testing.helpers import load_session as load  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

PLD = "workbench_strategies.prompt_lookup:PromptLookupStrategy"
SPEC = "workbench_strategies.speculative:SpeculativeStrategy"


def _save_variant(src, dst, *, layers: int, seed: int | None = None, extra_tokens=()):
    """A model next to the tiny one: same tokenizer files; truncated to ``layers`` layers of the
    target (``seed`` None: a correlated draft) or fresh random weights (``seed`` given)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(src)
    if extra_tokens:
        tok.add_tokens(list(extra_tokens))
    if seed is None:
        model = LlamaForCausalLM.from_pretrained(src)
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
    else:
        config = LlamaConfig.from_pretrained(src)
        config.num_hidden_layers = layers
        config.vocab_size = len(tok)
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.eval().save_pretrained(dst)
    tok.save_pretrained(dst)
    return dst


@pytest.fixture(scope="module")
def models(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("drafts")
    return {
        "target": tiny_model_dir,
        "truncated": _save_variant(tiny_model_dir, root / "truncated", layers=1),
        "random": _save_variant(tiny_model_dir, root / "random", layers=1, seed=123),
        "larger": _save_variant(tiny_model_dir, root / "larger", layers=3, seed=5),
        "other_vocab": _save_variant(tiny_model_dir, root / "vocab", layers=1, seed=6, extra_tokens=("zzz",)),
    }


@pytest.fixture(scope="module")
def sessions(models):
    t = models["target"]
    return {
        "baseline": load(t, "baseline"),
        "pld": load(t, PLD),
        "pld-short": load(t, PLD, num_tokens=3, max_ngram_size=2),
        "pld-fixed": load(t, PLD, schedule="fixed"),
        "pld-heuristic": load(t, PLD, num_tokens=3, schedule="heuristic"),
        "self": load(t, SPEC, draft=str(t), adaptive=False),  # auto: reuses the target's prefill
        "self-own": load(t, SPEC, draft=str(t), draft_prefill="own", num_draft_tokens=3),
        "self-bf16": load(t, SPEC, draft=str(t), draft_dtype="bfloat16", num_draft_tokens=3),
        "self-bf16-kv": load(
            t, SPEC, draft=str(t), draft_dtype="bfloat16", num_draft_tokens=3, draft_kv_dtype="model"
        ),
        "truncated": load(t, SPEC, draft=str(models["truncated"])),
        # a draft that may only propose ids < 60 or ids of the prompt (draft_vocab)
        "truncated-subset": load(t, SPEC, draft=str(models["truncated"]), draft_vocab=60),
        "random": load(t, SPEC, draft=str(models["random"]), num_draft_tokens=3),
        "random-heuristic": load(t, SPEC, draft=str(models["random"]), schedule="heuristic"),
        # the draft reads its prompt after the first token, 4 tokens between plain steps
        "truncated-catch-up": load(
            t, SPEC, draft=str(models["truncated"]), draft_prefill="catch-up", draft_prefill_chunk=4
        ),
        # ... in one chunk (prompts here are shorter than 64 tokens)
        "truncated-catch-up-64": load(
            t, SPEC, draft=str(models["truncated"]), draft_prefill="catch-up", draft_prefill_chunk=64
        ),
        # the draft reads the first 2 and the last 6 prompt tokens (attention sinks + recent window)
        "truncated-bounded": load(t, SPEC, draft=str(models["truncated"]), draft_context=8, draft_sinks=2),
        "self-bounded-catch-up": load(
            t, SPEC, draft=str(t), draft_prefill="catch-up", draft_context=8, draft_prefill_chunk=3
        ),
    }


REPETITIVE = [" ".join([tiny_prompt(12, 3)] * 3), " ".join([tiny_prompt(20)] * 2) + " " + tiny_prompt(5)]
PLAIN = [tiny_prompt(5), tiny_prompt(40, 11)]


def check_accounting(probe: ListProbe, out) -> None:
    assert probe.tokens == out.token_ids
    assert sum(len(s) for s in probe.steps) == len(out.token_ids)
    assert probe.info[0] == {}  # the first token comes from the target's prefill
    last = len(probe.steps) - 1
    for i, (step, info) in enumerate(zip(probe.steps, probe.info, strict=True)):
        if i == 0:
            continue
        assert 0 <= info["draft_accepted"] <= info["draft_proposed"]
        if i < last or out.finish_reason == "length":
            assert len(step) == info["draft_accepted"] + 1
        else:  # a run cut by EOS or a stop string
            assert 1 <= len(step) <= info["draft_accepted"] + 1
        assert info["verify_ms"] >= 0
        if info["draft_proposed"]:
            assert info["draft_ms"] >= 0


@pytest.fixture(scope="module")
def baseline_outputs(sessions):
    """Greedy baseline output per prompt at the largest budget; shorter budgets are its prefixes."""
    base = sessions["baseline"]
    return {
        text: base.generate(
            request_for(base, text, max_new_tokens=37, ignore_eos=True), ListProbe()
        ).token_ids
        for text in REPETITIVE + PLAIN
    }


@pytest.mark.parametrize(
    "name",
    [
        "pld",
        "pld-short",
        "pld-fixed",
        "pld-heuristic",
        "self",
        "self-own",
        "self-bf16",
        "self-bf16-kv",
        "truncated",
        "truncated-subset",
        "random",
        "random-heuristic",
        "truncated-catch-up",
        "truncated-bounded",
        "self-bounded-catch-up",
    ],
)
def test_greedy_output_is_token_identical_to_baseline(sessions, baseline_outputs, name):
    s = sessions[name]
    base = sessions["baseline"]
    for text, expected in baseline_outputs.items():
        for max_new in (1, 2, 9, 37):
            probe = ListProbe()
            out = s.generate(request_for(s, text, max_new_tokens=max_new, ignore_eos=True), probe)
            assert out.token_ids == expected[:max_new], (text, max_new)  # exactly the budget, never more
            assert out.text == base.decode(expected[:max_new])
            assert out.finish_reason == "length"
            check_accounting(probe, out)


class _OpLog:
    """The torch operations (name and input shapes) a session runs until its first token is reported."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        log = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if log.on:
                    shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
                    log.ops.append((str(func), shapes))
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        self.ops: list = []
        self.on = True

    def step(self, token_ids=(), **kw) -> None:
        self.on = False  # the first token is out: what follows is decode time


@pytest.mark.parametrize("name", ["pld", "self", "self-own", "truncated", "random"])
def test_the_first_token_costs_what_the_baselines_does(sessions, name):
    """TTFT equal to the baseline's by construction: up to the first token a speculative session runs
    the baseline's torch operations, op for op (one prefill with the same shapes, the same draw); a
    drafter that copies the target's cache, or needs nothing, starts after it. A draft with a prefill
    of its own (``prefills_prompt``) runs it before the token: that is prefill work, in the TTFT,
    after the baseline's own operations."""
    logs = {}
    for key in ("baseline", name):
        s = sessions[key]
        log = _OpLog()
        with log.mode:
            s.generate(request_for(s, PLAIN[1], max_new_tokens=6, ignore_eos=True), log)
        logs[key] = log.ops
    base = logs["baseline"]
    assert any("mm" in op or "linear" in op for op, _ in base)  # the log saw the prefill
    drafter = getattr(sessions[name], "drafter", None)
    if getattr(drafter, "prefills_prompt", False):
        assert name != "self"  # the fp16 self-draft copies the target's cache
        assert logs[name][: len(base)] == base and len(logs[name]) > len(base)
    else:
        assert name in ("pld", "self")
        assert logs[name] == base


def test_prompt_lookup_accepts_multi_token_drafts(sessions):
    s = sessions["pld"]
    accepted_steps = 0
    for text in REPETITIVE:
        probe = ListProbe()
        s.generate(request_for(s, text, max_new_tokens=40, ignore_eos=True), probe)
        accepted_steps += sum(1 for step in probe.steps if len(step) > 1)
        assert sum(i.get("draft_proposed", 0) for i in probe.info) > 0
    assert accepted_steps > 0


def test_self_draft_accepts_everything(sessions):
    s = sessions["self"]
    probe = ListProbe()
    out = s.generate(request_for(s, PLAIN[1], max_new_tokens=30, ignore_eos=True), probe)
    proposed = sum(i.get("draft_proposed", 0) for i in probe.info)
    accepted = sum(i.get("draft_accepted", 0) for i in probe.info)
    assert proposed > 0 and accepted == proposed
    # 1 prefill token, then steps of num_draft_tokens (5) + 1 within the budget of 30
    assert [len(st) for st in probe.steps] == [1, 6, 6, 6, 6, 5]
    assert len(out.token_ids) == 30


@pytest.mark.parametrize(
    ("name", "reuses"), [("self", True), ("self-bf16", True), ("self-bf16-kv", True), ("self-own", False)]
)
def test_draft_prefill_from_target_skips_the_drafts_prompt_pass(sessions, name, reuses, monkeypatch):
    s = sessions[name]
    drafter = s.drafter
    fed: list[int] = []
    forward = drafter._forward
    monkeypatch.setattr(drafter, "_forward", lambda new: fed.append(len(new)) or forward(new))
    request = request_for(s, PLAIN[1], max_new_tokens=12, ignore_eos=True)
    s.generate(request, ListProbe())
    prompt_len = len(request.input_ids)
    assert (max(fed) < prompt_len) is reuses  # reused: the draft never runs the prompt
    assert drafter.cache.get_seq_length() >= prompt_len  # either way its cache holds the prompt
    # a bf16 draft on a CPU keeps its cache (and attention) in float32 unless told to use its own dtype
    expected = {"self-bf16": torch.float32, "self-bf16-kv": torch.bfloat16}.get(name, drafter.hf.model.dtype)
    assert drafter.cache.layers[0].keys.dtype == expected


@pytest.mark.parametrize("pays", [True, False])
def test_a_catch_up_draft_reads_its_prompt_between_plain_steps_then_drafts(
    sessions, baseline_outputs, pays, monkeypatch
):
    """draft_prefill = catch-up: the first token is the target's alone; then each step is a plain one
    followed by the next chunk of the draft's prefill (its time in the step's draft_ms) until the
    draft has read the prompt, then it drafts. Given up (catch_up_pays false), every later step is
    plain. Greedy output identical either way."""
    from workbench_strategies.speculative import loop

    s = sessions["truncated-catch-up"]
    monkeypatch.setattr(loop, "catch_up_pays", lambda *args: pays)
    drafter = s.drafter
    chunks: list[int] = []
    catch_up = drafter.catch_up
    monkeypatch.setattr(drafter, "catch_up", lambda n: chunks.append(catch_up(n)) or chunks[-1])
    text = PLAIN[1]
    request = request_for(s, text, max_new_tokens=37, ignore_eos=True)
    probe = ListProbe()
    out = s.generate(request, probe)
    assert out.token_ids == baseline_outputs[text]
    check_accounting(probe, out)
    n = len(request.input_ids)
    reading = -(-n // 4) if pays else 1
    assert chunks == ([4] * (n // 4) + ([n % 4] if n % 4 else []) if pays else [4])
    for info in probe.info[1 : 1 + reading]:  # a plain step and a chunk each
        assert info["draft_proposed"] == 0 and info["draft_ms"] > 0
    later = [i["draft_proposed"] for i in probe.info[1 + reading :]]
    assert (sum(later) > 0) is pays  # drafting once the prompt is read; never when given up
    if pays:
        assert drafter.cached[:n] == list(request.input_ids)


def test_a_draft_of_the_targets_own_model_starts_from_the_self_draft_prior(sessions):
    """The adaptive schedule's first draft (after the plain step that measures T1): the cap for a draft
    of the target's own model source, 2 tokens for another draft (the default prior)."""
    firsts = {}
    for name in ("self-own", "truncated"):
        s = sessions[name]
        probe = ListProbe()
        s.generate(request_for(s, PLAIN[1], max_new_tokens=20, ignore_eos=True), probe)
        assert probe.info[1]["draft_proposed"] == 0  # the plain step
        firsts[name] = probe.info[2]["draft_proposed"]
    assert firsts == {"self-own": 3, "truncated": 2}


def test_a_bounded_draft_reads_the_sinks_and_the_recent_window(sessions, monkeypatch):
    s = sessions["truncated-bounded"]
    drafter = s.drafter
    fed: list[int] = []
    forward = drafter._forward
    monkeypatch.setattr(drafter, "_forward", lambda new: fed.append(len(new)) or forward(new))
    request = request_for(s, PLAIN[1], max_new_tokens=12, ignore_eos=True)
    probe = ListProbe()
    out = s.generate(request, probe)
    prompt = list(request.input_ids)
    assert len(prompt) > 8 and fed[0] == 8  # its prefill: 8 tokens, whatever the prompt's length
    assert drafter.cached[:8] == prompt[:2] + prompt[-6:]
    assert drafter.cached[8:] == out.token_ids[: len(drafter.cached) - 8]  # then what was generated
    assert sum(i.get("draft_proposed", 0) for i in probe.info) > 0


def test_a_restricted_draft_vocabulary_proposes_only_its_subset(sessions, monkeypatch):
    s = sessions["truncated-subset"]
    drafter = s.drafter
    proposals: list[int] = []
    propose = drafter.propose
    monkeypatch.setattr(drafter, "propose", lambda t, m: (d := propose(t, m), proposals.extend(d.tokens))[0])
    request = request_for(s, PLAIN[1], max_new_tokens=30, ignore_eos=True)
    s.generate(request, ListProbe())
    allowed = set(range(60)) | set(request.input_ids)
    assert proposals and set(proposals) <= allowed
    assert int(drafter.subset_weight.shape[0]) == len(allowed & set(range(drafter.vocab_limit)))


def test_draft_prefill_from_target_needs_the_same_architecture(models):
    with pytest.raises(StrategyError, match="draft_prefill = 'from-target' needs"):
        load(models["target"], SPEC, draft=str(models["truncated"]), draft_prefill="from-target")


def test_heuristic_draft_length_grows_when_everything_is_accepted(models):
    s = load(models["target"], SPEC, draft=str(models["target"]), num_draft_tokens=2, schedule="heuristic")
    probe = ListProbe()
    s.generate(request_for(s, PLAIN[1], max_new_tokens=40, ignore_eos=True), probe)
    proposed = [i["draft_proposed"] for i in probe.info[1:]]
    assert proposed[:3] == [2, 4, 4]  # +2 per fully accepted step, capped at 2 x num_draft_tokens
    # a new request starts again from num_draft_tokens
    probe2 = ListProbe()
    s.generate(request_for(s, PLAIN[1], max_new_tokens=40, ignore_eos=True), probe2)
    assert probe2.info[1]["draft_proposed"] == 2


def test_different_draft_rejects_some_and_still_matches(sessions):
    s = sessions["random"]
    probe = ListProbe()
    s.generate(request_for(s, PLAIN[1], max_new_tokens=40, ignore_eos=True), probe)
    proposed = sum(i.get("draft_proposed", 0) for i in probe.info)
    accepted = sum(i.get("draft_accepted", 0) for i in probe.info)
    assert accepted < proposed  # a random draft: the rejection path really ran


@pytest.mark.parametrize("name", ["pld", "self", "random"])
def test_eos_inside_an_accepted_run_stops_there(sessions, name):
    s = sessions[name]
    text = REPETITIVE[0]
    full = s.generate(request_for(s, text, max_new_tokens=30, ignore_eos=True), ListProbe())
    eos = full.token_ids[7]  # pretend the 8th token is EOS
    cut = full.token_ids.index(eos) + 1
    saved = s.hf.eos_ids
    s.hf.eos_ids = frozenset({eos})
    try:
        probe = ListProbe()
        out = s.generate(request_for(s, text, max_new_tokens=30), probe)
        ignored = s.generate(request_for(s, text, max_new_tokens=30, ignore_eos=True), ListProbe())
    finally:
        s.hf.eos_ids = saved
    assert out.token_ids == full.token_ids[:cut]
    assert out.finish_reason == "eos"
    check_accounting(probe, out)
    assert ignored.token_ids == full.token_ids and ignored.finish_reason == "length"


@pytest.mark.parametrize("name", ["pld", "self"])
def test_stop_string(sessions, name):
    s = sessions[name]
    base = sessions["baseline"]
    text = REPETITIVE[1]
    full = s.generate(request_for(s, text, max_new_tokens=30, ignore_eos=True), ListProbe())
    word = full.text.split()[6]
    kw = dict(max_new_tokens=30, ignore_eos=True, stop=(word,))
    probe = ListProbe()
    out = s.generate(request_for(s, text, **kw), probe)
    expected = base.generate(request_for(base, text, **kw), ListProbe())
    assert out.finish_reason == "stop" == expected.finish_reason
    assert out.token_ids == expected.token_ids
    assert len(out.token_ids) < len(full.token_ids)
    check_accounting(probe, out)


def test_cancel_propagates(sessions):
    s = sessions["self"]
    with pytest.raises(Cancelled):
        s.generate(request_for(s, PLAIN[0], max_new_tokens=30, ignore_eos=True), ListProbe(cancel_after=2))


@pytest.mark.parametrize("name", ["pld", "truncated"])
def test_the_runner_accepts_the_outputs(sessions, name):
    runner = TrialRunner(sessions[name], Device("cpu"))
    for prompt, temperature in [
        (Prompt(id="raw", prompt=REPETITIVE[0]), 0.0),
        (Prompt(id="chat", messages=({"role": "user", "content": REPETITIVE[1]},)), 0.8),
    ]:
        plan = trial_plan(prompt, 21, temperature=temperature, top_p=0.9, seed=5, ignore_eos=True)
        result = runner.run(plan)
        assert result.status == "ok", result.record.error
        assert result.record.output_tokens == 21
        assert sum(st["n_tokens"] for st in result.steps) == 21
        assert result.record.draft_tokens_accepted <= result.record.draft_tokens_proposed
        assert sum(st["draft_proposed"] for st in result.steps) == result.record.draft_tokens_proposed


# --- sampling: the output distribution is the target's --------------------------------------------


def _chi2_critical(df: int, z: float = 3.09) -> float:
    """Chi-square quantile (Wilson-Hilferty); z = 3.09: p = 0.001, a chance failure once in 1000 runs."""
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def _exact_distributions(session, request):
    """Exact target probabilities of (t1, t2) and of t3 under the baseline's sampling distribution."""
    from workbench_strategies._hf import Sampler

    model = session.hf.model
    sampler = Sampler(request, torch.device("cpu"))

    def probs(seq):
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([seq])).logits[:, -1, :]
        return sampler.probs(logits)[0].double()

    prompt = list(request.input_ids)
    p1 = probs(prompt)
    pair: dict[tuple[int, int], float] = {}
    third: dict[int, float] = {}
    for t1 in torch.nonzero(p1).flatten().tolist():
        p2 = probs([*prompt, t1])
        for t2 in torch.nonzero(p2).flatten().tolist():
            w = float(p1[t1] * p2[t2])
            pair[(t1, t2)] = w
            p3 = probs([*prompt, t1, t2])
            for t3 in torch.nonzero(p3).flatten().tolist():
                third[t3] = third.get(t3, 0.0) + w * float(p3[t3])
    return pair, third


def _chi2(counts: dict, probs: dict, n: int) -> tuple[float, int]:
    """Pearson's statistic, cells with an expected count under 5 pooled into one."""
    assert set(counts) <= set(probs)  # never a token outside the target's support
    cells = [(counts.get(key, 0), n * p) for key, p in probs.items()]
    big = [c for c in cells if c[1] >= 5]
    small = [c for c in cells if c[1] < 5]
    if small:
        big.append((sum(c[0] for c in small), sum(c[1] for c in small)))
    return sum((o - e) ** 2 / e for o, e in big), len(big) - 1


@pytest.fixture
def with_schedule(monkeypatch):
    """Set a session's draft schedule for one test. ``adaptive`` also gets a fixed cost (0.25 of a plain
    step per draft token) and a measured unit from the start, so it drafts from the first decode step
    and its choices follow the acceptance alone (deterministic given the seed): 2 tokens first, a
    plain step after a rejection of both."""
    import dataclasses

    from workbench_strategies.speculative.schedule import Adaptive

    def apply(session, schedule: str) -> None:
        drafter = session.drafter
        monkeypatch.setattr(drafter, "config", dataclasses.replace(drafter.config, schedule=schedule))
        if schedule == "adaptive":
            monkeypatch.setattr(Adaptive, "step_cost", lambda self, k: 1.0 + 0.25 * k)
            init = Adaptive.__init__

            def measured(self, cap, **kwargs):
                init(self, cap, **kwargs)
                self.plain.append(1.0)

            monkeypatch.setattr(Adaptive, "__init__", measured)

    return apply


@pytest.mark.parametrize(
    ("name", "both_paths", "schedule"),
    [
        (name, True, schedule)
        for name in ("truncated", "truncated-subset", "truncated-bounded")
        for schedule in ("fixed", "adaptive")
    ]
    # catch-up: the second token is a plain step (and the whole prompt's chunk), then drafts
    + [("truncated-catch-up-64", True, "fixed")],
)
def test_sampling_matches_the_target_distribution(sessions, name, both_paths, schedule, with_schedule):
    s = sessions[name]
    with_schedule(s, schedule)
    text = REPETITIVE[0]
    n = 300
    # 4 tokens, the first 3 checked: under adaptive the third comes from a step whose draft length
    # depends on what the step before accepted
    kw = dict(max_new_tokens=4, ignore_eos=True, temperature=1.0, top_k=3)
    pair_p, third_p = _exact_distributions(s, request_for(s, text, **kw))
    pairs: dict = {}
    thirds: dict = {}
    proposed = accepted = 0
    lengths: set = set()  # the draft lengths of each request's steps
    for seed in range(n):
        probe = ListProbe()
        out = s.generate(request_for(s, text, seed=seed, **kw), probe)
        key = tuple(out.token_ids[:2])
        pairs[key] = pairs.get(key, 0) + 1
        thirds[out.token_ids[2]] = thirds.get(out.token_ids[2], 0) + 1
        proposed += sum(i.get("draft_proposed", 0) for i in probe.info)
        accepted += sum(i.get("draft_accepted", 0) for i in probe.info)
        lengths.add(tuple(i["draft_proposed"] for i in probe.info[1:]))
    assert accepted < proposed  # the rejection path ran
    if schedule == "adaptive":  # both of its choices after the first step ran
        assert {(2, 0, 0), (2, 0)} <= lengths, lengths
    assert accepted > 0 or not both_paths  # and the acceptance path (a random draft: rarely)
    for counts, probs in ((pairs, pair_p), (thirds, third_p)):
        stat, df = _chi2(counts, probs, n)
        assert stat < _chi2_critical(df), (stat, df, counts, probs)


@pytest.mark.parametrize("draft_kind", ["point-mass", "sampled"])
def test_rejection_rule_reproduces_the_target_distribution(draft_kind):
    """The verify rule alone, on a 4-token vocabulary: whatever the draft, the first emitted token is
    distributed as p (incl. a draft token p gives no mass, which must always be rejected)."""
    from workbench_strategies._hf import Sampler
    from workbench_strategies.speculative.loop import Draft, _accept

    p = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.2, 0.3, 0.4]])
    q = torch.tensor([0.1, 0.5, 0.1, 0.3])
    sampler = Sampler(
        Request(prompt=Prompt(id="x"), input_ids=(1,), max_new_tokens=2, temperature=1.0, seed=11),
        torch.device("cpu"),
    )
    logits = torch.log(p)  # temperature 1: sampler.probs(logits) == p
    draws = torch.Generator().manual_seed(3)
    n = 4000
    counts: dict = {}
    accepted_total = 0
    for _ in range(n):
        if draft_kind == "point-mass":
            draft = Draft([1])  # always proposes token 1; p(1) = 0.3
        else:
            draft = Draft([int(torch.multinomial(q, 1, generator=draws))], q[None, :])
        tokens, accepted = _accept(logits, draft, sampler)
        assert len(tokens) == accepted + 1
        counts[tokens[0]] = counts.get(tokens[0], 0) + 1
        accepted_total += accepted
    expected = {t: float(p[0, t]) for t in range(4) if p[0, t] > 0}
    stat, df = _chi2(counts, expected, n)
    assert stat < _chi2_critical(df), (stat, counts)
    # acceptance probability: p(x) for a point mass, sum_x min(p(x), q(x)) for a sampled draft
    rate = 0.3 if draft_kind == "point-mass" else float(torch.minimum(p[0], q).sum())
    assert abs(accepted_total / n - rate) < 4 * (rate * (1 - rate) / n) ** 0.5


def test_sampling_is_seeded(sessions, with_schedule):
    s = sessions["truncated"]
    with_schedule(s, "fixed")  # adaptive choices follow the clock, and the draws follow the choices
    kw = dict(max_new_tokens=20, ignore_eos=True, temperature=1.2, top_p=0.95)
    a = s.generate(request_for(s, PLAIN[1], seed=3, **kw), ListProbe())
    b = s.generate(request_for(s, PLAIN[1], seed=3, **kw), ListProbe())
    assert a.token_ids == b.token_ids and len(a.token_ids) == 20


# --- refusals ------------------------------------------------------------------------------------------


def test_draft_is_required():
    with pytest.raises(SpecError, match="draft"):
        parse_spec(
            f'[[variants]]\nname = "v"\nmodel = "x"\nstrategy = "{SPEC}"\n[[workloads]]\nname = "code"\n'
        )


def test_different_tokenizer_is_refused(models):
    with pytest.raises(StrategyError, match="different tokenizers are not supported"):
        load(models["target"], SPEC, draft=str(models["other_vocab"]))


def test_draft_larger_than_target_is_refused(models):
    with pytest.raises(StrategyError, match="draft larger than the target"):
        load(models["target"], SPEC, draft=str(models["larger"]))


def test_different_tokenizer_with_same_size_is_refused(models, tmp_path):
    # same vocabulary size, two ids swapped: the probe string / vocab comparison catches it
    import json

    dst = tmp_path / "swapped"
    shutil.copytree(models["random"], dst)
    data = json.loads((dst / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    vocab["the"], vocab["a"] = vocab["a"], vocab["the"]
    (dst / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(StrategyError, match="different tokenizers are not supported"):
        load(models["target"], SPEC, draft=str(dst))


def test_prompt_lookup_finds_the_most_recent_longest_match():
    from workbench_strategies.prompt_lookup import find_draft

    seq = [1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 2, 3]
    # suffix (2, 3): latest earlier match at index 5; the n-gram's length comes back too (Draft.kind)
    assert find_draft(seq, 3, 1, 3) == ([7, 8, 5], 2)
    assert find_draft([4, 5, 6], 3, 1, 5) == ([], 0)
    assert find_draft([4, 5, 4], 3, 1, 5) == ([5, 4], 1)
    assert find_draft([4, 5, 4], 3, 2, 5) == ([], 0)  # min_ngram_size 2: a 1-token match is not enough
