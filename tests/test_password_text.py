"""What a person sees decides the Password Game's verdicts (issue 13, item 10), and the command
line's output on a terminal that is not UTF-8.

The normalisation is documented in PASSWORD_GAME_README.md ("Text is read as a person sees it").
"""

import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tasks.password_game import check_password, make_instance, solve
from tasks.password_game.richtext import escape, parse
from tasks.password_game import text
from tasks.password_game.text import DEFAULT_IGNORABLE

REPO = Path(__file__).resolve().parents[1]
LIFTER = "🏋️‍♂️"  # U+1F3CB U+FE0F U+200D U+2642 U+FE0F: an emoji ZWJ sequence
INVISIBLE = {
    "zero-width joiner": "\u200d", "zero-width non-joiner": "\u200c",
    "zero-width space": "\u200b", "soft hyphen": "\u00ad", "left-to-right mark": "\u200e",
    "right-to-left mark": "\u200f", "word joiner": "\u2060", "byte order mark": "\ufeff",
    "left-to-right isolate": "\u2066", "variation selector 16": "\ufe0f",
    "combining grapheme joiner": "\u034f",
}


def verdicts(password: str, seed: int = 3) -> list[bool]:
    return [r["satisfied"] for r in check_password(password, seed)["rules"]]


def seed_banning(letter: str) -> int:
    return next(s for s in range(10_000) if letter in make_instance(s).banned)


# ============================================================================ canonical equivalence
@pytest.mark.parametrize("text", ["café", "c**a**fé", "\u212bngstr\u00f6m", "ķ", "naïve XXXV",
                                  "\u2126hm", "Hello1! café ķ"])
def test_canonically_equivalent_passwords_get_the_same_verdicts(text):
    forms = {text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)}
    assert len(forms) > 1
    for seed in (3, seed_banning("k")):
        results = {json.dumps(check_password(form, seed)) for form in forms}
        assert len(results) == 1, (text, seed)


def test_rule_18_reads_a_precomposed_and_a_decomposed_e_alike():
    # All vowels bold: é is one letter (not the vowel e), written either way.
    assert parse("c**a**f\u00e9").unbolded_vowels == 0
    assert parse("c**a**fe\u0301").unbolded_vowels == 0


def test_rule_24_reads_k_with_cedilla_alike_either_way():
    seed = seed_banning("k")
    assert verdicts("\u0137", seed)[24] == verdicts("k\u0327", seed)[24] is True
    assert verdicts("k", seed)[24] is False


def test_kelvin_sign_is_the_letter_k_for_every_rule():
    # U+212A looks like K and NFC makes it K: an uppercase letter (rule 2), not a special
    # character (rule 3), potassium (rule 17), the banned letter k (rule 24).
    seed = seed_banning("k")
    for text in ("\u212a", "Hello\u212a1!", "Starbuc\u212as XXXV"):
        assert verdicts(text, seed) == verdicts(text.replace("\u212a", "K"), seed), text


def test_no_other_letter_lowercases_into_ascii():
    """Case-insensitive rules fold case, but no non-ASCII character may become an ASCII letter
    (U+0130 İ lowercases to i + U+0307 in Python): ķ, é and İ are letters of their own."""
    leaks = []
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if 0xD800 <= cp < 0xE000 or ch.lower() == ch:  # surrogates; nothing to fold
            continue
        if any(c.isascii() for c in unicodedata.normalize("NFC", ch)):
            continue  # the Kelvin sign: NFC makes it K, which then is the letter K
        if any("a" <= c <= "z" for c in parse(ch).lower):
            leaks.append(hex(cp))
    assert leaks == []


# ============================================================================ invisible characters
@pytest.mark.parametrize("name", sorted(INVISIBLE))
def test_invisible_characters_inside_words_change_nothing(name):
    """The solver's password with an invisible character after every letter that another letter
    follows still satisfies all 26 rules, with the same length."""
    mark = INVISIBLE[name]
    for seed in (3, 11):
        password = solve(make_instance(seed))
        sprinkled = "".join(c + mark if c.isascii() and c.isalpha() and i + 1 < len(password)
                            and password[i + 1].isascii() and password[i + 1].isalpha() else c
                            for i, c in enumerate(password))
        assert sprinkled != password
        result = check_password(sprinkled, seed)
        assert result["all_satisfied"], (name, seed, [r["id"] for r in result["rules"]
                                                      if not r["satisfied"]])
        assert result["length"] == check_password(password, seed)["length"]


@pytest.mark.parametrize("name", sorted(INVISIBLE))
def test_invisible_characters_are_not_special_and_break_no_word(name):
    mark = INVISIBLE[name]
    assert verdicts(f"abc{mark}de1")[3] is False  # rule 3: no special character
    assert verdicts(f"ma{mark}y")[5] is True  # rule 5: a month
    assert verdicts(f"sh{mark}ell")[7] is True  # rule 7: a sponsor
    assert check_password(f"ab{mark}cd", 3)["length"] == 4


def test_the_invisible_set_is_unicodes_default_ignorable():
    regex = pytest.importorskip("regex")  # implements the Unicode property; not a dependency
    prop = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    ours = re.compile(f"[{DEFAULT_IGNORABLE}]")
    differ = [hex(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000
              and bool(prop.match(chr(cp))) != bool(ours.match(chr(cp)))]
    assert differ == []


def test_emoji_sequences_keep_their_joiners():
    # A ZWJ or variation selector inside an emoji sequence is part of the emoji a person sees;
    # the length stays the code points of the sequence (documented: 🏋️‍♂️ counts 5).
    assert parse(LIFTER).plain == LIFTER and check_password(LIFTER, 3)["length"] == 5
    assert parse("❤️").plain == "❤️"
    assert verdicts(LIFTER * 3)[20] is True


def test_non_breaking_spaces_are_spaces():
    for space in ("\u00a0", "\u2009", "\u202f", "\u3000"):
        assert verdicts(f"I am{space}loved")[21] is True, hex(ord(space))
        assert verdicts(f"ab{space}cd1")[3] is False


def reference_visible(t: str) -> str:
    """The normalisation as the docs state it, one character at a time (slow, obviously right)."""
    ignorable, glue = re.compile(f"[{DEFAULT_IGNORABLE}]"), re.compile(f"[{text.GLUE}]")
    out, i = [], 0
    while i < len(t):
        if ignorable.match(t[i]):
            j = i
            while j < len(t) and ignorable.match(t[j]):
                j += 1
            if i > 0 and text.is_emoji(t[i - 1]):  # a run after an emoji keeps its glue
                out.extend(c for c in t[i:j] if glue.match(c))
            i = j
            continue
        out.append(" " if unicodedata.category(t[i]) == "Zs" else t[i])
        i += 1
    return unicodedata.normalize("NFC", "".join(out))


def test_visible_agrees_with_the_reference_on_random_mixes():
    """``visible`` skips its rewrite when one quick regex finds nothing to change, and rewrites
    with three regexes; on random mixes of letters, emoji, glue, invisibles and spaces it agrees
    with the character-by-character reference."""
    alphabet = ["a", "e", "K", " ", "\u0301", "🏋", "♂", "🐛", "🏻", "é", "#", *INVISIBLE.values(),
                "\ufe0e", "\U000e0067", "\U000e007f", "\u00a0", "\u3000", "\u0130"]
    rng = random.Random(0)
    for _ in range(3000):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12)))
        expected = reference_visible(t)
        assert text.visible(t) == expected, ascii(t)
        assert text.visible(expected) == expected, ascii(t)  # idempotent


def test_glue_and_the_other_invisibles_split_the_invisible_set():
    every = re.compile(f"[{DEFAULT_IGNORABLE}]")
    glue, other = re.compile(f"[{text.GLUE}]"), re.compile(f"[{text.OTHER_IGNORABLE}]")
    for cp in range(0x110000):
        c = chr(cp)
        assert bool(every.match(c)) == (bool(glue.match(c)) != bool(other.match(c))), hex(cp)


def test_normalising_is_idempotent_and_keeps_markup():
    for text in ("**ca**fe\u0301", "\\*e\u0301*x*", "a\u200d**b**", LIFTER + "**e\u0301**"):
        once = parse(text)
        assert parse(escape(once.plain)).plain == once.plain
    assert parse("**e\u0301**").bold_chars == 1 and parse("*a\u00adb*").italic_chars == 2


# ============================================================================ the command line
def run_cli(*args: str, encoding: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tasks.password_game", *args],
                          capture_output=True, env=env, cwd=REPO, timeout=60)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_check_json_on_a_terminal_that_is_not_utf8(encoding):
    args = ("check", "--seed", "7", "--password", "Hello1! café 🥚", "--json")
    utf8 = run_cli(*args, encoding="utf-8")
    other = run_cli(*args, encoding=encoding)
    assert utf8.returncode == 0, utf8.stderr
    assert other.returncode == 0, other.stderr.decode(errors="replace")
    assert json.loads(other.stdout.decode(encoding)) == json.loads(utf8.stdout.decode("utf-8"))
    plain = run_cli("check", "--seed", "7", "--password", "Hello1!", encoding=encoding)
    assert plain.returncode == 0, plain.stderr.decode(errors="replace")
    assert b"rules satisfied" in plain.stdout
