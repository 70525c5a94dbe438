"""The baseline strategy's hand-written loop against transformers' own generate()."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workbench.core.strategy import Cancelled, Prompt  # noqa: E402
from workbench.testing.helpers import ListProbe, load_session, request_for, tiny_prompt  # noqa: E402


@pytest.fixture(scope="module")
def session(tiny_model_dir):
    return load_session(tiny_model_dir, "baseline")


@pytest.mark.parametrize("start,n_words,max_new", [(0, 5, 20), (3, 40, 33), (11, 120, 64)])
def test_greedy_is_token_identical_to_generate(session, start, n_words, max_new):
    req = request_for(session, tiny_prompt(n_words, start), max_new_tokens=max_new)
    probe = ListProbe()
    out = session.generate(req, probe)
    model = session.hf.model
    ids = torch.tensor([req.input_ids])
    with torch.inference_mode():
        reference = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new, do_sample=False
        )
    expected = reference[0, ids.shape[1] :].tolist()
    assert out.token_ids == expected
    assert probe.tokens == out.token_ids
    assert all(len(s) == 1 for s in probe.steps)  # one token per step for the baseline
    assert out.finish_reason == ("eos" if expected[-1] == 2 else "length")


def test_ignore_eos_generates_exactly_max_new_tokens(session):
    req = request_for(session, tiny_prompt(10), max_new_tokens=50, ignore_eos=True)
    out = session.generate(req, ListProbe())
    assert len(out.token_ids) == 50
    assert out.finish_reason == "length"


def test_eos_stops_generation(session):
    # Force EOS: a session whose eos set contains the first greedy token.
    req = request_for(session, tiny_prompt(10), max_new_tokens=30)
    first = session.generate(req, ListProbe()).token_ids[0]
    saved = session.hf.eos_ids
    session.hf.eos_ids = frozenset({first})
    try:
        out = session.generate(req, ListProbe())
    finally:
        session.hf.eos_ids = saved
    assert out.token_ids == [first]
    assert out.finish_reason == "eos"


def test_stop_string(session):
    req = request_for(session, tiny_prompt(10), max_new_tokens=30, ignore_eos=True)
    full = session.generate(req, ListProbe())
    words = full.text.split()
    assert len(words) > 3
    stop_req = request_for(session, tiny_prompt(10), max_new_tokens=30, ignore_eos=True, stop=(words[2],))
    out = session.generate(stop_req, ListProbe())
    assert out.finish_reason == "stop"
    assert words[2] in out.text
    assert len(out.token_ids) < len(full.token_ids)


def test_sampling_is_seeded_and_differs_from_greedy(session):
    kw = dict(max_new_tokens=40, ignore_eos=True, temperature=1.5, top_k=50, top_p=0.95)
    a = session.generate(request_for(session, tiny_prompt(8), seed=7, **kw), ListProbe())
    b = session.generate(request_for(session, tiny_prompt(8), seed=7, **kw), ListProbe())
    c = session.generate(request_for(session, tiny_prompt(8), seed=8, **kw), ListProbe())
    greedy = session.generate(
        request_for(session, tiny_prompt(8), max_new_tokens=40, ignore_eos=True), ListProbe()
    )
    assert a.token_ids == b.token_ids
    assert a.token_ids != c.token_ids
    assert a.token_ids != greedy.token_ids


def test_top_k_one_equals_greedy(session):
    sampled = session.generate(
        request_for(
            session, tiny_prompt(8), max_new_tokens=25, ignore_eos=True, temperature=1.0, top_k=1, seed=3
        ),
        ListProbe(),
    )
    greedy = session.generate(
        request_for(session, tiny_prompt(8), max_new_tokens=25, ignore_eos=True), ListProbe()
    )
    assert sampled.token_ids == greedy.token_ids


def test_chat_messages_use_the_chat_template(session):
    ids = session.encode(Prompt(id="c", messages=({"role": "user", "content": "w1 w2"},)))
    tok = session.hf.tokenizer
    assert ids[0] == tok.convert_tokens_to_ids("<|user|>")
    assert ids[-1] == tok.convert_tokens_to_ids("<|assistant|>")


def test_cancel_propagates_from_the_probe(session):
    req = request_for(session, tiny_prompt(8), max_new_tokens=30, ignore_eos=True)
    with pytest.raises(Cancelled):
        session.generate(req, ListProbe(cancel_after=3))


def test_dtype_is_applied(tiny_model_dir):
    s = load_session(tiny_model_dir, "baseline", dtype="bfloat16")
    assert s.dtype == "bfloat16"
    assert next(s.hf.model.parameters()).dtype == torch.bfloat16
    out = s.generate(request_for(s, tiny_prompt(6), max_new_tokens=5, ignore_eos=True), ListProbe())
    assert len(out.token_ids) == 5
