"""``context-trim``: the policies on their own, then the strategy on a tiny model through the runner."""

from __future__ import annotations

import pytest
from workbench_strategies.context_trim import drop_oldest_turns, trim_middle


def test_trim_middle_keeps_head_and_tail():
    ids = list(range(100))
    assert trim_middle(ids, 20, 0.25) == [*range(5), *range(85, 100)]
    assert trim_middle(ids, 100, 0.25) == ids  # within the budget: untouched
    assert trim_middle(ids, 10, 0.0) == list(range(90, 100))
    assert trim_middle(ids, 10, 1.0) == list(range(10))


def _encode(messages):
    """One 'token' per word plus two per message for the template."""
    return [0] * sum(2 + len(m["content"].split()) for m in messages)


CHAT = (
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "one two three four"},
    {"role": "assistant", "content": "a b c d e f"},
    {"role": "user", "content": "five six"},
    {"role": "assistant", "content": "g h i j"},
    {"role": "user", "content": "last question"},
)


def test_oldest_turns_go_in_pairs_and_keep_system_and_last_question():
    full = len(_encode(CHAT))
    kept, ids = drop_oldest_turns(CHAT, _encode, full)
    assert kept == CHAT  # fits
    kept, ids = drop_oldest_turns(CHAT, _encode, full - 1)
    assert kept == (CHAT[0], *CHAT[3:])  # the first question and its answer went together
    assert len(ids) <= full - 1
    kept, ids = drop_oldest_turns(CHAT, _encode, 3)
    assert kept == (CHAT[0], CHAT[-1])  # never below the last user message
    assert len(ids) > 3  # the caller cuts the rest in the middle


torch = pytest.importorskip("torch")

from workbench.core.device import Device  # noqa: E402
from workbench.core.strategy import Prompt  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402
from workbench.testing.helpers import load_session as load  # noqa: E402
from workbench.testing.helpers import tiny_prompt, trial_plan  # noqa: E402


@pytest.fixture(scope="module")
def runners(tiny_model_dir):
    make = lambda s: TrialRunner(s, Device("cpu"))  # noqa: E731
    return {
        "baseline": make(load(tiny_model_dir, "baseline")),
        "trim": make(load(tiny_model_dir, "context-trim", max_input_tokens=24)),
        "trim-middle": make(load(tiny_model_dir, "context-trim", max_input_tokens=24, policy="middle")),
    }


def test_within_the_budget_nothing_changes(runners):
    prompt = Prompt(id="short", prompt=tiny_prompt(10))
    base = runners["baseline"].run(trial_plan(prompt=prompt, max_new_tokens=12))
    trim = runners["trim"].run(trial_plan(prompt=prompt, max_new_tokens=12))
    assert trim.record.trimmed_tokens == 0
    assert trim.record.output_token_ids == base.record.output_token_ids


def test_a_long_prompt_is_cut_to_the_budget(runners):
    prompt = Prompt(id="long", prompt=tiny_prompt(80, 3))
    trim = runners["trim"].run(trial_plan(prompt=prompt, max_new_tokens=12))
    assert trim.status == "ok"
    assert trim.record.input_tokens - trim.record.trimmed_tokens == 24  # what the model prefilled
    assert trim.record.cached_tokens == 0


def test_a_long_chat_drops_its_oldest_turns(runners):
    turns = []
    for i in range(6):
        turns += [{"role": "user", "content": tiny_prompt(8, 10 * i)}, {"role": "assistant", "content": "ok"}]
    prompt = Prompt(id="chat", messages=(*turns, {"role": "user", "content": "w1 w2"}))
    auto = runners["trim"].run(trial_plan(prompt=prompt, max_new_tokens=8))
    middle = runners["trim-middle"].run(trial_plan(prompt=prompt, max_new_tokens=8))
    assert auto.status == middle.status == "ok"
    assert auto.record.trimmed_tokens > 0 and auto.record.input_tokens - auto.record.trimmed_tokens <= 24
    assert middle.record.input_tokens - middle.record.trimmed_tokens == 24
    session = runners["trim"].session
    from workbench.core.strategy import Request

    kept = session.trim(Request(prompt=prompt, input_ids=tuple(session.encode(prompt)), max_new_tokens=1))
    # whole turns went: what is left is the encoding of the conversation's last turns, from a question on
    messages = prompt.messages
    tails = [session.encode(Prompt(id="x", messages=messages[j:])) for j in range(0, len(messages), 2)]
    assert kept in tails and kept != tails[0]


def test_bad_budget():
    from workbench.core.errors import SpecError

    with pytest.raises(SpecError, match="max_input_tokens must be at least 8"):
        parse_spec(
            '[[variants]]\nname = "v"\nmodel = "x"\nstrategy = "context-trim"\nmax_input_tokens = 2\n'
            '[[workloads]]\nname = "code"\n'
        )
