"""Wordle: seeded, turn-based, with correct repeated-letter marks, shaped rewards and an entropy
solver.

``LocalWordleEnv`` runs in-process; ``WordleEnv`` talks to the FastAPI server
(``python -m tasks.wordle.server``, port 8001 by default) with the same methods and results.
"""

from .env import LocalWordleEnv
from .game import (GameOver, RewardConfig, StepResult, WordleConfig, WordleGame, WordleInstance,
                   check_guess, corpus_texts, feedback, fits_marks, make_instance,
                   normalize_guess)
from .words import (GREEN, GREY, YELLOW, allowed_guesses, answers, pattern_code, score_guess,
                    valid_words)

__all__ = [
    "GREEN", "GREY", "GameOver", "LocalWordleEnv", "RewardConfig", "StepResult", "WordleConfig",
    "WordleEnv", "WordleGame", "WordleInstance", "YELLOW", "allowed_guesses", "answers",
    "check_guess", "corpus_texts", "feedback", "fits_marks", "make_instance", "normalize_guess",
    "pattern_code", "score_guess", "solve", "valid_words",
]


def __getattr__(name: str):
    # The HTTP client imports httpx and the solver numpy; load them only when asked for.
    if name == "WordleEnv":
        from .client import WordleEnv

        return WordleEnv
    if name == "solve":
        from .solver import solve

        return solve
    raise AttributeError(name)
