"""A strong Wordle solver: greedy information gain (entropy) over the remaining answers.

Strategy
* The candidates are the answers (of the 2,309) consistent with every mark seen so far.
* Each guess is chosen from ALL 12,972 valid words (not only the candidates: a non-answer often
  splits the candidates better). Its score is the entropy, in bits, of the distribution of marks it
  would get over the candidates (each candidate equally likely), plus a flat bonus
  (``candidate_bonus``, 0.1 bit) when the guess is itself a candidate, so that among nearly equal
  splits one that can win at once is preferred (0.1 measured best of 0, 0.1 and 0.3).
* With one or two candidates left, the first candidate is guessed.
* The opening guess is fixed, precomputed as the maximum-entropy first guess over all answers
  (``OPENING``; ``tests/test_wordle.py`` checks that it still is).
* In hard mode the guesses are restricted to the candidates (every candidate satisfies every
  hard-mode constraint).

Speed: the marks of every (guess, answer) pair are precomputed once per process as base-3 pattern
codes (a 2,309 × 12,972 ``uint8`` matrix, 30 MB, built with numpy in about half a second). The
entropy of every guess over c candidates is a sort of the c candidate rows (few candidates) or one
``bincount`` (many). Decisions are memoized by the history of marks (about 2,500 entries cover
every answer): solving all 2,309 answers from a cold start takes about 1.4 s (0.6 ms a game), and
after warm-up a game is a few dictionary lookups (about 0.01 ms).

Measured over all 2,309 answers (tasks/wordle/README.md): every answer solved within 6 guesses,
3.4625 guesses on average (2: 50, 3: 1207, 4: 988, 5: 62, 6: 2).
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from .words import (N_PATTERNS, WIN_PATTERN, WORD_LENGTH, answer_index, answers, guess_list,
                    marks_from_code, pattern_code, score_guess)

OPENING = "soare"  # argmax of the first-guess entropy over all answers (checked by a test)
# The expert's openers: the solver's opening and its most common second guess (after ~20% of the
# answers' patterns), which shares no letter with it: ten distinct common letters in two guesses.
EXPERT_OPENERS = ("soare", "clint")

__all__ = ["EXPERT_OPENERS", "OPENING", "WordleSolver", "default_solver", "encode_words",
           "expert_guess", "pattern_matrix", "solve"]


def encode_words(words: Sequence[str]) -> np.ndarray:
    """Words as an ``(n, 5)`` uint8 array of letter codes 0..25."""
    buf = np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8)
    return (buf.reshape(len(words), WORD_LENGTH) - ord("a")).astype(np.uint8)


def pattern_matrix(guesses: Sequence[str], targets: Sequence[str]) -> np.ndarray:
    """``P[i, j]`` = the pattern code of guess ``i`` against answer ``j`` (``uint8``, 0..242):
    position ``k`` contributes ``3**k`` times 2 (green), 1 (yellow) or 0 (grey), with Wordle's
    repeated-letter rule (greens first; a letter is yellow only while the answer has unmatched
    copies left, counted left to right).

    Guesses are grouped by which of their positions repeat a letter (most have none). A position
    whose letter occurs once in the guess is yellow iff it is not green and the answer contains the
    letter. For a repeated letter at position ``k``: the answer's copies not matched by greens
    (``count - greens of that letter``) must exceed the copies used by the same letter's earlier
    non-green positions.
    """
    G = encode_words(guesses)
    A = encode_words(targets)
    counts = np.zeros((26, len(targets)), dtype=np.int8)  # copies of each letter in each answer
    for j in range(WORD_LENGTH):
        np.add.at(counts, (A[:, j], np.arange(len(targets))), 1)
    out = np.empty((len(guesses), len(targets)), dtype=np.uint8)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, word in enumerate(guesses):
        groups.setdefault(tuple(word.index(c) for c in word), []).append(i)
    for shape, rows in groups.items():
        idx = np.asarray(rows)
        g = G[idx]
        green = [g[:, k][:, None] == A[None, :, k] for k in range(WORD_LENGTH)]
        code = np.zeros((len(idx), len(targets)), dtype=np.uint8)
        for k in range(WORD_LENGTH):
            same = [j for j in range(WORD_LENGTH) if shape[j] == shape[k]]
            count = counts[g[:, k]]  # (n, answers)
            if len(same) == 1:
                digit = green[k].astype(np.uint8) + (count > 0)
            else:
                avail = count.copy()
                for j in same:
                    if j != k:
                        avail -= green[j]
                earlier = np.zeros_like(avail)
                for m in same:
                    if m < k:
                        earlier += ~green[m]
                yellow = ~green[k] & (earlier < avail)
                digit = 2 * green[k].astype(np.uint8) + yellow
            code += np.uint8(3**k) * digit
        out[idx] = code
    return out


class WordleSolver:
    """The entropy solver. Thread-safe; build once (``default_solver()``) and reuse."""

    def __init__(self, candidate_bonus: float = 0.1, opening: str = OPENING) -> None:
        self.answers = answers()
        self.guesses = guess_list()  # answers first: guess index i < n_answers is answer i
        self.n_answers = len(self.answers)
        self.guess_index = {w: i for i, w in enumerate(self.guesses)}
        # by_answer[a, g]: the pattern code of guess g against answer a (rows are contiguous, so
        # selecting the candidate answers is a fast row gather).
        self.by_answer = np.ascontiguousarray(pattern_matrix(self.guesses, self.answers).T)
        n = np.arange(self.n_answers + 1, dtype=np.float64)
        self._nlogn_table = n * np.log2(np.maximum(n, 1))  # n log2 n, 0 for n = 0
        self._d_table = np.concatenate([[0.0], np.diff(self._nlogn_table)])
        self.candidate_bonus = candidate_bonus
        self.opening = opening
        self._memo: dict[tuple, str] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ pieces
    def candidates(self, history: Iterable[tuple[str, Sequence[str] | int]]) -> np.ndarray:
        """Indices (into ``answers()``) of the answers consistent with ``history``: pairs of
        (guess, marks) with marks as a list of five mark names or a pattern code."""
        cand = np.arange(self.n_answers)
        for guess, marks in history:
            code = marks if isinstance(marks, (int, np.integer)) else pattern_code(list(marks))
            cand = cand[self.by_answer[cand, self.guess_index[guess]] == code]
        return cand

    def entropies(self, cand: np.ndarray, pool: np.ndarray | None = None) -> np.ndarray:
        """Entropy (bits) of the mark distribution of each guess in ``pool`` (default: every
        valid word) over the candidate answers ``cand``, rounded to 1e-9 so that guesses with
        the same split tie exactly (ties go to the lowest index).

        ``H = log2(c) - sum_k n_k log2(n_k) / c`` over the pattern counts ``n_k``. Few candidates:
        sort each guess's column of codes and add ``d(rank within its run)``, where
        ``d(j) = j log2 j - (j-1) log2 (j-1)`` (a run of n adds up to n log2 n). Many: one
        ``bincount`` over (guess, pattern) pairs and a table of n log2 n.
        """
        sub = self.by_answer[cand] if pool is None else self.by_answer[np.ix_(cand, pool)]
        c, n_rows = sub.shape
        if c <= 96:
            sub = np.sort(sub, axis=0)
            rows = np.arange(c)[:, None]
            new_run = np.empty(sub.shape, dtype=bool)
            new_run[0] = True
            np.not_equal(sub[1:], sub[:-1], out=new_run[1:])
            starts = np.where(new_run, rows, 0)
            np.maximum.accumulate(starts, axis=0, out=starts)
            total = self._d_table[rows - starts + 1].sum(axis=0)
        else:
            offsets = (np.arange(n_rows, dtype=np.int32) * N_PATTERNS)[None, :]
            counts = np.bincount((sub.astype(np.int32) + offsets).ravel(),
                                 minlength=n_rows * N_PATTERNS)
            total = self._nlogn_table[counts].reshape(n_rows, N_PATTERNS).sum(axis=1)
        return np.round(np.log2(c) - total / c, 9)

    def choose(self, cand: np.ndarray, hard_mode: bool = False) -> str:
        """The guess for this set of candidates."""
        if len(cand) == 0:
            raise ValueError("no answer is consistent with the marks given")
        if len(cand) <= 2:
            return self.answers[int(cand[0])]
        pool = cand if hard_mode else None  # guess index == answer index for answers
        h = self.entropies(cand, pool)
        if pool is None:
            bonus = np.zeros(len(self.guesses))
            bonus[cand] = self.candidate_bonus
        else:
            bonus = np.full(len(cand), self.candidate_bonus)
        best = int(np.argmax(h + bonus))  # ties: the first (answers come first, alphabetical)
        return self.guesses[best] if pool is None else self.guesses[int(cand[best])]

    # ------------------------------------------------------------------ the API
    def next_guess(self, history: Sequence[tuple[str, Sequence[str] | int]] = (),
                   hard_mode: bool = False) -> str:
        """The solver's next guess after ``history`` (pairs of guess and marks)."""
        key_items = []
        for guess, marks in history:
            code = marks if isinstance(marks, (int, np.integer)) else pattern_code(list(marks))
            key_items.append((guess, int(code)))
        if not key_items:
            return self.opening
        key = (hard_mode, *key_items)
        with self._lock:
            hit = self._memo.get(key)
        if hit is not None:
            return hit
        guess = self.choose(self.candidates(key_items), hard_mode)
        with self._lock:
            if len(self._memo) < 200_000:  # bounded: about one entry per distinct game path
                self._memo[key] = guess
        return guess

    def solve(self, answer: str, max_guesses: int = 20, hard_mode: bool = False) -> list[str]:
        """The guesses the solver makes until it finds ``answer`` (one of the answers); the last
        one is the answer. ``ValueError`` if it would need more than ``max_guesses``."""
        if answer not in answer_index():
            raise ValueError(f"{answer!r} is not one of the answers")
        history: list[tuple[str, int]] = []
        guesses: list[str] = []
        a = answer_index()[answer]
        while len(guesses) < max_guesses:
            guess = self.next_guess(history, hard_mode)
            guesses.append(guess)
            code = int(self.by_answer[a, self.guess_index[guess]])
            if code == WIN_PATTERN:
                return guesses
            history.append((guess, code))
        raise ValueError(f"not solved within {max_guesses} guesses: {guesses}")

    def best_opening(self) -> tuple[str, float]:
        """The maximum-entropy first guess over all answers, and its entropy (bits)."""
        h = self.entropies(np.arange(self.n_answers))
        i = int(np.argmax(h))
        return self.guesses[i], float(h[i])


_default: WordleSolver | None = None
_default_lock = threading.Lock()


def default_solver() -> WordleSolver:
    """The process-wide solver (built on first use, about a second)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = WordleSolver()
        return _default


def solve(answer: str, hard_mode: bool = False) -> list[str]:
    """The default solver's guesses for ``answer``, ending with it."""
    return default_solver().solve(answer, hard_mode=hard_mode)


def expert_guess(history: Sequence[tuple[str, Sequence[str] | int]], rng,
                 openers: Sequence[str] = EXPERT_OPENERS) -> str:
    """A player a small model can imitate (warm-start demonstrations): fixed ``openers``, then a
    random answer consistent with every mark so far (``rng``: a ``random.Random``). It wins about
    99% of games within 6 guesses. Unlike the solver's guesses (63 distinct second guesses over
    300 games, many of them rare words such as THILK or CLOOT), each guess follows from what is
    visible: the openers are always the same and later guesses keep every green in place.
    An opener is skipped once at most two answers remain."""
    opener, cand = _expert_options(history, openers)
    return opener or default_solver().answers[int(cand[rng.randrange(len(cand))])]


def _expert_options(history, openers) -> tuple[Optional[str], Any]:
    """(the opener the expert plays here, or None; the indices of the answers consistent with
    every mark so far)."""
    cand = default_solver().candidates(history)
    if len(cand) == 0:
        raise ValueError("no answer is consistent with the marks given")
    if len(history) < len(openers) and len(cand) > 2:
        return openers[len(history)], cand
    return None, cand


def check_against_reference(n: int = 2000, seed: int = 0) -> None:
    """Assert that the numpy patterns equal ``score_guess`` on ``n`` random pairs (for tests)."""
    import random

    rng = random.Random(seed)
    solver = default_solver()
    for _ in range(n):
        g = rng.randrange(len(solver.guesses))
        a = rng.randrange(solver.n_answers)
        expected = score_guess(solver.answers[a], solver.guesses[g])
        got = marks_from_code(int(solver.by_answer[a, g]))
        assert got == expected, (solver.guesses[g], solver.answers[a], got, expected)
