"""``prefix-cache``: KV reuse across requests — identical output, honest token accounting, no corruption
of the shared entries, reset and eviction."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workbench.core.device import Device  # noqa: E402
from workbench.core.strategy import Prompt, Request  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402
from workbench.testing.helpers import ListProbe, tiny_prompt, trial_plan  # noqa: E402
from workbench.testing.helpers import load_session as load  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def baseline(tiny_model_dir):
    return load(tiny_model_dir, "baseline")


# A conversation: every turn's prompt starts with the previous turn's prompt.
TURNS = [tiny_prompt(30, 0)]
for i in range(1, 4):
    TURNS.append(TURNS[-1] + " " + tiny_prompt(15, 40 * i))


def ask(session, text, prompt_id, max_new_tokens=12):
    prompt = Prompt(id=prompt_id, prompt=text)
    request = Request(
        prompt=prompt, input_ids=tuple(session.encode(prompt)), max_new_tokens=max_new_tokens, ignore_eos=True
    )
    probe = ListProbe()
    out = session.generate(request, probe)
    assert probe.tokens == out.token_ids
    return request, out


def test_growing_history_reuses_the_previous_turn_and_matches_the_baseline(tiny_model_dir, baseline):
    s = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=4)
    previous = 0
    for i, text in enumerate(TURNS):
        request, out = ask(s, text, f"turn-{i}")
        _, expected = ask(baseline, text, f"turn-{i}")
        assert out.token_ids == expected.token_ids
        if i == 0:
            assert out.cached_tokens == 0
        else:  # the whole previous prompt came from the cache, only the new turn was prefilled
            assert out.cached_tokens == previous
        previous = len(request.input_ids)
        assert out.trimmed_tokens == 0


def test_shared_entries_are_copied_not_corrupted(tiny_model_dir, baseline):
    """Two different continuations of the same cached prefix: the second must not see the first's
    decode steps in the cache (passing the stored cache without copying does exactly that)."""
    s = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=4, reset="never")
    ask(s, TURNS[0], "root")
    for i, suffix in enumerate([tiny_prompt(10, 91), tiny_prompt(10, 133)]):
        text = TURNS[0] + " " + suffix
        _, out = ask(s, text, f"branch-{i}", max_new_tokens=20)
        _, expected = ask(baseline, text, f"branch-{i}", max_new_tokens=20)
        assert out.cached_tokens > 0
        assert out.token_ids == expected.token_ids


def test_reset_on_repeat_and_never(tiny_model_dir):
    on_repeat = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=4)
    never = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=4, reset="never")
    for s in (on_repeat, never):
        ask(s, TURNS[0], "turn-0")
        ask(s, TURNS[1], "turn-1")
    # the next repetition starts: turn-0 again
    request, again = ask(on_repeat, TURNS[0], "turn-0")
    assert again.cached_tokens == 0  # a fresh pass
    request, again = ask(never, TURNS[0], "turn-0")
    assert again.cached_tokens == len(request.input_ids) - 1  # all but the token whose logits we need


def test_short_shared_prefixes_and_eviction(tiny_model_dir):
    s = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=1000)
    ask(s, TURNS[0], "a")
    assert ask(s, TURNS[1], "b")[1].cached_tokens == 0  # shared, but below min_prefix_tokens
    tiny_budget = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=4, max_cached_tokens=5)
    ask(tiny_budget, TURNS[0], "a")
    assert ask(tiny_budget, TURNS[1], "b")[1].cached_tokens == 0  # evicted: over the budget
    assert tiny_budget.entries == []


def test_the_runner_records_cached_tokens(tiny_model_dir):
    s = load(tiny_model_dir, "prefix-cache", min_prefix_tokens=4)
    runner = TrialRunner(s, Device("cpu"))
    first = runner.run(trial_plan(prompt=Prompt(id="t0", prompt=TURNS[0])))
    second = runner.run(trial_plan(prompt=Prompt(id="t1", prompt=TURNS[1])))
    assert first.status == second.status == "ok"
    assert first.record.cached_tokens == 0
    assert second.record.cached_tokens == first.record.input_tokens
    assert second.record.trimmed_tokens == 0


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [("max_cached_tokens", 0, "max_cached_tokens must be at least 1"), ("reset", '"sometimes"', "reset")],
)
def test_bad_parameters(key, value, problem):
    from workbench.core.errors import SpecError

    with pytest.raises(SpecError, match=problem):
        parse_spec(
            f'[[variants]]\nname = "v"\nmodel = "x"\nstrategy = "prefix-cache"\n{key} = {value}\n'
            '[[workloads]]\nname = "code"\n'
        )
