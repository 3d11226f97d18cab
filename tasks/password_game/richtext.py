"""Rich-text passwords: inline markup for the formatting rules.

neal.fun's password box is a rich-text editor; ours is a string with inline markup:

* ``**`` toggles bold, ``*`` toggles italic (so ``***x***`` is bold italic);
* ``\\*`` is a literal asterisk and ``\\\\`` a literal backslash (any other backslash is literal);
* an unclosed marker simply runs to the end of the password.

The markup characters are not part of the password: every rule except the two formatting rules
(18: vowels bolded, 25: italic at least twice bold) reads the *plain* text, and the length is the
number of plain characters (Unicode code points).

The password is first read as a person sees it (:func:`.text.visible`: invisible characters
removed, spaces unified, NFC), so that two passwords that look the same get the same verdicts.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from .text import lower, visible

VOWELS = "aeiouAEIOU"
_VOWEL_RE = re.compile(r"[aeiouAEIOU]")
# One token of markup: an escaped `*` or `\`, a bold toggle, or an italic toggle.
_MARKUP_SPLIT_RE = re.compile(r"(\\[*\\]|\*\*|\*)")


@dataclass(frozen=True, slots=True)
class RichText:
    """A parsed password: its plain text and the counts the formatting rules need."""

    plain: str
    bold_chars: int = 0
    italic_chars: int = 0
    unbolded_vowels: int = 0
    lower: str = ""  # text.lower(plain), computed once for the case-insensitive rules

    def __post_init__(self) -> None:
        if not self.lower and self.plain:
            object.__setattr__(self, "lower", lower(self.plain))


def parse(text: str) -> RichText:
    """Normalise (:func:`.text.visible`), then parse inline markup. Linear in ``len(text)``;
    never raises."""
    text = visible(text)
    if "*" not in text and "\\" not in text:  # no markup at all
        return RichText(text, 0, 0, _count_vowels(text), lower(text))
    if "\\" in text:
        return _parse_with_escapes(text)
    # No escapes. str.split("**") finds the bold toggles exactly as the greedy left-to-right
    # reading does ("***" is "**" then "*"), so pieces alternate plain/bold; the single "*" left
    # inside them are the italic toggles, in order. All of it runs in C.
    pieces = text.split("**")
    bold_text = "".join(pieces[1::2])
    n_bold = len(bold_text) - bold_text.count("*")
    n_unbolded = _count_vowels("".join(pieces[0::2]))
    italic_pieces = "".join(pieces).split("*")
    plain = "".join(italic_pieces)
    n_italic = len("".join(italic_pieces[1::2]))
    return RichText(plain, n_bold, n_italic, n_unbolded, lower(plain))


def _parse_with_escapes(text: str) -> RichText:
    """The general parser: one step per marker or escape (slower; escapes are rare)."""
    parts = _MARKUP_SPLIT_RE.split(text)
    plain: list[str] = []
    bold = italic = False
    n_bold = n_italic = n_unbolded = 0
    for i, part in enumerate(parts):
        if i % 2:  # a marker
            if part == "**":
                bold = not bold
                continue
            if part == "*":
                italic = not italic
                continue
            part = part[1]  # an escaped asterisk or backslash: a literal character
        if not part:
            continue
        plain.append(part)
        if bold:
            n_bold += len(part)
        else:
            n_unbolded += _count_vowels(part)
        if italic:
            n_italic += len(part)
    joined = "".join(plain)
    return RichText(joined, n_bold, n_italic, n_unbolded, lower(joined))


def _count_vowels(text: str) -> int:
    # Ten str.count calls beat a regex or str.translate, which are slow on non-ASCII (emoji) text.
    return sum(map(text.count, VOWELS))


def escape(plain: str) -> str:
    """Markup that parses back to ``plain`` with no formatting."""
    return plain.replace("\\", "\\\\").replace("*", "\\*")


def format_solution(plain: str, min_italic_ratio: float = 2.0, filler: str = "-") -> str:
    """Bold every vowel and italicise everything, padding with italic ``filler`` if needed.

    Used by the solver: the result satisfies rule 18 (all vowels bold) and rule 25 (italic
    characters at least ``min_italic_ratio`` times the bold ones).
    """
    n_vowels = len(_VOWEL_RE.findall(plain))
    missing = int(min_italic_ratio * n_vowels) - len(plain)
    if missing > 0:
        plain = plain + filler * missing
    out: list[str] = ["*"]
    for is_vowel, run in itertools.groupby(plain, key=lambda ch: ch in VOWELS):
        text = escape("".join(run))
        out.append(f"**{text}**" if is_vowel else text)
    out.append("*")
    return "".join(out)
