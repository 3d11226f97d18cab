"""Chemical elements and Roman numerals as the Password Game reads them."""

from __future__ import annotations

import functools
import math
import re
import string

# Symbol -> atomic number for all 118 elements (IUPAC symbols).
_SYMBOLS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br "
    "Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho "
    "Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es "
    "Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og"
).split()
ATOMIC_NUMBER: dict[str, int] = {s: z for z, s in enumerate(_SYMBOLS, start=1)}
TWO_LETTER_SYMBOLS = frozenset(s for s in ATOMIC_NUMBER if len(s) == 2)

# A symbol starts at an uppercase letter; a lowercase letter after it makes a two-letter candidate.
_SYMBOL_CANDIDATE_RE = re.compile(r"[A-Z][a-z]?")


@functools.lru_cache(maxsize=64)
def _symbol_candidates(plain: str) -> tuple[str, ...]:
    # Memoized per text: rules 11 and 17 both read the elements of the same password.
    return tuple(_SYMBOL_CANDIDATE_RE.findall(plain))


def element_symbols(plain: str) -> list[str]:
    """The element symbols in ``plain``, read left to right, two-letter symbols first.

    ``"He"`` is helium (2), not hydrogen plus something; ``"Hx"`` is hydrogen; repeats count
    every time. A lowercase letter can never start a symbol, so skipping the second letter of a
    failed two-letter candidate loses nothing.
    """
    found: list[str] = []
    for cand in _symbol_candidates(plain):
        if cand in ATOMIC_NUMBER:
            found.append(cand)
        elif cand[0] in ATOMIC_NUMBER:
            found.append(cand[0])
    return found


# Every candidate the scan can produce -> the atomic number it reads as ("Hx" reads as H, "Qx" as
# nothing), so the sum is one C-level map over the candidates.
_CANDIDATE_Z = {
    a + b: ATOMIC_NUMBER.get(a + b, ATOMIC_NUMBER.get(a, 0))
    for a in string.ascii_uppercase for b in ("", *string.ascii_lowercase)
}


def atomic_sum(plain: str) -> int:
    return sum(map(_CANDIDATE_Z.__getitem__, _symbol_candidates(plain)))


def has_two_letter_symbol(plain: str) -> bool:
    return not TWO_LETTER_SYMBOLS.isdisjoint(_symbol_candidates(plain))


_ROMAN_RUN_RE = re.compile(r"[IVXLCDM]+")
# One Roman numeral in standard form (1..3999), as neal.fun matches them.
_ROMAN_NUMERAL_RE = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUE = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_value(numeral: str) -> int:
    total = 0
    for a, b in zip(numeral, numeral[1:] + " "):
        v = _ROMAN_VALUE[a]
        total += -v if b != " " and _ROMAN_VALUE[b] > v else v
    return total


@functools.lru_cache(maxsize=64)
def _roman_runs(plain: str) -> tuple[str, ...]:
    # Memoized per text: rules 6 and 8 both read the numerals of the same password.
    return tuple(_ROMAN_RUN_RE.findall(plain))


def has_roman_numeral(plain: str) -> bool:
    return bool(_roman_runs(plain))


def roman_numerals(plain: str) -> list[str]:
    """Roman numerals in ``plain``: uppercase I V X L C D M only.

    Each maximal run of numeral letters is cut greedily into standard-form numerals, so
    ``"XXXV"`` is 35, ``"VV"`` is 5 and 5, and ``"IIII"`` is 3 and 1.
    """
    return [n for run in _ROMAN_RUN_RE.findall(plain) for n in _split_run(run)]


def _split_run(run: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(run):
        m = _ROMAN_NUMERAL_RE.match(run, pos)
        end = m.end() if m and m.end() > pos else pos + 1  # defensive: always advance
        out.append(run[pos:end])
        pos = end
    return out


def roman_product(plain: str, cap: int = 10**6) -> int:
    """Product of the Roman numerals in ``plain`` (0 if there are none).

    Stops multiplying once the product passes ``cap``, so a megabyte of ``M`` stays cheap.
    """
    runs = _roman_runs(plain)
    if not runs:
        return 0
    product = 1
    for run in runs:
        product *= _run_product(run[:64]) if len(run) <= 64 else cap + 1
        if product > cap:
            return product
    return product


@functools.lru_cache(maxsize=4096)
def _run_product(run: str) -> int:
    return math.prod(roman_value(n) for n in _split_run(run))
