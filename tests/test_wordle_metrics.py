"""Wordle's evaluation columns that say whether a player reads the board
(``gamerl.games.wordle.reads_the_marks``): guesses that fit every earlier mark, guesses that keep
every green in place. Checked on games played through the real game against marks worked out by
hand."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

from gamerl.games import get_task
from gamerl.games.wordle import reads_the_marks
from tasks.wordle import LocalWordleEnv, WordleConfig, answers
from tasks.wordle.solver import expert_guess


def _played(answer: str, guesses) -> SimpleNamespace:
    """An episode as the rollout leaves it, as far as these columns look: the last observation."""
    env = LocalWordleEnv(WordleConfig())
    obs = env.reset(answer=answer)
    for guess in guesses:
        obs, _, _, _ = env.step(guess)
    return SimpleNamespace(last_obs=obs, turns=[], success=bool(obs.get("success")))


def test_a_hand_scored_game():
    """Answer CRANE. SOARE: ⬜⬜🟩🟨🟩. BRACE: had it been the answer, SOARE would have scored
    ⬜⬜🟩🟨🟩 too (fits) and it keeps A and E in place; it scores ⬜🟩🟩🟨🟩. TRACE keeps R, A,
    E in place but cannot be the answer: against TRACE, BRACE's C would be green, not yellow.
    STALE drops the green R. An invalid word is no guess; the repeat of SOARE fits nothing
    (SOARE would have scored itself all green) and drops R too. So 4 guesses after the first:
    fit 1 (BRACE), kept the greens 2 (BRACE, TRACE)."""
    ep = _played("crane", ["soare", "brace", "xqzvj", "trace", "stale", "soare"])
    assert ep.last_obs["guesses"] == ["soare", "brace", "trace", "stale", "soare"]
    got = reads_the_marks([ep])
    assert got == {"fits_marks_rate": 1 / 4, "kept_greens_rate": 2 / 4}


def test_one_guess_or_none_has_nothing_to_read():
    got = reads_the_marks([_played("crane", ["soare"]), SimpleNamespace(last_obs=None)])
    assert all(math.isnan(v) for v in got.values())


def test_the_expert_fits_every_mark_after_its_openers_and_random_words_almost_never():
    """expert_guess (the warm start's demonstrations) over 40 games: its first two guesses are
    the fixed openers SOARE and CLINT, every later one fits the marks, so only CLINT can miss
    (and it counts as one guess of each game's later ones). Random answer words fit the marks
    in a small fraction of guesses."""
    rng, words = random.Random(0), answers()
    expert, rand = [], []
    for answer in random.Random(1).sample(words, 40):
        env = LocalWordleEnv(WordleConfig())
        obs, done = env.reset(answer=answer), False
        while not done:
            guess = expert_guess(list(zip(obs["guesses"], obs["marks"])), rng)
            obs, _, done, _ = env.step(guess)
        expert.append(SimpleNamespace(last_obs=obs))
        rand.append(_played(answer, [rng.choice(words) for _ in range(6)]))
    e, r = reads_the_marks(expert), reads_the_marks(rand)
    later = sum(max(len(ep.last_obs["guesses"]) - 2, 0) for ep in expert)
    after_first = sum(len(ep.last_obs["guesses"]) - 1 for ep in expert)
    assert e["fits_marks_rate"] >= later / after_first > 0.4
    assert r["fits_marks_rate"] < 0.05 and r["kept_greens_rate"] < e["kept_greens_rate"]


def test_the_games_metrics_and_report_columns_carry_them():
    task = get_task("wordle")
    ep = _played("crane", ["soare", "brace"])
    ep.turns = [SimpleNamespace(stats={"valid": True, "repeated": False, "greens": g})
                for g in (2, 3)]
    got = task.metrics([ep], None)
    assert got["fits_marks_rate"] == 1.0 and got["kept_greens_rate"] == 1.0
    keys = [c.key for c in task.report_columns]
    assert keys.index("kept_greens_rate") < keys.index("fits_marks_rate") < keys.index(
        "success_rate")
