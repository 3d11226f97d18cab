"""Each of the 26 rules with passing and failing cases, on a hand-built instance.

The instance is written out here (not drawn from a seed) so every expectation can be checked by
hand. Known bugs of public re-implementations (DESIGN.md §2) have their own tests.
"""

import dataclasses
import datetime as dt

import chess
import pytest

from tasks.password_game.chemistry import atomic_sum, element_symbols, roman_numerals, roman_product
from tasks.password_game.instance import ChessPuzzle, Country, Instance, Video, moon_phase_emoji
from tasks.password_game.richtext import format_solution, parse
from tasks.password_game.rules import NUM_RULES, RULES, check_rules, rule_text

LIFTER = "🏋️‍♂️"
SCHOLARS_MATE = "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4"
INST = Instance(
    seed=1,
    captcha="ab3cd",
    wordle="crane",
    date=dt.date(2024, 1, 11),  # a new moon (11:57 UTC)
    country=Country("chile", ("republic of chile",), ("clue one.",)),
    chess=ChessPuzzle(SCHOLARS_MATE, ("Qxf7#",)),
    video_seconds=200,
    videos=(Video("Ab-_0123xyz", 200), Video("Zz9Zz9Zz9Zz", 250)),
    banned=("q", "j"),
)


def ok(rule: int, password: str, hatched: bool = False) -> bool:
    return RULES[rule].check(parse(password), INST, hatched)


CASES = {
    # rule: (passing passwords, failing passwords)
    0: (["abcde", "a b c", "🥚🥚🥚🥚🥚"], ["abcd", "**ab**c", "", "*a*\\*"]),
    1: (["a1", "0"], ["abc", "٣"]),  # only ASCII digits are numbers
    2: (["aBc", "Z"], ["abc", "É1"]),  # ASCII uppercase, as neal.fun's [A-Z]
    3: (["a!", "a🥚", "a-b", "\\*"], ["abc1", "a b", "a\tb", "**a**"]),  # markup is not a character
    4: (["997", "9 9 7", "99700", "5555a5"], ["99", "9999", ""]),
    5: (["MaY", "mayo", "DECEMBER"], ["jan", "ma y"]),
    6: (["V", "aXb"], ["v", "abc"]),
    7: (["PEPSI", "xstarbucksx", "Shell"], ["pep si", "starbuck"]),
    8: (["XXXV", "V VII", "V x VII", "XXXV I", "VVII", "may XXXV"], ["VII", "XXXVI", "May XXXV", "abc"]),
    9: (["xxab3cdxx"], ["AB3CD", "ab3c d"]),
    10: (["CRANE", "scranes"], ["cran e", "crame"]),
    11: (["He", "xNax"], ["he", "H", "HE", "abc"]),
    12: (["🌑"], ["🌕", "new moon"]),
    13: (["CHILE", "i love chile", "Republic of Chile"], ["chili", "chi le"]),
    14: (["2024", "2000", "0", "x1996y"], ["1900", "2023", "abc", "2100"]),
    15: (["Qxf7", "Qxf7#", "aQxf7+b"], ["Qf7", "Nf3", "qxf7"]),
    17: (["FmFm", "Fm Fm", "Ne" * 20], ["FmFmH", "Fm", "fmfm"]),
    18: (["**a**bc", "**A**b**e**", "xyz", "***a***", "**aeiou**"], ["abc", "**a**e", "*a*"]),
    19: (["x", "fire"], ["🔥", "a🔥b"]),
    20: ([LIFTER * 3, "🏋🏋️🏋️‍♀️", LIFTER * 4], [LIFTER * 2, "💪💪💪"]),
    21: (["I AM LOVED", "xi am worthyx", "I am enough"], ["i am lovely", "iamloved", "i am good"]),
    22: (["🐛" * 3, "🐛" * 8, "a🐛b🐛c🐛"], ["🐛" * 2, "🐛" * 9, ""]),
    23: (["youtu.be/Ab-_0123xyz", "https://www.youtube.com/watch?v=Ab-_0123xyz", "x youtu.be/Ab-_0123xyz!"],
         ["youtu.be/Zz9Zz9Zz9Zz", "youtu.be/Ab-_0123xyzz", "youtu.be/Ab-_0123xy", "Ab-_0123xyz",
          "youtu.be/Nope0000000"]),
    24: (["abc", "xyz"], ["q", "Q", "jam", "aJa"]),
    25: (["*ab*", "*x**a**y*", "plain", "*x***a***y*"], ["**a**", "**ab***c*", "*x**abc**y*"]),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_passing_and_failing_cases(rule):
    passing, failing = CASES[rule]
    for pw in passing:
        assert ok(rule, pw), f"rule {rule} should pass {pw!r}"
    for pw in failing:
        assert not ok(rule, pw), f"rule {rule} should fail {pw!r}"


def test_every_rule_has_cases():
    assert set(CASES) | {16} == set(range(NUM_RULES))


def test_paul_is_an_egg_until_he_hatches():
    assert ok(16, "🥚") and not ok(16, "🐔") and not ok(16, "x")
    assert ok(16, "🐔", hatched=True) and not ok(16, "🥚", hatched=True)


# ---------------------------------------------------------------- known bugs of other versions
def test_strength_rule_can_pass():
    # The seed's strength rule could never pass (a multi-code-point emoji counted wrongly).
    assert ok(20, LIFTER * 3)
    assert parse(LIFTER).plain.count("\U0001F3CB") == 1


def test_sacrifice_rule_does_not_always_pass():
    assert not ok(24, "aqa") and ok(24, "aaa")


def test_atomic_sum_counts_two_letter_symbols_once_and_repeats_every_time():
    assert element_symbols("He") == ["He"]  # helium, not H + He
    assert atomic_sum("He") == 2
    assert atomic_sum("HeHe") == 4  # repeats count
    assert atomic_sum("Hx") == 1
    assert atomic_sum("NaCl") == 11 + 17
    assert atomic_sum("abc") == 0
    assert atomic_sum("CoCO") == 27 + 6 + 8


def test_captcha_digits_never_break_rule_4():
    from tasks.password_game import make_instance

    for seed in range(200):
        c = make_instance(seed).captcha
        assert sum(int(ch) for ch in c if ch.isdigit()) <= 9


def test_submit_checks_before_advancing():
    from tasks.password_game import PasswordGame

    game = PasswordGame()
    game.reset(3)
    _, _, _, info = game.step("abc")  # fails rule 0: nothing new may be revealed
    assert info["num_revealed"] == 1 and info["newly_revealed"] == []
    _, _, _, info = game.step("abcdef")  # passes rule 0: rule 1 appears and is checked
    assert info["num_revealed"] == 2 and info["rules"][1]["satisfied"] is False


# ---------------------------------------------------------------- building blocks
def test_roman_numerals_are_cut_into_standard_form():
    assert roman_numerals("XXXV") == ["XXXV"]
    assert roman_numerals("VV") == ["V", "V"]
    assert roman_numerals("IIII") == ["III", "I"]
    assert roman_numerals("aXIVbMMXXIV") == ["XIV", "MMXXIV"]
    assert roman_product("XIV and II") == 28
    assert roman_product("no numerals here") == 0
    assert roman_product("M" * 100_000) > 35  # capped, and fast


def test_markup_parsing():
    r = parse("*it**bo**x*")
    assert (r.plain, r.italic_chars, r.bold_chars, r.unbolded_vowels) == ("itbox", 5, 2, 1)
    assert parse("a\\*b").plain == "a*b"
    assert parse("a\\\\b").plain == "a\\b"
    assert parse("a\\xb").plain == "a\\xb"  # only * and \ are escaped
    assert parse("**unclosed").bold_chars == len("unclosed")
    assert parse("x" * 100_000 + "*").plain == "x" * 100_000


def test_format_solution_satisfies_both_formatting_rules():
    for plain in ["aeiou", "abc", "x", "I am loved 🥚", "a*b\\c"]:
        rich = format_solution(plain)
        parsed = parse(rich)
        assert parsed.plain.startswith(plain)
        assert parsed.unbolded_vowels == 0
        assert parsed.italic_chars >= 2 * parsed.bold_chars


@pytest.mark.parametrize("date,emoji", [
    (dt.date(2024, 1, 11), "🌑"),  # new moon 11:57 UTC
    (dt.date(2024, 4, 8), "🌑"),  # the total solar eclipse
    (dt.date(2024, 1, 18), "🌓"),  # first quarter 03:53 UTC
    (dt.date(2024, 1, 25), "🌕"),  # full moon 17:54 UTC
    (dt.date(2023, 8, 31), "🌕"),  # the blue moon
    (dt.date(2024, 2, 2), "🌗"),  # last quarter 23:18 UTC
])
def test_moon_phase_matches_almanac(date, emoji):
    assert moon_phase_emoji(date) == emoji


def test_chess_rule_accepts_any_mating_move():
    board = chess.Board("6k1/5ppp/8/8/8/8/8/R3R1K1 w - - 0 1")  # back-rank mate with either rook
    mates = []
    for move in board.legal_moves:
        board.push(move)
        if board.is_checkmate():
            mates.append(move)
        board.pop()
    sans = sorted(board.san(m) for m in mates)
    assert sans == ["Ra8#", "Re8#"]
    inst = dataclasses.replace(INST, chess=ChessPuzzle(board.fen(), tuple(sans)))
    for pw in ["Ra8", "Re8#"]:
        assert RULES[15].check(parse(pw), inst, False)
    assert not RULES[15].check(parse("Rb8"), inst, False)


def test_rule_texts_carry_the_instance_data():
    texts = [rule_text(i, INST) for i in range(NUM_RULES)]
    assert "ab3cd" in texts[9] and "crane" in texts[10] and "2024-01-11" in texts[12]
    assert "clue one." in texts[13] and SCHOLARS_MATE in texts[15]
    assert "3 minutes 20 seconds long" in texts[23] and "youtu.be/Ab-_0123xyz (3:20)" in texts[23]
    assert "'q'" in texts[24] and "'j'" in texts[24]
    assert "hatched" in rule_text(16, INST, hatched=True)


def test_check_rules_counts_only_revealed_rules():
    assert len(check_rules(parse("abcdef"), INST, 3)) == 3
    assert len(check_rules(parse("abcdef"), INST)) == NUM_RULES


def test_fast_markup_parser_agrees_with_the_general_one():
    import random

    from tasks.password_game.richtext import _parse_with_escapes

    rng = random.Random(0)
    alphabet = ["*", "**", "***", "a", "e", "x", "Y", "🥚", " ", "I"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))
        assert parse(text) == _parse_with_escapes(text), text
