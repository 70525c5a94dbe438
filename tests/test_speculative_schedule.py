"""The draft schedules of the shared draft → verify loop (workbench_strategies.speculative.schedule): the
adaptive one's choices from acceptance and cost, its plain steps and probes; fixed and heuristic; the
``schedule`` key. None of it needs torch: the schedule is bookkeeping, and a test here checks that it
(and the speculative strategy's module, and the shared HF session) imports with torch blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from workbench_strategies.speculative.schedule import Adaptive, Schedule

from workbench.core.errors import SpecError
from workbench.spec.parse import parse_spec

SPEC = "workbench_strategies.speculative:SpeculativeStrategy"


def test_the_schedule_imports_without_torch():
    """In a fresh interpreter where ``import torch`` fails (as where torch is not installed), the
    schedule, the speculative strategy and the shared HF session import, torch stays out, and the
    adaptive schedule runs."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # `import torch` raises ImportError from here on
        sys.modules["transformers"] = None
        from workbench_strategies.speculative.schedule import Adaptive, Schedule
        import workbench_strategies.speculative, workbench_strategies.hf_session
        plan = Schedule("adaptive", 4).start()
        assert isinstance(plan, Adaptive) and plan.next_k(10) == 0
        plan.update(0, 0, None, 10.0)
        assert plan.next_k(10) > 0
        assert sys.modules["torch"] is None and sys.modules["transformers"] is None
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("", "adaptive"),
        ("adaptive = false\n", "fixed"),
        ('schedule = "heuristic"\n', "heuristic"),
        ('adaptive = false\nschedule = "fixed"\n', "fixed"),
    ],
)
def test_the_schedule_key_and_the_older_adaptive_switch(keys, expected):
    spec = parse_spec(
        f'[[variants]]\nname = "v"\nmodel = "x"\nstrategy = "{SPEC}"\ndraft = "y"\n{keys}'
        '[[workloads]]\nname = "code"\n'
    )
    assert spec.variants[0].config.draft_schedule == expected


def test_adaptive_false_contradicting_the_schedule_is_refused():
    with pytest.raises(SpecError, match="adaptive = false contradicts schedule = 'heuristic'"):
        parse_spec(
            f'[[variants]]\nname = "v"\nmodel = "x"\nstrategy = "{SPEC}"\ndraft = "y"\nadaptive = false\n'
            'schedule = "heuristic"\n[[workloads]]\nname = "code"\n'
        )


def drive(plan, accept, *, t1: float = 10.0, per_token: float, steps: int, room: int = 100, slow=()):
    """Run ``plan`` for ``steps`` steps against a drafter whose i-th draft token (0-based) is accepted
    when ``accept(step, i)``, with steps costing ``t1 * (1 + per_token * k)`` ms (3x that for the steps
    in ``slow``: the OS ran something else); the draft lengths."""
    lengths = []
    for step in range(steps):
        k = plan.next_k(room)
        lengths.append(k)
        accepted = 0
        while accepted < k and accept(step, accepted):
            accepted += 1
        cost = t1 * (1 + per_token * k) * (3 if step in slow else 1)
        plan.update(k, accepted, 0.1 * cost if k else None, 0.9 * cost if k else cost)
    return lengths


def test_the_first_step_is_plain_and_measures_the_unit():
    plan = Adaptive(6)
    assert plan.next_k(50) == 0
    plan.update(0, 0, None, 20.0)
    assert plan.t1() == 20.0
    assert plan.next_k(50) > 0  # the prior says drafting may pay: try


def test_a_draft_that_always_agrees_drafts_the_cap():
    lengths = drive(Adaptive(6), lambda step, i: True, per_token=0.1, steps=40)
    assert lengths[0] == 0
    assert lengths[-10:].count(6) >= 9  # the cap, but for a plain step now and then
    # plain steps that refresh the unit: after 4, 8 and then every 16 draft steps, no more
    assert lengths.count(0) <= 4


def test_a_draft_that_never_agrees_falls_back_to_plain_decoding_and_probes():
    cheap = drive(Adaptive(10), lambda step, i: False, per_token=0.1, steps=200)
    assert cheap[:2] == [0, 2]  # measure the unit, try the prior's length
    drafts = [k for k in cheap[10:] if k]
    assert drafts and set(drafts) == {1}  # only one-token probes
    # a cheap draft probes often, an expensive one rarely: each near the probe budget
    costly = drive(Adaptive(10), lambda step, i: False, per_token=0.6, steps=200)
    assert 0 < sum(costly[10:]) < sum(cheap[10:])
    for lengths, per_token in ((cheap, 0.1), (costly, 0.6)):
        time = sum(1 + per_token * k for k in lengths[10:])
        assert time / len(lengths[10:]) < 1.03  # within ~3 % of plain decoding


def test_it_follows_the_text_from_free_prose_into_a_copied_span():
    # positions accepted from step 60 on (prompt lookup reaching text it copies)
    lengths = drive(Adaptive(10), lambda step, i: step >= 60, per_token=0.1, steps=100)
    assert sum(lengths[20:60]) < 20  # probes only
    assert sum(lengths[80:]) >= 8 * 18  # drafting the cap again, within a few probes


def test_acceptance_by_position_sets_the_length():
    # the first two draft tokens are always accepted, the third never: drafting 2 or 3 is best
    lengths = drive(Adaptive(8), lambda step, i: i < 2, per_token=0.1, steps=60)
    assert set(lengths[20:]) <= {0, 2, 3}
    assert lengths[20:].count(2) + lengths[20:].count(3) >= 30


def test_the_estimates_are_robust_to_a_slow_step():
    plan = Adaptive(6)
    drive(plan, lambda step, i: True, per_token=0.1, steps=20)
    plan.update(0, 0, None, 500.0)  # one plain step preempted by the OS: 50x slower
    assert plan.t1() == pytest.approx(10.0)
    assert plan.cost_per_token() == pytest.approx(0.1)


def test_a_slowed_step_early_on_does_not_stop_a_draft_that_pays():
    # a draft model at 0.6 of a target step per token that always agrees: k = 6 gives 7 tokens per
    # 4.6 steps' time; its first draft step slowed 3x alone says drafting costs more than it gives
    lengths = drive(Adaptive(6), lambda step, i: True, per_token=0.6, steps=30, slow={1})
    assert lengths[:3] == [0, 2, 6]
    assert lengths[2:].count(6) >= 25
    # two in a row stop it for a while: a probe finds the way back
    lengths = drive(Adaptive(6), lambda step, i: True, per_token=0.6, steps=40, slow={1, 2})
    assert lengths[-15:].count(6) >= 14


def test_a_length_is_priced_by_what_it_cost():
    # a CPU whose 2-token verify (k = 1) costs 1.5 plain steps while longer ones cost ~1.1 (the matrix
    # kernels change with the row count); the first draft token is always accepted, no other: k = 2
    # (2 tokens per 1.1) beats k = 1 (2 tokens per 1.5), which the per-token line would pick
    plan = Adaptive(6)
    lengths = []
    for _ in range(60):
        k = plan.next_k(100)
        lengths.append(k)
        accepted = min(k, 1)
        cost = 10.0 * (1.5 if k == 1 else 1.0 + 0.05 * k)
        plan.update(k, accepted, 0.1 * cost if k else None, 0.9 * cost if k else cost)
    assert plan.step_cost(1) > plan.step_cost(2) + 0.1  # the line alone: 1.05 < 1.1
    assert lengths[20:].count(2) >= 30


def drive_free(
    plan,
    agrees,
    *,
    kind=lambda n: None,
    t1: float = 10.0,
    per_token: float = 0.1,
    tokens: int = 100,
    starts=None,
):
    """Run ``plan`` the way the loop runs it for a free drafter (``free_drafts``: it proposes first, the
    length is chosen knowing the proposal's kind and length, a proposal not drafted is a shadow) over
    ``tokens`` target tokens. The proposal at sequence length ``n`` has ``Draft.kind`` ``kind(n)`` and
    its token ``i`` is right when ``agrees(n, i)``. The draft lengths (and each step's ``n`` appended to
    ``starts``, if given)."""
    target = list(range(1000, 1000 + tokens))
    seq: list[int] = [target[0]]
    lengths = []
    while len(seq) < tokens:
        plan.follow(seq)
        n = len(seq)
        proposal = [target[n + i] if agrees(n, i) else -1 for i in range(plan.cap) if n + i < tokens]
        k = plan.next_k(tokens - n, kind=kind(n), available=len(proposal))
        lengths.append(k)
        if starts is not None:
            starts.append(n)
        if k:
            plan.drop_shadows()
        else:
            plan.open_shadow(n, proposal, kind(n))
        draft = proposal[:k]
        accepted = 0
        while accepted < len(draft) and draft[accepted] == target[n + accepted]:
            accepted += 1
        seq.extend(target[n : n + accepted + 1])
        cost = t1 * (1 + per_token * len(draft))
        plan.update(
            len(draft), accepted, 0.1 * cost if draft else None, 0.9 * cost if draft else cost, kind(n)
        )
    return lengths


def test_a_free_drafter_that_never_agrees_never_drafts():
    # prompt lookup on text it cannot copy: the shadow drafts show it before any draft is paid for
    lengths = drive_free(Adaptive(10, free_drafts=True), lambda n, i: False)
    assert sum(lengths) == 0
    # a drafter that costs something probes instead (the prior's first try, then one-token probes)
    probing = drive_free(Adaptive(10), lambda n, i: False)
    assert sum(probing) > 0


def test_shadow_drafts_find_a_copied_span_at_once():
    # free prose up to token 50, then a span the lookup can copy: drafting starts on its first steps
    lengths = drive_free(Adaptive(10, free_drafts=True), lambda n, i: n + i >= 50, tokens=120)
    assert sum(lengths[:45]) == 0
    first = next(i for i, k in enumerate(lengths) if k)
    assert 48 <= first <= 53
    assert max(lengths) == 10


def test_a_free_drafter_drafts_the_kinds_of_draft_that_pay():
    # prompt lookup on abstractive text: mostly 1-gram matches, always wrong; now and then a 3-gram
    # match that the text continues for 6 tokens. Pooled, the acceptance is too low to draft; per kind,
    # the 3-gram drafts pay and the 1-gram ones never run.
    def kind(n):
        return 3 if n % 10 == 0 else 1

    starts: list[int] = []
    right = lambda n, i: kind(n) == 3 and i < 6  # noqa: E731
    lengths = drive_free(Adaptive(10, free_drafts=True), right, kind=kind, tokens=300, starts=starts)
    steps = list(zip(lengths, starts, strict=True))
    assert all(k == 0 for k, n in steps[20:] if kind(n) == 1)
    assert sum(k >= 6 for k, n in steps[20:] if kind(n) == 3) >= 10
    pooled = drive_free(Adaptive(10, free_drafts=True), right, tokens=300)
    assert sum(pooled[20:]) == 0  # the same drafts without their kind: never pays


def test_shadows_score_each_position_as_its_token_arrives():
    plan = Adaptive(4, free_drafts=True)
    plan.open_shadow(3, [7, 8, 9, 10])
    plan.follow([0, 1, 2, 7])  # the first position matched, the rest undecided: counted already
    assert plan.tried == [1.0, 0.0, 0.0, 0.0] and plan.taken == [1.0, 0.0, 0.0, 0.0]
    plan.open_shadow(4, [9, 3])  # the next plain step's shadow, open beside the first
    plan.follow([0, 1, 2, 7, 8])  # the first's second position matched; the second's first did not
    assert plan.tried == pytest.approx([1.85, 1.0, 0.0, 0.0])
    assert plan.taken == pytest.approx([0.85, 1.0, 0.0, 0.0])
    assert len(plan.shadows) == 1
    plan.follow([0, 1, 2, 7, 8, 5])  # the first's third position failed: closed
    assert plan.tried[2] == 1.0 and plan.taken[2] == 0.0 and plan.shadows == []
    plan.open_shadow(6, [1, 2])
    plan.drop_shadows()  # a real draft follows: its verify decides these positions
    plan.follow([0, 1, 2, 7, 8, 5, 1, 2])
    assert plan.tried[2] == pytest.approx(0.85)  # faded once by the new shadow, nothing added
    plan.open_shadow(8, [])  # the lookup found nothing: no evidence, no fading
    assert plan.tried[2] == pytest.approx(0.85)


def test_never_more_than_the_room():
    plan = Adaptive(6)
    drive(plan, lambda step, i: True, per_token=0.1, steps=10)
    assert plan.next_k(2) <= 2
    assert plan.next_k(0) == 0


def test_fixed_and_heuristic():
    fixed = Schedule("fixed", 4).start()
    assert [fixed.next_k(r) for r in (10, 3)] == [4, 3]
    heuristic = Schedule("heuristic", 2).start()
    got = []
    for accepted_all in (True, True, False, False, False):
        k = heuristic.next_k(10)
        got.append(k)
        heuristic.update(k, k if accepted_all else 0, 1.0, 1.0)
    assert got == [2, 4, 4, 3, 2]  # +2 up to twice the start, -1 down
    with pytest.raises(ValueError, match="unknown draft schedule"):
        Schedule("sometimes", 2).start()  # type: ignore[arg-type]


def test_a_self_drafts_prior_starts_at_the_cap():
    """The first draft after the plain step that measures T1: 2 tokens under the default prior (0.6),
    the cap under a self-draft's (0.9); the evidence takes over from there."""
    default, own = Adaptive(6), Adaptive(6, prior=Adaptive.SELF_DRAFT_PRIOR)
    for plan in (default, own):
        plan.update(0, 0, None, 10.0)
    assert default.next_k(15) == 2 and own.next_k(15) == 6
    for _ in range(3):  # a self-draft that keeps being rejected at once: its drafts shrink
        own.update(own.next_k(15), 0, 4.0, 12.0)
    assert own.next_k(15) < 6
