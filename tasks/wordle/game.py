"""Wordle as a seeded, turn-based environment (the one source of truth for its rules).

Protocol (shared by every game in ``tasks/``): ``reset(seed) -> observation`` and
``step(guess) -> StepResult(observation, reward, done, info)``; observations and infos are plain
JSON-able dicts, so the in-process environment and the HTTP server return identical objects.

Rules (standard Wordle):
* the answer is one of the 2,309 answers, drawn from the seed (``make_instance``);
* ``max_guesses`` (6) turns; each guess must be one of the 12,972 valid words (answers plus allowed
  guesses), case-insensitive, surrounding whitespace ignored;
* a valid guess is marked letter by letter: green (right letter, right spot), yellow (in the word,
  wrong spot) or grey (not in the word, or no unmatched copy left), greens first, then yellows left
  to right limited by the answer's remaining copies of the letter (``words.score_guess``);
* an INVALID guess (empty, wrong length, characters other than a-z, not in the word list, or in
  hard mode a guess that ignores a revealed hint) is a WASTED TURN: it uses one of the turns, gets
  no marks, and the observation and ``info["message"]`` say what was wrong;
* a REPEATED guess (a valid word already guessed) is marked as usual but earns nothing, and uses a
  turn;
* the episode ends when the answer is guessed (success) or the turns run out (the answer is then
  shown). Another ``step`` raises ``GameOver``.

Hard mode (``hard_mode=True``, optional): every green must stay in place and every revealed letter
(green or yellow, with its count) must be used again; a guess that does not is invalid (a wasted
turn with a message saying which hint it ignored).
"""

from __future__ import annotations

import math
import random
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from ..common.protocol import MAX_SEED, GameOver, StepResult, check_seed
from .words import (EMOJI, GREEN, GREY, WORD_LENGTH, YELLOW, answer_index, answers, emoji,
                    is_ascii_lower, score_guess, valid_words)

__all__ = ["GameOver", "RewardConfig", "StepResult", "WordleConfig", "WordleGame",
           "WordleInstance", "check_guess", "feedback", "make_instance", "normalize_guess"]

MAX_ECHO = 24  # characters of an invalid guess repeated back in messages

INSTRUCTIONS = (
    "You are playing Wordle. Guess the secret 5-letter English word. Reply with one 5-letter word. "
    "After each guess every letter is marked: 🟩 right letter in the right spot, 🟨 in the word "
    "but in another spot, ⬜ not in the word (or no more copies of it). A guess that is not a "
    "valid 5-letter word wastes a turn; repeating a guess wastes a turn too."
)


# ============================================================================ configuration
@dataclass
class RewardConfig:
    """Per-turn rewards. Every field is configurable; the defaults are:

    * ``win_reward`` 1.0, ``turn_decay`` 0.1: guessing the answer on turn ``t`` (wasted turns
      count) pays ``win_reward * max(0, 1 - turn_decay * (t - 1))``: 1.0 on turn 1 down to 0.5
      on turn 6;
    * ``green_reward`` 0.1 per position turned green for the FIRST time in the episode;
    * ``present_reward`` 0.05 per newly found copy of a letter in the answer: the known count of a
      letter is the most green+yellow marks it got in one guess, and each increase pays (so
      finding that the answer has two ``e`` pays twice);
    * ``invalid_penalty`` 0.1 subtracted for an invalid guess (a wasted turn);
    * ``repeat_penalty`` 0.0 subtracted for a repeated guess: a repeat earns nothing (no partial
      credit: its marks are not new), set it above 0 to punish it;
    * ``loss_penalty`` 0.0 subtracted on the last turn of an episode that is not won;
    * ``latest_green_reward`` 0.0 per green in the latest new valid guess, paid as a difference:
      a guess pays ``latest_green_reward`` × (its greens − the previous such guess's greens), so
      keeping the greens found pays nothing, dropping them costs, and over an episode it sums to
      ``latest_green_reward`` × the last new guess's greens (verifiers' Wordle pays partial
      credit on the final guess's marks the same way). The first-time ``green_reward`` pays a
      green once, so a guess that keeps it earns no more than one that drops it; this term
      prices board reading. A guess that drops greens can earn less than a repeat: keep
      ``repeat_penalty`` above 0 with it, so that a guess keeping the greens beats a repeat.
    * ``fit_reward`` 0.0 for a valid guess after the first that could still be the answer: had
      it been the answer, every earlier valid guess would have got the marks it did
      (``fits_marks``). It prices reading the whole board, greys and yellows too, where
      ``latest_green_reward`` prices the greens only; a repeat never fits (it would have won)
      and the winning guess always does.

    The partial credit is a potential difference (potential = ``green_reward`` × known greens +
    ``present_reward`` × known letter copies), so over a won episode it sums to exactly
    ``5 * (green_reward + present_reward)`` whatever the path: it shapes play toward informative
    guesses without paying for stalling, and the return of a win falls with every turn used. With
    the defaults a win returns 1.75 on turn 1 down to 1.25 on turn 6 (0.75 if five turns were
    wasted on invalid guesses) and any loss at most 0.65.
    """

    win_reward: float = 1.0
    turn_decay: float = 0.1
    green_reward: float = 0.1
    present_reward: float = 0.05
    invalid_penalty: float = 0.1
    repeat_penalty: float = 0.0
    loss_penalty: float = 0.0
    latest_green_reward: float = 0.0
    fit_reward: float = 0.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value):
                raise ValueError(f"reward.{name} must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"reward.{name} must be >= 0 (penalties are subtracted), "
                                 f"got {value!r}")

    def win(self, turns_used: int) -> float:
        return self.win_reward * max(0.0, 1.0 - self.turn_decay * (turns_used - 1))


@dataclass
class WordleConfig:
    """``max_guesses`` turns per episode (6); ``hard_mode`` enforces revealed hints."""

    max_guesses: int = 6
    hard_mode: bool = False
    reward: RewardConfig = field(default_factory=RewardConfig)

    def __post_init__(self) -> None:
        if isinstance(self.reward, dict):
            self.reward = RewardConfig(**self.reward)
        if isinstance(self.max_guesses, bool) or not isinstance(self.max_guesses, int) \
                or not 1 <= self.max_guesses <= 100:
            raise ValueError("max_guesses must be an int in [1, 100]")
        if not isinstance(self.hard_mode, bool):
            raise ValueError("hard_mode must be a bool")


# ============================================================================ instances
@dataclass(frozen=True)
class WordleInstance:
    seed: int | None  # None when the answer was given directly
    answer: str


def make_instance(seed: int) -> WordleInstance:
    """The instance for ``seed``: its answer is ``answers()[Random(seed).randrange(2309)]``,
    the same on every run and platform."""
    seed = check_seed(seed)
    words = answers()
    return WordleInstance(seed, words[random.Random(seed).randrange(len(words))])


def instance_for_answer(answer: str) -> WordleInstance:
    """An instance with a given answer (evaluation over every answer); it has no seed."""
    if not isinstance(answer, str):
        raise TypeError("answer must be a string")
    word = answer.strip().lower()
    if word not in answer_index():
        raise ValueError(f"{answer[:MAX_ECHO]!r} is not one of the {len(answers())} answers")
    return WordleInstance(None, word)


# ============================================================================ guesses
def normalize_guess(guess: str) -> str:
    """What a guess means: surrounding whitespace removed, lowercase."""
    return guess.strip().lower()


def _echo(text: str) -> str:
    return text if len(text) <= MAX_ECHO else text[:MAX_ECHO] + "..."


def check_guess(guess: str) -> str | None:
    """``None`` if ``guess`` (normalized) is a valid word, else why it is not."""
    if not guess:
        return "empty guess: type a 5-letter word"
    if not is_ascii_lower(guess):
        return f"{_echo(guess)!r} is not a word: use only the letters a-z"
    if len(guess) != WORD_LENGTH:
        return f"{_echo(guess)!r} has {len(guess)} letters: a guess has exactly 5"
    if guess not in valid_words():
        return f"{guess!r} is not in the word list"
    return None


def hard_mode_violation(guess: str, history: list[tuple[str, list[str]]]) -> str | None:
    """Why ``guess`` breaks hard mode given the scored guesses so far, or ``None``."""
    for prev, marks in history:
        for i, (letter, mark) in enumerate(zip(prev, marks)):
            if mark == GREEN and guess[i] != letter:
                return (f"hard mode: letter {i + 1} must be {letter.upper()} "
                        f"(it was green in {prev.upper()})")
        need: dict[str, int] = {}
        for letter, mark in zip(prev, marks):
            if mark != GREY:
                need[letter] = need.get(letter, 0) + 1
        for letter, count in sorted(need.items()):
            if guess.count(letter) < count:
                times = "" if count == 1 else f" {count} times"
                return (f"hard mode: the guess must contain {letter.upper()}{times} "
                        f"(revealed by {prev.upper()})")
    return None


def fits_marks(word: str, history) -> bool:
    """Whether ``word`` could still be the answer after ``history`` (``(guess, marks)`` pairs):
    had it been the answer, every guess would have got the marks it did."""
    return all(score_guess(word, guess) == list(marks) for guess, marks in history)


def feedback(answer: str, guess: str) -> list[str]:
    """Stateless marks of a guess against an answer (both normalized first). ``ValueError`` if
    the guess is not a valid word or the answer is not 5 letters a-z."""
    a, g = normalize_guess(answer), normalize_guess(guess)
    if len(a) != WORD_LENGTH or not is_ascii_lower(a):
        raise ValueError(f"answer {_echo(answer)!r} is not a 5-letter word")
    problem = check_guess(g)
    if problem:
        raise ValueError(problem)
    return score_guess(a, g)


# ============================================================================ the game
class WordleGame:
    """One episode at a time. Not thread-safe (the server holds one per session)."""

    def __init__(self, config: WordleConfig | None = None) -> None:
        self.config = config or WordleConfig()
        self.instance: WordleInstance | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        self.turn = 0
        self.done = False
        self.success = False
        self.scored: list[tuple[str, list[str]]] = []  # valid guesses and their marks
        self.attempts: list[dict[str, Any]] = []  # every turn: guess, valid, message
        self.known_greens: set[int] = set()
        self.known_counts: dict[str, int] = {}
        self.latest_greens = 0  # greens of the latest new valid guess (latest_green_reward)
        self.total_reward = 0.0

    # ------------------------------------------------------------------ protocol
    def reset(self, seed: int | None = None, *, answer: str | None = None) -> dict[str, Any]:
        """A new episode: ``seed`` (``None``: a random one, reported in the observation), or a
        given ``answer`` (one of the answers; the observation's seed is then ``None``)."""
        if answer is not None:
            if seed is not None:
                raise ValueError("give a seed or an answer, not both")
            self.instance = instance_for_answer(answer)
        else:
            seed = secrets.randbelow(MAX_SEED + 1) if seed is None else seed
            self.instance = make_instance(seed)
        self._reset_state()
        return self.observation()

    def step(self, guess: str) -> StepResult:
        inst = self._require_instance()
        if self.done:
            raise GameOver("the episode has ended; call reset()")
        if not isinstance(guess, str):
            raise TypeError("guess must be a string")
        cfg = self.config.reward
        self.turn += 1
        word = normalize_guess(guess)
        problem = self._problem(word)
        marks: list[str] | None = None
        repeated = False
        new_greens = new_letters = 0
        won = 0.0
        if problem is not None:
            reward = 0.0 - cfg.invalid_penalty  # 0.0 - 0.0 is +0.0
        else:
            marks = score_guess(inst.answer, word)
            repeated = any(prev == word for prev, _ in self.scored)
            # Only when it pays: the check scores the guess against every earlier one.
            fits = bool(cfg.fit_reward and self.scored and fits_marks(word, self.scored))
            self.scored.append((word, marks))
            if repeated:
                reward = 0.0 - cfg.repeat_penalty
            else:
                new_greens, new_letters = self._learn(word, marks)
                reward = cfg.green_reward * new_greens + cfg.present_reward * new_letters
                greens = marks.count(GREEN)
                reward += cfg.latest_green_reward * (greens - self.latest_greens)
                self.latest_greens = greens
            reward += cfg.fit_reward * fits
            if word == inst.answer:
                self.success = True
                won = cfg.win(self.turn)
                reward += won
        self.attempts.append({"guess": word if problem is None else _echo(word),
                              "valid": problem is None, "message": problem})
        self.done = self.success or self.turn >= self.config.max_guesses
        lost = self.done and not self.success
        if lost:
            reward -= cfg.loss_penalty
        self.total_reward += reward
        info = {
            "guess": self.attempts[-1]["guess"],
            "valid": problem is None,
            "message": problem,
            "marks": marks,
            "pattern": emoji(marks) if marks else None,
            "repeated": repeated,
            "new_greens": new_greens,
            "new_letters": new_letters,
            "win_reward": won,
            "success": self.success,
            "turn": self.turn,
            "guesses_left": self.config.max_guesses - self.turn,
            "seed": inst.seed,
            "answer": inst.answer if self.done else None,
        }
        return StepResult(self.observation(), float(reward), self.done, info)

    def check(self, guess: str) -> dict[str, Any]:
        """Would ``guess`` be accepted now? Uses no turn and reveals no marks (marks without a
        turn would let a player probe the answer for free)."""
        self._require_instance()
        if not isinstance(guess, str):
            raise TypeError("guess must be a string")
        word = normalize_guess(guess)
        problem = self._problem(word)
        return {"guess": word if problem is None else _echo(word), "valid": problem is None,
                "message": problem,
                "repeated": problem is None and any(p == word for p, _ in self.scored)}

    def _problem(self, word: str) -> str | None:
        problem = check_guess(word)
        if problem is None and self.config.hard_mode:
            problem = hard_mode_violation(word, self.scored)
        return problem

    def _learn(self, word: str, marks: list[str]) -> tuple[int, int]:
        """Record what a new valid guess revealed; returns (new green positions, new letter
        copies)."""
        new_greens = 0
        for i, m in enumerate(marks):
            if m == GREEN and i not in self.known_greens:
                self.known_greens.add(i)
                new_greens += 1
        counts: dict[str, int] = {}
        for letter, m in zip(word, marks):
            if m != GREY:
                counts[letter] = counts.get(letter, 0) + 1
        new_letters = 0
        for letter, n in counts.items():
            known = self.known_counts.get(letter, 0)
            if n > known:
                new_letters += n - known
                self.known_counts[letter] = n
        return new_greens, new_letters

    # ------------------------------------------------------------------ views
    def letter_status(self) -> dict[str, str]:
        """The best mark each guessed letter has had (green > yellow > grey), alphabetical."""
        rank = {GREY: 0, YELLOW: 1, GREEN: 2}
        best: dict[str, str] = {}
        for word, marks in self.scored:
            for letter, m in zip(word, marks):
                if letter not in best or rank[m] > rank[best[letter]]:
                    best[letter] = m
        return dict(sorted(best.items()))

    def observation(self) -> dict[str, Any]:
        inst = self._require_instance()
        letters = self.letter_status()
        return {
            "seed": inst.seed,
            "turn": self.turn,
            "max_guesses": self.config.max_guesses,
            "guesses_left": self.config.max_guesses - self.turn,
            "guesses": [w for w, _ in self.scored],
            "marks": [list(m) for _, m in self.scored],
            "attempts": [dict(a) for a in self.attempts],
            "letters": letters,
            "hard_mode": self.config.hard_mode,
            "done": self.done,
            "success": self.success,
            "answer": inst.answer if self.done else None,
            "text": self._render(letters),
        }

    def state(self) -> dict[str, Any]:
        """The observation plus the answer and the reward so far (debugging)."""
        inst = self._require_instance()
        return {**self.observation(), "answer": inst.answer, "total_reward": self.total_reward}

    def _render(self, letters: dict[str, str]) -> str:
        cfg = self.config
        lines = [INSTRUCTIONS]
        if cfg.hard_mode:
            lines.append("Hard mode: greens must stay in place and revealed letters must be "
                         "used again.")
        if self.attempts:
            lines.append("Board:")
            scored = iter(self.scored)
            for n, att in enumerate(self.attempts, 1):
                if att["valid"]:
                    word, marks = next(scored)
                    note = "  (repeated: no new information)" if any(
                        a["valid"] and a["guess"] == word for a in self.attempts[:n - 1]) else ""
                    lines.append(f"{n}. {word.upper()}  {emoji(marks)}{note}")
                else:
                    lines.append(f"{n}. (wasted turn) {att['message']}")
            groups = [(EMOJI[GREEN], GREEN), (EMOJI[YELLOW], YELLOW), (EMOJI[GREY], GREY)]
            parts = []
            for icon, status in groups:
                these = [c.upper() for c, s in letters.items() if s == status]
                if these:
                    parts.append(f"{icon} {' '.join(these)}")
            untried = [c.upper() for c in "abcdefghijklmnopqrstuvwxyz" if c not in letters]
            parts.append(f"not tried: {' '.join(untried) if untried else '-'}")
            lines.append("Letters: " + " | ".join(parts))
        else:
            lines.append("Board: (no guesses yet)")
        if self.success:
            lines.append(f"Solved in {self.turn} guess{'es' if self.turn != 1 else ''}: "
                         f"the answer is {self.instance.answer.upper()}. You win!")  # type: ignore[union-attr]
        elif self.done:
            lines.append(f"Out of guesses. The answer was "
                         f"{self.instance.answer.upper()}.")  # type: ignore[union-attr]
        else:
            left = cfg.max_guesses - self.turn
            lines.append(f"Guesses left: {left} of {cfg.max_guesses}. Your guess:")
        return "\n".join(lines)

    def _require_instance(self) -> WordleInstance:
        if self.instance is None:
            raise RuntimeError("call reset() first")
        return self.instance


def corpus_texts(n: int = 32) -> list[str]:
    """Text a tokenizer for this game should know: a few observations and the answer list."""
    texts = [" ".join(answers())]
    for seed in range(n):
        game = WordleGame()
        game.reset(seed)
        for guess in ("crane", "xyzzy", "slate", "crane"):
            if not game.done:
                game.step(guess)
        texts.append(game.observation()["text"])
    return texts
