"""An expert that plays like a person: short passwords for the first rules, and repairs.

The solver (``solver.solve``) writes one 26-rule password (about 130 tokens of markup). A warm
start for a small model needs what a good player does instead, turn by turn:

* **the first password** (``first_password``): only rule 1 is shown, but the texts of rules 1-9
  and 12 are the same in every game, so a player who knows the game writes a short password that
  already holds the first ``k`` of them (a word, digits summing to 25, a month, ...). ``k`` is
  drawn so that each next known rule is included with probability ``p``: a complete password
  (when every rule of the game is known ahead) or one that leaves work for the feedback turns;
* **a repair** (``repair``): after the game's verdicts, keep the password and add or change only
  what the failing rules name (a CAPTCHA appended, the digit run changed from its last digit by
  what the CAPTCHA's digits put the sum over 25, ...); every revealed rule holds afterwards.

Short and varied: a word from a list, digit runs drawn among the ways to make the sum, months,
sponsors, numerals and element symbols drawn per game, parts joined by spaces.
Rules 13-26 (ids 12-25) need far more than an ingredient; when one of them fails, the repair is
the solver's whole password, which holds every rule. Pure Python, no torch: the trainer's warm
start (``gamerl.games.password_game``) plays these through its rollout, and tests check them
against the game.
"""

from __future__ import annotations

import random
import re
from typing import Callable, Sequence

from .instance_types import Instance
from .richtext import parse
from .rules import MONTHS, SPONSORS, check_rules, digit_sum
from .solver import solve

__all__ = ["KNOWN_AHEAD", "MAX_REPAIRED_RULE", "SPECIALS", "WORDS", "first_password", "repair"]

# Rules whose text is the same in every game (a player knows them before they appear): ids 0-8
# and 11. The CAPTCHA (9) and the Wordle answer (10) are the instance's, shown only when revealed.
KNOWN_AHEAD = (0, 1, 2, 3, 4, 5, 6, 7, 8, 11)
# Ids 0..11 get an ingredient; a failing later rule gets the solver's whole password.
MAX_REPAIRED_RULE = 11

_ROMAN = set("IVXLCDM")
WORDS = ("garden", "sunset", "planet", "forest", "silver", "rocket", "candle", "breeze", "harbor",
         "meadow", "puzzle", "window", "bottle", "falcon", "pencil", "orange", "tunnel", "basket",
         "guitar", "pepper", "hello", "tiger", "apple", "river", "sugar", "purple", "bright")
SPECIALS = "!@#$%&?-_.+=~^"  # never '*' (markup) or '\\'
# Numerals for rule 7 alone, and the sets whose product is 35 for rule 9.
NUMERALS = ("V", "VII", "X", "III", "XI")
NUMERALS_35 = (("XXXV",), ("V", "VII"), ("VII", "V"))
# Two-letter element symbols whose first letter is not a Roman numeral (it would change the
# product of rule 9).
SYMBOLS = ("He", "Ne", "Na", "Al", "Ar", "Fe", "Ga", "Ge", "Se", "Br", "Kr", "Sr", "Zn", "Ag",
           "Au", "Sn", "Pb", "Ba", "Be", "Ti")
_DIGITS_RE = re.compile(r"[0-9]+")
_NUMERALS_RE = re.compile(r"[IVXLCDM]+")


def _capitalizable(word: str) -> bool:
    return word[0].upper() not in _ROMAN


def _join(parts: Sequence[str]) -> str:
    return " ".join(p for p in parts if p)


def _digit_run(total: int, rng: random.Random) -> str:
    """Digits (1-9) summing to ``total``, as few as possible, in a random order: 25 -> 997, 979
    or 799 (two nines: room for a CAPTCHA's two digits, ``_make_room``)."""
    if total == 25:
        return rng.choice(("997", "979", "799"))
    n = max(1, -(-total // 9))
    while True:
        digits = [rng.randint(max(1, total - 9 * (n - 1)), 9) for _ in range(n - 1)]
        last = total - sum(digits)
        if 1 <= last <= 9:
            return "".join(map(str, digits + [last]))


def _outside(text: str, keep: str, fn: Callable[[str], str]) -> str:
    """``fn`` applied to the text around every occurrence of ``keep`` (which stays as it is)."""
    if not keep or keep not in text:
        return fn(text)
    return keep.join(fn(piece) for piece in text.split(keep))


# ----------------------------------------------------------------------------- one rule each
# Each fixer makes its rule hold and keeps the rest of the password: an ingredient appended (or
# the digits / numerals rewritten in place of the old ones). (password, instance, rng)


def _fix_length(pw, inst, rng):
    return _join([pw, rng.choice(WORDS)]) if len(pw) < 5 else pw


def _fix_number(pw, inst, rng):
    return _join([pw, str(rng.randint(1, 99))])


def _fix_upper(pw, inst, rng):
    for m in re.finditer(r"(?<![A-Za-z])[a-z]", pw):  # a word's first letter, if not a numeral
        if m.group().upper() not in _ROMAN:
            return pw[:m.start()] + m.group().upper() + pw[m.end():]
    word = rng.choice([w for w in WORDS if _capitalizable(w)])
    return _join([word.capitalize(), pw])


def _fix_special(pw, inst, rng):
    return _join([pw, rng.choice(SPECIALS)])


def _replace(pw: str, pattern: re.Pattern, new: str, keep: str = "") -> str:
    """``pw`` with its first match of ``pattern`` (outside ``keep``) replaced by ``new`` and the
    other matches removed; ``new`` appended when nothing matched."""
    placed: list[bool] = []

    def swap(m: re.Match) -> str:
        if placed:
            return ""
        placed.append(True)
        return new

    out = re.sub(r"  +", " ", _outside(pw, keep, lambda s: pattern.sub(swap, s))).strip()
    return out if placed else _join([out, new])


def _adjust_run(run: str, by: int) -> str | None:
    """``run`` with ``by`` added to its digit sum, digit by digit from the last (each kept within
    0-9): 997 and -6 -> 991, 997 and -11 -> 950, 42 and +3 -> 45. None where the run's digits
    cannot take it (42 and +19)."""
    digits = [int(c) for c in run]
    for i in reversed(range(len(digits))):
        step = max(-digits[i], min(9 - digits[i], by))
        digits[i] += step
        by -= step
    return "".join(map(str, digits)) if by == 0 else None


def _make_room(run: str, captcha: str) -> str | None:
    """A run summing to 25 with its nines, in order, replaced by the nines' complements of the
    CAPTCHA's digits, in order (CAPTCHA ``x4k2q`` on 997: 9-4, 9-2 -> 577; on 979: 579), so that
    run and CAPTCHA sum to 25: a digit-by-digit lookup, no sum. None where the run does not sum
    to 25 or has fewer nines than the CAPTCHA has digits."""
    digits = [c for c in captcha if c.isdigit()]
    nines = [i for i, c in enumerate(run) if c == "9"]
    if digit_sum(run) != 25 or len(nines) < len(digits):
        return None
    out = list(run)
    for i, d in zip(nines, digits):
        out[i] = str(9 - int(d))
    return "".join(out)


def _fix_digit_sum(pw, inst, rng):
    """Digits summing to 25, counting the CAPTCHA's. Where the digits outside the CAPTCHA are one
    run: a run of 25 beside a CAPTCHA with digits makes room for them (``_make_room``: 997 ->
    577 for the CAPTCHA's 4 and 2); any other run changes by what the sum is off, from its last
    digit (9979 alone, 34: 9 too many -> 9970), everything else kept. Otherwise (no run,
    several, or one that cannot take the change) the digits outside the CAPTCHA become one new
    run where the first was."""
    captcha = inst.captcha if inst.captcha in pw else ""
    kept = digit_sum(captcha)
    runs = [run for piece in (pw.split(captcha) if captcha else [pw])
            for run in _DIGITS_RE.findall(piece)]
    if len(runs) == 1:
        total = kept + digit_sum(runs[0])
        adjusted = (kept and _make_room(runs[0], captcha)) or _adjust_run(runs[0], 25 - total)
        if adjusted is not None:
            return _outside(pw, captcha, lambda piece: _DIGITS_RE.sub(adjusted, piece))
    return _replace(pw, _DIGITS_RE, _digit_run(25 - kept, rng), keep=captcha)


def _fix_month(pw, inst, rng):
    month = rng.choice(MONTHS)
    if _capitalizable(month) and rng.random() < 0.5:
        month = month.capitalize()
    return _join([pw, month])


def _fix_numeral(pw, inst, rng):
    return _join([pw, rng.choice(NUMERALS)])


def _fix_product(pw, inst, rng):
    """The numerals become a set whose product is 35, where the first one was. They are the only
    uppercase I V X L C D M the expert writes: its capitalised words, months and element symbols
    never start with one; CAPTCHAs and Wordle answers are lowercase."""
    return _replace(pw, _NUMERALS_RE, " ".join(rng.choice(NUMERALS_35)))


def _fix_sponsor(pw, inst, rng):
    return _join([pw, rng.choice(SPONSORS)])


def _fix_captcha(pw, inst, rng):
    return _join([pw, inst.captcha])


def _fix_wordle(pw, inst, rng):
    return _join([pw, inst.wordle])


def _fix_symbol(pw, inst, rng):
    return _join([pw, rng.choice(SYMBOLS)])


FIXERS: dict[int, Callable[[str, Instance, random.Random], str]] = {
    0: _fix_length, 1: _fix_number, 2: _fix_upper, 3: _fix_special, 4: _fix_digit_sum,
    5: _fix_month, 6: _fix_numeral, 7: _fix_sponsor, 8: _fix_product, 9: _fix_captcha,
    10: _fix_wordle, 11: _fix_symbol,
}
assert set(FIXERS) == set(range(MAX_REPAIRED_RULE + 1))


def _broken(pw: str, inst: Instance, rules: Sequence[int], hatched: bool = False) -> list[int]:
    """The rules of ``rules`` that ``pw`` breaks."""
    n = max(rules, default=-1) + 1
    verdicts = check_rules(parse(pw), inst, n, hatched)
    return [r for r in rules if not verdicts[r]]


def _close(pw: str, inst: Instance, rules: Sequence[int], rng: random.Random,
           hatched: bool = False) -> str | None:
    """Fix the broken rules of ``rules`` one at a time, in order, until all of them hold (a fix
    can break an earlier rule: the CAPTCHA's digits move the digit sum); None if it cannot (a
    rule past MAX_REPAIRED_RULE, or no progress)."""
    for _ in range(3 * len(rules) + 3):
        broken = _broken(pw, inst, rules, hatched)
        if not broken:
            return pw
        if broken[0] > MAX_REPAIRED_RULE:
            return None
        pw = FIXERS[broken[0]](pw, inst, rng)
    return None


def first_password(inst: Instance, num_rules: int, rng: random.Random, p: float) -> str:
    """A first-turn password: a word, then the ingredients of the first ``k`` rules known ahead
    (KNOWN_AHEAD, within the game's ``num_rules``), each next one with probability ``p``. All of
    those rules hold; later ones may hold by chance."""
    known = [r for r in KNOWN_AHEAD if r < num_rules]
    k = 1
    while k < len(known) and rng.random() < p:
        k += 1
    for _ in range(20):
        pw = _close(rng.choice(WORDS), inst, known[:k], rng)
        if pw is not None:
            return pw
    raise RuntimeError(f"no first password for seed {inst.seed}")  # not seen in 10,000 games


def repair(inst: Instance, password: str, verdicts: Sequence[bool | None], rng: random.Random,
           hatched: bool = False) -> str:
    """The next password after the game's ``verdicts`` on ``password`` (one per revealed rule):
    the same password with what the failing rules name added or changed, so that every revealed
    rule holds. The solver's password (every rule) when a failing rule is past MAX_REPAIRED_RULE."""
    revealed = list(range(len(verdicts)))
    if all(verdicts):
        return password
    fixed = _close(password, inst, revealed, rng, hatched)
    return fixed if fixed is not None else solve(inst, hatched=hatched)
