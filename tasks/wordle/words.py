"""Wordle's word lists and its marking rule (pure Python; the solver has a numpy version).

* ``answers()``: the 2,309 possible answers (``tasks/password_game/data/wordle_answers.txt``, the
  list the Password Game's rule 11 draws from too), alphabetical.
* ``allowed_guesses()``: the 10,663 further words accepted as guesses
  (``tasks/wordle/data/allowed_guesses.txt``).
* ``valid_words()``: both together, the 12,972 words a guess must be one of.

Marking (the official rule, which many clones get wrong for repeated letters): first every letter
in the right spot is green; then, left to right, each other letter is yellow if the answer still
has an unmatched copy of it (copies matched by greens, or by earlier yellows, are used up), and
grey otherwise. So for the answer ``abbey`` the guess ``babes`` is yellow, yellow, green, green,
grey, and for ``crane`` the guess ``eerie`` is grey, grey, yellow, grey, green (the one ``e`` of
``crane`` is taken by the green).
"""

from __future__ import annotations

import functools
from pathlib import Path

WORD_LENGTH = 5
GREEN, YELLOW, GREY = "green", "yellow", "grey"
MARKS = (GREY, YELLOW, GREEN)  # index = the mark's base-3 digit in a pattern code
EMOJI = {GREEN: "🟩", YELLOW: "🟨", GREY: "⬜"}
N_PATTERNS = 3**WORD_LENGTH  # 243
WIN_PATTERN = N_PATTERNS - 1  # all green: 2 + 2*3 + 2*9 + 2*27 + 2*81

_HERE = Path(__file__).resolve().parent
ANSWERS_FILE = _HERE.parent / "password_game" / "data" / "wordle_answers.txt"
ALLOWED_FILE = _HERE / "data" / "allowed_guesses.txt"


def _read_words(path: Path) -> tuple[str, ...]:
    words = tuple(w.strip().lower() for w in path.read_text("utf-8").splitlines() if w.strip())
    bad = [w for w in words if len(w) != WORD_LENGTH or not is_ascii_lower(w)]
    if bad:
        raise ValueError(f"{path}: not 5-letter words: {bad[:5]}")
    return words


def is_ascii_lower(text: str) -> bool:
    return all("a" <= c <= "z" for c in text)


@functools.cache
def answers() -> tuple[str, ...]:
    """The possible answers, sorted (2,309 words)."""
    return tuple(sorted(set(_read_words(ANSWERS_FILE))))


@functools.cache
def allowed_guesses() -> tuple[str, ...]:
    """Valid guesses that are never answers, sorted (10,663 words)."""
    return tuple(sorted(set(_read_words(ALLOWED_FILE)) - set(answers())))


@functools.cache
def valid_words() -> frozenset[str]:
    """Every accepted guess: answers plus allowed guesses (12,972 words)."""
    return frozenset(answers()) | frozenset(allowed_guesses())


@functools.cache
def guess_list() -> tuple[str, ...]:
    """All valid words in a fixed order: the answers first, then the other allowed guesses."""
    return answers() + allowed_guesses()


@functools.cache
def answer_index() -> dict[str, int]:
    return {w: i for i, w in enumerate(answers())}


def score_guess(answer: str, guess: str) -> list[str]:
    """Wordle's marks of ``guess`` against ``answer`` (both 5 lowercase letters):
    a list of five ``"green"`` / ``"yellow"`` / ``"grey"``."""
    if len(answer) != WORD_LENGTH or len(guess) != WORD_LENGTH:
        raise ValueError("answer and guess must both have 5 letters")
    marks = [GREY] * WORD_LENGTH
    unmatched: dict[str, int] = {}
    for i, (a, g) in enumerate(zip(answer, guess)):
        if a == g:
            marks[i] = GREEN
        else:
            unmatched[a] = unmatched.get(a, 0) + 1
    for i, g in enumerate(guess):
        if marks[i] != GREEN and unmatched.get(g, 0) > 0:
            marks[i] = YELLOW
            unmatched[g] -= 1
    return marks


def pattern_code(marks: list[str] | tuple[str, ...]) -> int:
    """Marks as one base-3 number: position i contributes 3**i times 0 (grey), 1 (yellow) or
    2 (green); all green is 242."""
    return sum(MARKS.index(m) * 3**i for i, m in enumerate(marks))


def marks_from_code(code: int) -> list[str]:
    if not 0 <= code < N_PATTERNS:
        raise ValueError(f"pattern code must be in [0, {N_PATTERNS - 1}]")
    out = []
    for _ in range(WORD_LENGTH):
        code, digit = divmod(code, 3)
        out.append(MARKS[digit])
    return out


def emoji(marks: list[str]) -> str:
    return "".join(EMOJI[m] for m in marks)
