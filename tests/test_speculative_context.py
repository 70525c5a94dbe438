"""The part of the prompt a draft reads (``draft_context`` / ``draft_sinks``) and whether a catch-up
prefill pays (workbench_strategies.speculative.context: bookkeeping, no torch), and the checks of
their spec keys."""

from __future__ import annotations

import pytest
from workbench_strategies.speculative.context import PromptView, catch_up_pays, prior_speedup
from workbench_strategies.speculative.schedule import Adaptive

from workbench.core.errors import SpecError
from workbench.testing.helpers import load_session


def test_a_bounded_view_keeps_the_sinks_and_the_recent_window_then_everything_generated():
    prompt = list(range(100, 120))  # 20 tokens
    view = PromptView(prompt, context=8, sinks=2)
    assert view.prompt == [100, 101, 114, 115, 116, 117, 118, 119]
    assert view.skipped == 12
    # generated tokens follow the window, whatever their number
    assert view([*prompt, 7, 8, 9]) == [*view.prompt, 7, 8, 9]


@pytest.mark.parametrize(("context", "sinks"), [(0, 4), (20, 4), (50, 0)])
def test_a_prompt_within_the_context_is_read_whole(context, sinks):
    prompt = list(range(20))
    view = PromptView(prompt, context=context, sinks=sinks)
    assert view.prompt == prompt and view.skipped == 0
    assert view([*prompt, 5]) == [*prompt, 5]


def test_no_sinks_is_a_plain_recent_window():
    assert PromptView(list(range(10)), context=3, sinks=0).prompt == [7, 8, 9]


def test_the_prior_speedup_is_the_adaptive_schedules_best_length_under_its_priors():
    a = Adaptive.PRIOR_ACCEPTANCE
    c = Adaptive.PRIOR_COST
    by_length = [sum(a**i for i in range(k + 1)) / (1 + c * k) for k in range(1, 7)]
    assert prior_speedup(6) == pytest.approx(max(by_length))
    assert prior_speedup(1) == pytest.approx(by_length[0])
    assert 1.0 < prior_speedup(1) <= prior_speedup(6)


def test_a_catch_up_pays_when_the_tokens_left_repay_the_rest_of_the_prefill():
    # 256 prompt tokens left at 3 ms each = 768 ms; 2 chunks of 128 ride on 2 plain steps
    kw = dict(prompt_left=256, ms_per_prompt_token=3.0, t1_ms=40.0, chunk=128, speedup=2.0)
    # 200 tokens left: 198 after the chunks save 198 * 40 * 0.5 = 3,960 ms > 768
    assert catch_up_pays(tokens_left=200, **kw)
    # 16 tokens left (a chat answer): 14 * 20 = 280 ms < 768
    assert not catch_up_pays(tokens_left=16, **kw)
    # the boundary: saved = (n - 2) * 20 must exceed 768, so n - 2 > 38.4
    assert not catch_up_pays(tokens_left=40, **kw) and catch_up_pays(tokens_left=41, **kw)


def test_a_catch_up_never_pays_without_a_speedup_and_always_when_done():
    assert not catch_up_pays(10, 0.1, 40.0, 10_000, 128, 1.0)
    assert catch_up_pays(0, 1e9, 40.0, 1, 128, 1.0)  # nothing left to read


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"draft_prefill_chunk": 0}, "draft_prefill_chunk must be at least 1"),
        ({"draft_context": -1}, "draft_context and draft_sinks must be 0 or more"),
        ({"draft_context": 4, "draft_sinks": 4}, "must be fewer than draft_context"),
        ({"draft_context": 64, "draft_prefill": "from-target"}, "bounds a draft's own prefill"),
        ({"draft_prefill": "later"}, "draft_prefill"),
    ],
)
def test_bad_context_keys_are_refused_in_one_line(tiny_model_dir, params, message):
    pytest.importorskip("torch")
    with pytest.raises(SpecError, match=message) as info:
        load_session(
            tiny_model_dir, "workbench_strategies.speculative:SpeculativeStrategy", draft="x", **params
        )
    assert "\n" not in str(info.value)
