"""DAgger rounds in the warm start (``warmstart_rft_labels="expert"`` and
``"expert_likeliest"``,
gamerl.core.warmstart.expert_relabeled): the game's expert answers every state the model
reached in its own games after its first turn, loss on the expert's answer only, and each
round's steps draw from every round's labels so far. Every test runs the embedded tiny model (or
a scripted player in its place) for a few seconds."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json
import random

import pytest
import torch

import gamerl.core.evaluate as evaluate_module
import gamerl.core.warmstart as ws
from gamerl.config import get_config
from gamerl.core.rollout import ScriptedPolicy
from gamerl.models import load_policy


def dagger_cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), warmstart=True, warmstart_steps=2, warmstart_examples=8,
                warmstart_batch_size=2, warmstart_checkpoint_seconds=0,
                warmstart_rft_rounds=1, warmstart_rft_episodes=8, warmstart_rft_steps=2,
                warmstart_rft_labels="expert", wandb_mode="disabled", progress=False,
                device="cpu")
    return get_config("tiny", **{**base, **kw})


def boards(played) -> dict:
    """Each Wordle state the player reached after its first turn: its context (token ids, a
    tuple) -> the board then (its guesses so far and their marks)."""
    from tasks.wordle import score_guess

    states = {}
    for ep in played:
        history = []
        for i, turn in enumerate(ep.turns):
            if i:
                first = turn.last_token - turn.n_tokens + 1
                states.setdefault(tuple(ep.token_ids[:first]), list(history))
            history.append((turn.action, score_guess(ep.instance["answer"], turn.action)))
    return states


def test_every_state_after_the_first_turn_gets_the_experts_answer(tiny_dir, monkeypatch):
    """Wordle, the model replaced by a player of random answer words (so its boards carry marks):
    one example per state it reached after its first guess, the context exactly its own up to
    that turn, the loss on the expert's guess alone, and that guess is the expert's for that
    board: an opener while they last, else a word that fits every mark so far."""
    from tasks.wordle import answers, fits_marks
    from tasks.wordle.solver import EXPERT_OPENERS

    words = answers()
    played = []
    real_rollout = evaluate_module.rollout

    def random_words(lm, tok, rcfg):  # in place of the LM: answers from its own draw
        rng = random.Random(7)
        return ScriptedPolicy(tok, lambda ep: rng.choice(words))

    def recording(*a, **k):
        episodes = real_rollout(*a, **k)
        played.extend(episodes)
        return episodes

    monkeypatch.setattr(evaluate_module, "LMPolicy", random_words)
    monkeypatch.setattr(evaluate_module, "rollout", recording)
    cfg = dagger_cfg(tiny_dir, task="wordle", warmstart_demos="expert", feedback="latest",
                     warmstart_rft_episodes=12)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    labeled, stats = ws.expert_relabeled(lm, tok, cfg, 0)
    assert len(played) == 12 and stats["episodes"] == 12
    assert len(labeled) + stats["agreed"] == sum(len(ep.turns) - 1 for ep in played)
    assert stats["labeled"] == len(labeled)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    states = boards(played)
    openers = 0
    for ids, mask in labeled:
        n = sum(mask)
        assert mask == [0] * (len(ids) - n) + [1] * n  # the loss on the expert's answer alone
        context, answer = ids[:-n], ids[-n:]
        assert tuple(context) in states  # a state the model reached itself
        assert answer[-1] == im_end
        guess = tok.decode(answer[:-1])
        history = states[tuple(context)]
        if len(history) < len(EXPERT_OPENERS) and guess == EXPERT_OPENERS[len(history)]:
            openers += 1
        else:
            assert fits_marks(guess, history), (guess, history)
    assert openers == 12  # CLINT after each game's first (random) guess, never the player's
    assert len(labeled) > 2 * openers  # and the later boards, most of the labels


def test_a_state_where_the_model_moved_as_the_expert_is_left_out(tiny_dir, monkeypatch):
    """The player opens SOARE, CLINT as the expert does, then random answer words: the state
    after SOARE (the expert's CLINT, a fifth of all labels otherwise) gets no label, the others
    do."""
    from tasks.wordle import answers

    words = answers()

    def openers_then_random(lm, tok, rcfg):
        rng = random.Random(3)
        return ScriptedPolicy(tok, lambda ep: ("soare", "clint")[len(ep.turns)]
                              if len(ep.turns) < 2 else rng.choice(words))

    monkeypatch.setattr(evaluate_module, "LMPolicy", openers_then_random)
    cfg = dagger_cfg(tiny_dir, task="wordle", warmstart_demos="expert", feedback="latest",
                     warmstart_rft_episodes=12)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    labeled, stats = ws.expert_relabeled(lm, tok, cfg, 0)
    answers_taught = [tok.decode([t for t, m in zip(ids, mask) if m][:-1]) for ids, mask in labeled]
    assert "clint" not in answers_taught and len(labeled) >= 12  # the later boards' labels
    # the 12 states after SOARE, but where at most two answers remained (the expert skips its
    # opener then)
    assert stats["agreed"] >= 10 and stats["labeled"] == len(labeled)


def named_round(lm, tok, cfg, r):
    """A round's stand-in (for ``expert_relabeled`` or ``rejection_sampled``): 3 examples, each
    named by its 2nd token, 10 + 5r + k."""
    return ([([1, 10 + r * 5 + k, 2, 3], [0, 0, 1, 1]) for k in range(3)],
            {"round": r + 1, "episodes": 8, "reward": 0.0, "success_rate": 0.0,
             "labeled": 3, "agreed": 0, "kept": 3, "kept_reward_min": 0.0, "seconds": 0.0})


def record_batches(monkeypatch) -> list[set[int]]:
    """Each warm-start step's batch from now on, as the set of its examples' names (2nd
    tokens)."""
    seen, real = [], ws.sft_loss

    def recording(lm, batch, *a, **k):
        seen.append({ids[1] for ids, _ in batch})
        return real(lm, batch, *a, **k)

    monkeypatch.setattr(ws, "sft_loss", recording)
    return seen


def test_the_dagger_steps_draw_from_every_rounds_labels(tiny_dir, tmp_path, monkeypatch):
    """Round 1's steps train on its labels; round 2's on round 1's and round 2's together
    (DAgger's aggregate; RFT's rounds train on their own games alone)."""
    seen = record_batches(monkeypatch)
    monkeypatch.setattr(ws, "expert_relabeled", named_round)
    cfg = dagger_cfg(tiny_dir, warmstart_rft_rounds=2, warmstart_batch_size=8)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    stats = ws.warm_start(lm, tok, cfg, tmp_path / "run" / "warmstart")
    assert stats["steps"] == 2 + 2 * 2 and len(seen) == 6
    assert seen[2] == seen[3] == {10, 11, 12}  # round 1: its own 3 labels (batch of 8 > 3)
    assert seen[4] == seen[5] == {10, 11, 12, 15, 16, 17}  # round 2: both rounds' labels
    assert [r["labeled"] for r in stats["rft"]] == [3, 3]
    marker = json.loads((tmp_path / "run" / "warmstart" / ws.MARKER).read_text())
    assert marker["settings"]["warmstart_rft_labels"] == "expert"


@pytest.mark.parametrize("labels", ["expert", "own"])
def test_with_demos_the_rounds_steps_also_draw_from_the_demonstrations(tiny_dir, tmp_path,
                                                                       monkeypatch, labels):
    """``warmstart_rft_with_demos``: each round's pool is the demonstrations and the round's
    examples (DAgger: every round's labels so far; RFT: its own kept games); the setting enters
    the warm start's marker, so a warm start made without it is not reused."""
    seen = record_batches(monkeypatch)
    monkeypatch.setattr(ws, "demonstrations",  # 2 demonstrations, named 50 and 51
                        lambda cfg, tok, seed: [([1, 50 + k, 2, 3], [0, 0, 1, 1]) for k in (0, 1)])
    monkeypatch.setattr(ws, "expert_relabeled" if labels == "expert" else "rejection_sampled",
                        named_round)
    cfg = dagger_cfg(tiny_dir, warmstart_rft_rounds=2, warmstart_batch_size=16,
                     warmstart_rft_labels=labels, warmstart_rft_with_demos=True)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    ws.warm_start(lm, tok, cfg, tmp_path / "run" / "warmstart")
    assert len(seen) == 6 and seen[0] == seen[1] == {50, 51}
    assert seen[2] == seen[3] == {50, 51, 10, 11, 12}
    assert seen[4] == seen[5] == ({50, 51, 10, 11, 12, 15, 16, 17} if labels == "expert"
                                  else {50, 51, 15, 16, 17})
    made = tmp_path / "run" / "warmstart"
    assert ws.cached_warm_start(cfg, made) is not None
    assert ws.cached_warm_start(cfg.replace(warmstart_rft_with_demos=False), made) is None


def test_a_dagger_warm_start_runs_end_to_end_on_the_password_game(tiny_dir, tmp_path):
    torch.manual_seed(0)
    cfg = dagger_cfg(tiny_dir, num_rules=4, max_steps=3, max_new_tokens=12,
                     warmstart_demos="expert")
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    stats = ws.warm_start(lm, tok, cfg, tmp_path / "run" / "warmstart")
    (round_stats,) = stats["rft"]
    assert round_stats["labeled"] > 0 and stats["steps"] == 4
    assert {"loss_first", "loss_last", "reward", "success_rate"} <= set(round_stats)
    assert ws.cached_warm_start(cfg, tmp_path / "run" / "warmstart") == json.loads(
        json.dumps(stats))


def test_answer_logprobs_equal_a_plain_forward_of_each_answer(tiny_dir):
    """One pass with the context shared equals, per answer, the sum of its tokens' log-probs
    from a forward of context + answer alone."""
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    context = tok("<|im_start|>user\nGuess a word.<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    answers = [tok(w)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
               for w in ("crane", "fjord", "by")]
    got = ws.answer_logprobs(lm, context, answers, tok.pad_token_id)
    with torch.no_grad():
        for answer, value in zip(answers, got):
            ids = torch.tensor([context + answer])
            logp = lm(input_ids=ids).logits[0, :-1].float().log_softmax(-1)
            positions = range(len(context) - 1, len(context) + len(answer) - 1)
            want = sum(float(logp[i, ids[0, i + 1]]) for i in positions)
            assert value == pytest.approx(want, abs=1e-4)
    for training in (False, True):  # scored in eval mode, given back in the mode it came in
        lm.train(training)
        ws.answer_logprobs(lm, context, answers, tok.pad_token_id)
        assert lm.training is training


def test_likeliest_labels_are_the_models_likeliest_answer_that_fits_the_marks(tiny_dir,
                                                                            monkeypatch):
    """``expert_likeliest`` on Wordle, the model's moves random answer words (the tiny model
    scores the labels): after the openers every label fits every mark of its board, and it is
    the answer of highest log-probability among those scored for that state (at most
    ``LIKELIEST_CANDIDATES``, all fitting the marks)."""
    from tasks.wordle import answers, fits_marks
    from tasks.wordle.solver import expert_choices

    words = answers()
    played, calls = [], []
    real_rollout, real_logprobs = evaluate_module.rollout, ws.answer_logprobs

    def random_words(lm, tok, rcfg):
        rng = random.Random(11)
        return ScriptedPolicy(tok, lambda ep: rng.choice(words))

    def recording_rollout(*a, **k):
        played.extend(real_rollout(*a, **k))
        return played[-len(a[2]):]

    def recording_logprobs(lm, context, answers_, pad_id):
        out = real_logprobs(lm, context, answers_, pad_id)
        calls.append((tuple(context), answers_, out))
        return out

    monkeypatch.setattr(evaluate_module, "LMPolicy", random_words)
    monkeypatch.setattr(evaluate_module, "rollout", recording_rollout)
    monkeypatch.setattr(ws, "answer_logprobs", recording_logprobs)
    cfg = dagger_cfg(tiny_dir, task="wordle", warmstart_demos="expert", feedback="latest",
                     warmstart_rft_episodes=10, warmstart_rft_labels="expert_likeliest")
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    labeled, stats = ws.expert_relabeled(lm, tok, cfg, 0)
    states = boards(played)
    by_context = {context: (answers_, out) for context, answers_, out in calls}
    chosen = 0
    for ids, mask in labeled:
        n = sum(mask)
        context, answer = tuple(ids[:-n]), ids[-n:]
        history = states[context]
        guess = tok.decode(answer[:-1])
        assert guess in expert_choices(history)
        if context in by_context:  # a board with a choice: the likeliest of those scored
            answers_, out = by_context[context]
            assert 2 <= len(answers_) <= ws.LIKELIEST_CANDIDATES
            assert all(fits_marks(tok.decode(a[:-1]), history) for a in answers_)
            assert answer == answers_[max(range(len(out)), key=out.__getitem__)]
            chosen += 1
        else:
            assert expert_choices(history) == [guess]  # an opener or the one answer left
    assert chosen >= 5 and chosen == len(calls)
    assert stats["label_logprob"] >= stats["choice_logprob"]
    assert 2 <= stats["choices_scored"] <= ws.LIKELIEST_CANDIDATES


def test_likeliest_tokenizes_only_the_answers_it_draws(tiny_dir):
    """Of 100 equal answers ``_likeliest`` tokenizes and scores only the ``LIKELIEST_CANDIDATES``
    it draws (the indices ``rng.sample`` gives, in order) and returns the likeliest of them."""
    from tasks.wordle import answers

    lm, tok = load_policy(str(tiny_dir), device="cpu")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    context = tok("<|im_start|>user\nGuess a word.<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    texts = answers()[:100]
    tokenized = []

    def answer_ids(text):
        tokenized.append(text)
        return tok(text)["input_ids"] + [im_end]

    answer, logprobs = ws._likeliest(lm, context, texts, answer_ids, random.Random(3),
                                     tok.pad_token_id)
    picks = sorted(random.Random(3).sample(range(100), ws.LIKELIEST_CANDIDATES))
    assert tokenized == [texts[i] for i in picks]
    want = ws.answer_logprobs(lm, context, [tok(t)["input_ids"] + [im_end] for t in tokenized],
                              tok.pad_token_id)
    assert logprobs == pytest.approx(want, abs=1e-5)
    assert tok.decode(answer[:-1]) == tokenized[max(range(len(want)), key=want.__getitem__)]


def test_a_move_among_the_experts_equal_answers_is_left_out_with_likeliest(tiny_dir,
                                                                          monkeypatch):
    """The player opens with a random word, then plays answers that fit every mark (what the
    expert draws from): only the state after its first guess (the expert's CLINT, where the
    player did not play it) is labeled."""
    from tasks.wordle import answers, score_guess
    from tasks.wordle.solver import expert_choices

    words = answers()

    def fitting(lm, tok, rcfg):
        rng = random.Random(5)

        def move(ep):
            if not ep.turns:
                return rng.choice(words)
            history = [(t.action, score_guess(ep.instance["answer"], t.action))
                       for t in ep.turns]
            fits = [w for w in expert_choices(history, openers=()) if w != "clint"]
            return rng.choice(fits or expert_choices(history, openers=()))

        return ScriptedPolicy(tok, move)

    monkeypatch.setattr(evaluate_module, "LMPolicy", fitting)
    cfg = dagger_cfg(tiny_dir, task="wordle", warmstart_demos="expert", feedback="latest",
                     warmstart_rft_episodes=8, warmstart_rft_labels="expert_likeliest")
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    labeled, stats = ws.expert_relabeled(lm, tok, cfg, 0)
    taught = {tok.decode([t for t, m in zip(ids, mask) if m][:-1]) for ids, mask in labeled}
    assert taught <= {"clint"} and 4 <= len(labeled) <= 8 and stats["agreed"] >= 4


@pytest.mark.parametrize("bad, words", [
    (dict(warmstart_rft_labels="teacher"), "'own'"),
    (dict(task="openspiel", warmstart_demos="format"), "no expert to label"),
    (dict(warmstart_rft_labels="expert_likeliest"), "no set of answers"),
])
def test_bad_dagger_settings_are_refused_with_a_reason(tiny_dir, bad, words):
    with pytest.raises(ValueError, match=words):
        dagger_cfg(tiny_dir, **bad)
