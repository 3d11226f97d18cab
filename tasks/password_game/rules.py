"""The 26 rules of the Password Game (ids 0..25; neal.fun numbers them 1..26).

Each rule is a pure check ``check(pw, inst, hatched) -> bool`` over a parsed password
(:class:`~tasks.password_game.richtext.RichText`), the seeded :class:`Instance`, and whether Paul
has hatched (rule 22 revealed). Texts name every offline or turn-based adaptation so that a player
(or a model) reading them knows the exact rule. PASSWORD_GAME_README.md lists each check and how it
differs from neal.fun.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from .chemistry import atomic_sum, has_roman_numeral, has_two_letter_symbol, roman_product
from .instance_types import MOON_EMOJI, Instance
from .richtext import RichText

NUM_RULES = 26
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
SPONSORS = ("pepsi", "starbucks", "shell")
AFFIRMATIONS = ("i am loved", "i am worthy", "i am enough")
EGG, CHICKEN, WORM, FIRE = "🥚", "🐔", "🐛", "🔥"
WEIGHTLIFTER = "\U0001F3CB"  # base of 🏋️‍♂️; any variant (🏋, 🏋️, 🏋️‍♂️, 🏋️‍♀️) counts once
STRENGTH_NEEDED = 3
WORMS_MIN, WORMS_MAX = 3, 8
RULE_FIRE, RULE_PAUL, RULE_HATCH = 19, 16, 22

_NUMBER_RE = re.compile(r"[0-9]+")
_UPPER_RE = re.compile(r"[A-Z]")
_SPECIAL_RE = re.compile(r"[^A-Za-z0-9\s]")
# Case-insensitive rules match these against the lowercased plain text.
_MONTH_RE = re.compile("|".join(MONTHS))
_SPONSOR_RE = re.compile("|".join(SPONSORS))
_AFFIRMATION_RE = re.compile("|".join(AFFIRMATIONS))
# The optional "https://", "www." or "m." before these changes nothing, so it is not matched.
_YOUTUBE_RE = re.compile(r"(?:youtube\.com/watch\?v=|youtu\.be/)([A-Za-z0-9_-]{11})(?![A-Za-z0-9_-])")


@functools.lru_cache(maxsize=64)
def _digit_runs(plain: str) -> tuple[str, ...]:
    # Memoized per text: rules 1, 4 and 14 all read the digits of the same password.
    return tuple(_NUMBER_RE.findall(plain))


def digit_sum(plain: str) -> int:
    return sum(map(int, "".join(_digit_runs(plain))))


def is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def has_leap_year(plain: str) -> bool:
    # n mod 400 depends only on the last four digits, so a huge digit run costs nothing.
    for number in _digit_runs(plain):
        if is_leap_year(int(number[-4:])):
            return True
    return False


def youtube_ids(plain: str) -> list[str]:
    return _YOUTUBE_RE.findall(plain) if "youtu" in plain else []


def chess_move_present(plain: str, inst: Instance) -> bool:
    return any(san.rstrip("#+") in plain for san in inst.chess.mates)


def paul_present(plain: str, hatched: bool) -> bool:
    # Before hatching Paul is the egg. When rule 22 appears the egg in the password hatches
    # (the game turns 🥚 into 🐔, as neal.fun does); from then on Paul is the chicken.
    return (CHICKEN in plain) if hatched else (EGG in plain)


def _fmt_seconds(seconds: int) -> str:
    m, s = divmod(seconds, 60)
    return f"{m} minute{'s' if m != 1 else ''} {s} second{'s' if s != 1 else ''}"


# ---------------------------------------------------------------------------- the rules
Check = Callable[[RichText, Instance, bool], bool]
Text = Callable[[Instance, bool], str]


@dataclass(frozen=True)
class Rule:
    id: int
    name: str  # a few words for tables and figures ("digits sum to 25"); the text says it all
    text: Text
    check: Check


def _const(s: str) -> Text:
    return lambda inst, hatched: s


def _country_text(inst: Instance, hatched: bool) -> str:
    clues = " ".join(inst.country.clues)
    return f"Your password must include the name of this country. Street View (offline): {clues}"


def _chess_text(inst: Instance, hatched: bool) -> str:
    return (f"Your password must include the best move in algebraic chess notation. "
            f"{inst.chess.side_to_move} to move and mate in one. Position (FEN): {inst.chess.fen} "
            f"(any mating move in standard algebraic notation counts; the '#' is optional)")


def _paul_text(inst: Instance, hatched: bool) -> str:
    base = ("🥚 This is my chicken Paul. He hasn't hatched yet, please put him in your password "
            "and keep him safe.")
    return base + (" (He has hatched: keep 🐔 in your password.)" if hatched else "")


def _video_text(inst: Instance, hatched: bool) -> str:
    results = "; ".join(f"{v.url} ({v.length_text})" for v in inst.videos)
    return (f"Your password must include the URL of a YouTube video that is "
            f"{_fmt_seconds(inst.video_seconds)} long. Offline search results: {results}")


def _sacrifice_text(inst: Instance, hatched: bool) -> str:
    a, b = inst.banned
    return (f"A sacrifice must be made. The letters '{a}' and '{b}' have been sacrificed: you can "
            f"no longer use them (in either case).")


RULES: tuple[Rule, ...] = (
    Rule(0, "5+ characters", _const("Your password must be at least 5 characters."),
         lambda pw, inst, h: len(pw.plain) >= 5),
    Rule(1, "a number", _const("Your password must include a number."),
         lambda pw, inst, h: bool(_digit_runs(pw.plain))),
    Rule(2, "uppercase letter", _const("Your password must include an uppercase letter."),
         lambda pw, inst, h: _UPPER_RE.search(pw.plain) is not None),
    Rule(3, "special character", _const("Your password must include a special character."),
         lambda pw, inst, h: _SPECIAL_RE.search(pw.plain) is not None),
    Rule(4, "digits sum to 25", _const("The digits in your password must add up to 25."),
         lambda pw, inst, h: digit_sum(pw.plain) == 25),
    Rule(5, "a month", _const("Your password must include a month of the year."),
         lambda pw, inst, h: _MONTH_RE.search(pw.lower) is not None),
    Rule(6, "Roman numeral",
         _const("Your password must include a Roman numeral (uppercase I, V, X, L, C, D or M)."),
         lambda pw, inst, h: has_roman_numeral(pw.plain)),
    Rule(7, "a sponsor",
         _const("Your password must include one of our sponsors: pepsi, starbucks, shell."),
         lambda pw, inst, h: _SPONSOR_RE.search(pw.lower) is not None),
    Rule(8, "Roman product 35",
         _const("The Roman numerals in your password should multiply to 35."),
         lambda pw, inst, h: roman_product(pw.plain) == 35),
    Rule(9, "CAPTCHA", lambda inst, h: f"Your password must include this CAPTCHA: {inst.captcha}",
         lambda pw, inst, h: inst.captcha in pw.plain),
    Rule(10, "Wordle answer",
         lambda inst, h: (f"Your password must include today's Wordle answer. (Offline: "
                          f"today's answer is \"{inst.wordle}\".)"),
         lambda pw, inst, h: inst.wordle in pw.lower),
    Rule(11, "element symbol",
         _const("Your password must include a two letter symbol from the periodic table."),
         lambda pw, inst, h: has_two_letter_symbol(pw.plain)),
    Rule(12, "moon phase",
         lambda inst, h: (f"Your password must include the current phase of the moon as an "
                          f"emoji. (This game takes place on {inst.date.isoformat()}; phases: "
                          f"{' '.join(MOON_EMOJI)}.)"),
         lambda pw, inst, h: inst.moon in pw.plain),
    Rule(13, "country", _country_text,
         lambda pw, inst, h: any(n in pw.lower
                                 for n in (inst.country.name, *inst.country.aliases))),
    Rule(14, "leap year", _const("Your password must include a leap year."),
         lambda pw, inst, h: has_leap_year(pw.plain)),
    Rule(15, "chess mate", _chess_text, lambda pw, inst, h: chess_move_present(pw.plain, inst)),
    Rule(16, "Paul", _paul_text, lambda pw, inst, h: paul_present(pw.plain, h)),
    Rule(17, "atomic sum 200",
         _const("The elements in your password must have atomic numbers that add up to 200."),
         lambda pw, inst, h: atomic_sum(pw.plain) == 200),
    Rule(18, "bold vowels",
         _const("All the vowels in your password must be bolded (write **a** for a bold a)."),
         lambda pw, inst, h: pw.unbolded_vowels == 0),
    Rule(19, "no fire",
         _const("Oh no! Your password is on fire 🔥. Quick, put it out! (No 🔥 may remain in "
                "the password; the fire starts when this rule appears.)"),
         lambda pw, inst, h: FIRE not in pw.plain),
    Rule(20, "3 weightlifters",
         _const("Your password is not strong enough 🏋️‍♂️ (it must contain 🏋️‍♂️ at least "
                "3 times)."),
         lambda pw, inst, h: pw.plain.count(WEIGHTLIFTER) >= STRENGTH_NEEDED),
    Rule(21, "affirmation",
         _const("Your password must contain one of the following affirmations: I am loved, "
                "I am worthy, I am enough."),
         lambda pw, inst, h: _AFFIRMATION_RE.search(pw.lower) is not None),
    Rule(22, "feed Paul worms",
         _const("Paul has hatched 🐔! Please don't forget to feed him. He eats three 🐛 every "
                "turn: keep at least 3 🐛 in your password, and no more than 8 or he "
                "overeats."),
         lambda pw, inst, h: WORMS_MIN <= pw.plain.count(WORM) <= WORMS_MAX),
    Rule(23, "YouTube video", _video_text,
         lambda pw, inst, h: any(inst.video_length(v) == inst.video_seconds
                                 for v in youtube_ids(pw.plain))),
    Rule(24, "sacrificed letters", _sacrifice_text,
         lambda pw, inst, h: not any(letter in pw.lower for letter in inst.banned)),
    Rule(25, "italic ≥ 2× bold",
         _const("Your password must contain twice as many italic characters as bold (write "
                "*a* for an italic a; at least twice as many)."),
         lambda pw, inst, h: pw.italic_chars >= 2 * pw.bold_chars),
)
assert len(RULES) == NUM_RULES and all(r.id == i for i, r in enumerate(RULES))
assert len({r.name for r in RULES}) == NUM_RULES  # a name tells one rule from the others


def rule_label(rule_id: int) -> str:
    """``"5. digits sum to 25"``: the rule's short name, numbered from 1 as the game's text,
    PASSWORD_GAME_README.md and neal.fun number rules (``rule_id`` is the 0-based id)."""
    return f"{rule_id + 1}. {RULES[rule_id].name}"


def broken_rule_detail(rule_id: int, pw: RichText) -> str | None:
    """What is wrong, in numbers, with a password that breaks a counting rule ("Your digits add
    up to 14."), for a player's feedback; None for rules that count nothing. The rule text says
    what the number must be; this says where the password stands."""
    plain = pw.plain
    if rule_id == 0:
        return f"Yours has {len(plain)}."
    if rule_id == 4:
        return f"Your digits add up to {digit_sum(plain)}."
    if rule_id == 8:
        product = roman_product(plain)
        return (f"Your Roman numerals multiply to {product}." if product
                else "Your password has no Roman numeral.")
    if rule_id == 17:
        return f"Your elements add up to {atomic_sum(plain)}."
    if rule_id == 20:
        return f"Yours has {plain.count(WEIGHTLIFTER)}."
    if rule_id == 22:
        return f"Yours has {plain.count(WORM)}."
    if rule_id == 25:
        return f"Yours has {pw.italic_chars} italic and {pw.bold_chars} bold characters."
    return None


def rule_text(rule_id: int, inst: Instance, hatched: bool = False) -> str:
    return RULES[rule_id].text(inst, hatched)


def check_rules(pw: RichText, inst: Instance, n_revealed: int = NUM_RULES,
                hatched: bool | None = None) -> list[bool]:
    """Verdicts of rules ``0 .. n_revealed-1`` for a parsed password.

    ``hatched`` defaults to "rule 22 is among the revealed rules".
    """
    if hatched is None:
        hatched = n_revealed > RULE_HATCH
    return [RULES[i].check(pw, inst, hatched) for i in range(n_revealed)]
