"""A constructive solver: for any instance, a password that satisfies all 26 rules.

It is the proof that every instance is solvable (``make_instance`` keeps only instances it solves),
the upper-bound row in evaluation, and a source of demonstrations.

Construction: the content rules are satisfied by plain words joined by spaces (so no two parts can
merge into a Roman numeral or an element symbol), chosen to use as few distinct letters as possible;
then the numeric rules are closed exactly: Roman numerals to reach a product of 35, a run of digits
to reach a digit sum of 25, and element symbols (by a small coin-change search) to reach an atomic
sum of 200. Finally every vowel is bolded and everything italicised (rules 18 and 25).
"""

from __future__ import annotations

import functools

from .chemistry import ATOMIC_NUMBER, atomic_sum, has_two_letter_symbol, roman_product
from .instance_types import Instance
from .richtext import format_solution, parse
from .rules import (AFFIRMATIONS, CHICKEN, EGG, MONTHS, NUM_RULES, SPONSORS, WORM, check_rules,
                    digit_sum)

LIFTER = "🏋️‍♂️"
_ROMAN_LETTERS = set("IVXLCDM")
_NO_WAY = 10**9
# Ways to bring the Roman product from p to 35 with numerals of our own (p divides 35).
_ROMAN_COMPLETIONS = {35: (("XXXV",), ("V", "VII")), 7: (("VII",),), 5: (("V",),), 1: ((),)}


def _letters(s: str) -> set[str]:
    return {c for c in s.lower() if "a" <= c <= "z"}


def _pick(options, used: set[str], banned: set[str]):
    """The option that adds the fewest new letters and uses no banned letter (or None)."""
    allowed = [o for o in options if not (_letters(o) & banned)]
    return min(allowed, key=lambda o: len(_letters(o) - used), default=None)


@functools.lru_cache(maxsize=64)
def _element_coins(banned: frozenset[str]) -> tuple[tuple[str, int], ...]:
    # Symbols we may add freely: no banned letter, and not starting with a Roman numeral letter
    # (C, I, V, ... would change rule 8's product).
    return tuple((s, z) for s, z in ATOMIC_NUMBER.items()
                 if s[0] not in _ROMAN_LETTERS and not (_letters(s) & banned))


@functools.lru_cache(maxsize=512)
def _coin_change_table(banned: frozenset[str]) -> tuple[tuple[int, str | None], ...]:
    """For every total 0..200: (fewest symbols, last symbol) by unbounded coin change."""
    coins = _element_coins(banned)
    table: list[tuple[int, str | None]] = [(0, None)] + [(_NO_WAY, None)] * 200
    for total in range(1, 201):
        best = (_NO_WAY, None)
        for sym, z in coins:
            if z <= total and table[total - z][0] + 1 < best[0]:
                best = (table[total - z][0] + 1, sym)
        table[total] = best
    return tuple(table)


def _fewest_symbols(target: int, banned: frozenset[str]) -> tuple[str, ...] | None:
    """Fewest element symbols (repeats allowed) whose atomic numbers sum to ``target`` (<= 200)."""
    table = _coin_change_table(banned)
    if table[target][0] == _NO_WAY:
        return None
    out: list[str] = []
    while target:
        sym = table[target][1]
        out.append(sym)
        target -= ATOMIC_NUMBER[sym]
    return tuple(out)


def _element_fill(target: int, banned: frozenset[str], need_two_letter: bool) -> tuple[str, ...] | None:
    if not need_two_letter:
        return _fewest_symbols(target, banned)
    options = []
    for sym, z in _element_coins(banned):
        if len(sym) == 2 and z <= target:
            rest = _fewest_symbols(target - z, banned)
            if rest is not None:
                options.append((sym,) + rest)
    return min(options, key=len, default=None)


def _digit_fill(target: int) -> str:
    nines, rest = divmod(target, 9)
    return "9" * nines + (str(rest) if rest else "")


def solve_plain(inst: Instance, hatched: bool = True) -> str | None:
    """Plain text of a password satisfying every rule except the two formatting rules, or None."""
    banned = set(inst.banned)
    if _letters(inst.captcha + inst.wordle) & banned:
        return None
    used = _letters(inst.captcha + inst.wordle)
    words = []
    for options in ((inst.country.name, *inst.country.aliases), SPONSORS, MONTHS, AFFIRMATIONS):
        choice = _pick(options, used, banned)
        if choice is None:
            return None
        words.append(choice)
        used |= _letters(choice)
    emoji = [inst.moon, CHICKEN if hatched else EGG, WORM * 3, LIFTER * 3]
    fixed = [inst.captcha, inst.wordle, *words, *emoji, "0"]  # 0 is a leap year (as in neal.fun)
    videos = [v for v in inst.videos if v.seconds == inst.video_seconds and not (_letters(v.url) & banned)]
    mates = [m for m in inst.chess.mates if not (_letters(m) & banned)]
    frozen_banned = frozenset(banned)
    for video in videos:
        for mate in mates:
            base = " ".join([*fixed, video.url, mate])
            product = roman_product(base) or 1
            if 35 % product:
                continue
            for numerals in _ROMAN_COMPLETIONS[35 // product]:
                if _letters("".join(numerals)) & banned:
                    continue
                text = " ".join([base, *numerals])
                digits_needed = 25 - digit_sum(text)
                atoms_needed = 200 - atomic_sum(text)
                if digits_needed < 0 or atoms_needed < 0:
                    continue
                fill = _element_fill(atoms_needed, frozen_banned, not has_two_letter_symbol(text))
                if fill is None:
                    continue
                parts = [text, _digit_fill(digits_needed), *fill]
                candidate = " ".join(p for p in parts if p)
                verdicts = check_rules(parse(candidate), inst, NUM_RULES, hatched)
                # Everything but the formatting rules must already hold.
                if all(v for i, v in enumerate(verdicts) if i not in (18, 25)):
                    return candidate
    return None


def solve(inst: Instance, hatched: bool = True) -> str:
    """A rich-text password satisfying all 26 rules (Paul as 🐔 if ``hatched`` else 🥚).

    With ``hatched=False`` the password is the one to submit before rule 22 appears: the game
    hatches the egg when it does, so that single password can win a fresh game.
    """
    plain = solve_plain(inst, hatched)
    if plain is None:  # make_instance only returns instances this solves
        raise RuntimeError(f"no solution for seed {inst.seed}")
    return format_solution(plain)
