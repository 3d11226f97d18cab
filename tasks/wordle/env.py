"""The in-process Wordle environment (the fast path for training).

``LocalWordleEnv`` and the HTTP client ``WordleEnv`` (client.py) have the same methods and return
identical JSON-able objects, so a trainer can switch between them with one line.
"""

from __future__ import annotations

from typing import Any

from ..common.protocol import LocalEnv
from .game import WordleConfig, WordleGame


class LocalWordleEnv(LocalEnv):
    """In-process Wordle: ``reset``, ``submit`` (alias ``step``), ``get_feedback``, ``state``.

    ``get_feedback(guess)`` says whether a guess would be accepted now (valid word, hard-mode
    hints respected, already guessed or not) without using a turn. It does NOT reveal marks:
    marks for free would let a player probe the answer without spending turns. The stateless
    ``tasks.wordle.feedback(answer, guess)`` marks a guess against an answer you already know.
    """

    def __init__(self, config: WordleConfig | None = None) -> None:
        self.game = WordleGame(config)

    def reset(self, seed: int | None = None, *, answer: str | None = None) -> dict[str, Any]:
        return self.game.reset(seed, answer=answer)

    def get_feedback(self, guess: str) -> dict[str, Any]:
        return self.game.check(guess)
