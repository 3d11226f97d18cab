"""``bench/wordle_board_reading.py``: the words' log-probabilities, scored as a prefix tree
packed into one row per chunk on the context's KV cache, equal a plain forward pass over
context + word; the boards are the third turn's context after the expert's openers; the shares
are what their definitions say on a board checked by hand."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import wordle_board_reading as wbr  # noqa: E402
from gamerl.config import get_config  # noqa: E402
from gamerl.core.rollout import IM_END, encode  # noqa: E402
from gamerl.models import load_policy  # noqa: E402
from tasks.wordle import answers  # noqa: E402
from tasks.wordle.words import score_guess  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    lm, tok = load_policy("tiny", device="cpu")
    lm.eval()
    return lm, tok


@pytest.fixture(scope="module")
def boards(tiny):
    return wbr.boards_of(get_config("tiny", task="wordle"), tiny[1], 3)


def test_boards_are_the_third_turn_after_the_openers(tiny, boards):
    lm, tok = tiny
    assert len(boards) == 3
    for b in boards:
        assert [g for g, _ in b["history"]] == ["soare", "clint"]
        assert [list(m) for _, m in b["history"]] == [score_guess(b["answer"], "soare"),
                                                     score_guess(b["answer"], "clint")]
        text = tok.decode(b["context"])
        # it ends with the third turn's header, after the feedback on CLINT: the policy answers
        assert text.rindex("<|im_start|>assistant") > text.rindex("CLINT") > text.rindex("SOARE")
        assert "Guesses left: 4 of 6" in text


def test_cached_word_scores_equal_a_plain_forward_pass(tiny, boards):
    lm, tok = tiny
    im_end = tok.convert_tokens_to_ids(IM_END)
    words = ["crane", "abbey", "zesty", "shirk", "shale", "share", "shard", "fjord"]
    ids = [encode(tok, w) + [im_end] for w in words]
    assert len({len(i) for i in ids}) > 1  # words of different lengths
    prefixes = {tuple(r[:j]) for r in ids for j in range(1, len(r))}
    assert len(prefixes) < sum(len(r) - 1 for r in ids)  # some words share a prefix
    ctx = boards[0]["context"]
    got, bound = wbr.word_logprobs(lm, ctx, ids, chunk=2)
    assert bound == 0.0  # every word scored
    with torch.no_grad():
        for w, row, score in zip(words, ids, got):
            logits = lm(input_ids=torch.tensor([ctx + row])).logits[0].float()
            logp = torch.log_softmax(logits, -1)
            want = sum(float(logp[len(ctx) - 1 + j, t]) for j, t in enumerate(row))
            assert float(score) == pytest.approx(want, abs=1e-4), w


def test_shares_on_a_board_checked_by_hand(tiny, boards):
    lm, tok = tiny
    b = boards[0]
    words = sorted(answers())[:150] + [b["answer"]]
    row = wbr.measure(lm, tok, [b], words, chunk=64)
    fit = [w for w in words if all(score_guess(w, g) == list(m) for g, m in b["history"])]
    assert b["answer"] in fit
    assert row["uniform_fit_share"] == pytest.approx(len(fit) / len(words))
    assert 0.0 <= row["fit_share"] <= row["kept_share"] <= 1.0  # fitting words keep the greens
    assert row["board_dependence_tv"] == pytest.approx(0.0)  # one board: it is the average
    assert 1.0 <= row["effective_words"] <= len(words)


def test_words_left_unscored_are_bounded_by_their_first_tokens(tiny, boards):
    lm, tok = tiny
    im_end = tok.convert_tokens_to_ids(IM_END)
    ids = [encode(tok, w) + [im_end] for w in sorted(answers())[:60]]
    ctx = boards[0]["context"]
    every, _ = wbr.word_logprobs(lm, ctx, ids, chunk=16)
    with torch.no_grad():
        first = torch.log_softmax(lm(input_ids=torch.tensor([ctx])).logits[0, -1].float(), -1)
    cut = float(first[[r[0] for r in ids]].median())
    some, bound = wbr.word_logprobs(lm, ctx, ids, chunk=16, min_first_logprob=cut)
    run = [float(first[r[0]]) >= cut for r in ids]
    assert 0 < sum(run) < len(ids)
    for s, e, r in zip(some, every, run):  # the words run are scored as before, the rest -inf
        assert float(s) == (pytest.approx(float(e), abs=1e-5) if r else -float("inf"))
    left = sum(float(e.exp()) for e, r in zip(every, run) if not r)
    assert left <= bound + 1e-9  # the bound holds
    assert bound == pytest.approx(sum(float(first[t].exp()) for t in
                                      {r[0] for r, k in zip(ids, run) if not k}), rel=1e-5)
