"""Wordle's ``letters`` view (gamerl/games/wordle.py): the guess spelled out, each letter beside
its mark, and the model asked to answer letter by letter. To SmolLM2 a 5-letter word is 1-3
tokens, so which letter sits where is not in its input; spelled, every letter is its own token."""

from __future__ import annotations

import pytest
from conftest import trained_answers  # pytest (prepend import mode) puts tests/ on sys.path

from gamerl.config import get_config
from gamerl.games.wordle import (WORDLE_LETTERS_PROMPT, extract_guess, spell, wordle_feedback)
from tasks.wordle import LocalWordleEnv, WordleConfig


@pytest.mark.parametrize("answer,guess", [
    ("C R A N E", "CRANE"), ("c r a n e.", "crane"), ("**C R A N E**", "CRANE"),
    ("Guess: S O A R E", "SOARE"), ("crane", "crane"),
    ("C R A N", "C R A N"), ("C R A N E S", "C R A N E S"), ("C R 4 N E", "C R 4 N E")])
def test_five_spelled_letters_are_one_guess_anything_else_is_unchanged(answer, guess):
    assert extract_guess(answer) == guess


def test_the_letters_feedback_spells_the_last_guess_beside_its_marks():
    env = LocalWordleEnv(WordleConfig())
    env.reset(answer="crane")
    said = []
    for guess in ("soare", "clint", "soare", "xyzzq"):
        obs, _, _, info = env.step(guess)
        said.append(wordle_feedback(obs, info, guess, "letters"))
        latest = wordle_feedback(obs, info, guess, "latest")
        # the same message as "latest" but its first line: the other lines are unchanged
        assert said[-1].split("\n")[1:] == latest.split("\n")[1:]
    assert said[0].split("\n")[0] == "1. S⬜ O⬜ A🟩 R🟨 E🟩"
    assert said[1].split("\n")[:2] == ["2. C🟩 L⬜ I⬜ N🟩 T⬜", "In place: C _ A N E"]
    assert said[2].split("\n")[0] == "3. S⬜ O⬜ A🟩 R🟨 E🟩  (repeated: no new information)"
    assert said[3].split("\n")[0] == "4. (wasted turn) 'xyzzq' is not in the word list"


def test_the_letters_view_is_wordles_and_brings_its_prompt():
    cfg = get_config("smollm2-135m", task="wordle", feedback="letters")
    assert cfg.effective_system_prompt() == WORDLE_LETTERS_PROMPT
    assert get_config("smollm2-135m", task="wordle").effective_system_prompt() != \
        WORDLE_LETTERS_PROMPT  # the other views keep the game's default prompt
    with pytest.raises(ValueError, match="feedback 'letters': task 'password_game' has "
                                         "'compact', 'full', 'latest'"):
        get_config("smollm2-135m", feedback="letters")


def test_letters_demonstrations_spell_every_guess_and_keep_the_marks(tiny_dir):
    """The expert's games as the warm start shows them with ``feedback="letters"``: the system
    prompt asks for spelled guesses, every trained answer is one (``S O A R E<|im_end|>``), the
    feedback spells the last guess, and the spelled guesses, joined, keep every mark."""
    from gamerl.core.warmstart import demonstrations
    from gamerl.models import load_policy
    from tasks.wordle import score_guess
    from tasks.wordle.solver import EXPERT_OPENERS

    _, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = get_config("smollm2-135m", task="wordle", model=str(tiny_dir), warmstart_examples=8,
                     feedback="letters")
    for ids, mask in demonstrations(cfg, tok, seed=0):
        text = tok.decode(ids)
        assert WORDLE_LETTERS_PROMPT in text
        answers = [a.removesuffix("<|im_end|>") for a in trained_answers(tok, ids, mask)]
        assert all(a == spell(a.replace(" ", "")) for a in answers), answers
        guesses = [a.replace(" ", "").lower() for a in answers]
        assert guesses[:2] == list(EXPERT_OPENERS) or len(guesses) <= 3, guesses
        assert "1. S⬜ O" in text or "1. S🟩 O" in text or "1. S🟨 O" in text  # SOARE, spelled
        for i, guess in enumerate(guesses[2:], start=2):
            assert all(score_guess(guess, g) == score_guess(guesses[-1], g)
                       for g in guesses[:i]) or len(guesses) == 6, guesses
