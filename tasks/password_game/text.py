"""Password text as a person sees it: the one normalisation every rule reads.

Two passwords that look the same must get the same verdicts. Before the markup is parsed, the
raw password is normalised in this order:

1. **invisible characters are removed**: every ``Default_Ignorable_Code_Point`` of Unicode
   (zero-width space / joiner / non-joiner, soft hyphen, direction marks and isolates, word
   joiner, byte order mark, variation selectors, tag characters, ...). Exception: a run of
   emoji glue (zero-width joiner, variation selectors 15/16, tag characters) right after a
   symbol (an emoji: general category ``So``, or a skin-tone modifier) is kept, because there it
   is part of the emoji a person sees (🏋️‍♂️ is U+1F3CB U+FE0F U+200D U+2642 U+FE0F);
2. **other spaces become U+0020**: the space separators (``Zs``: no-break, thin, ideographic,
   ...) look like a space and count as one;
3. **NFC** (canonical composition): ``e`` + U+0301 and ``é`` are one character, the Kelvin sign
   U+212A is ``K``, the Ohm sign is ``Ω``.

Compatibility forms (NFKC: fullwidth ``Ａ``, ligatures, superscripts, ``™``) are not folded: they
look different and are different characters, as are homoglyphs from other scripts.

Case-insensitive rules compare :func:`lower` texts: ``str.lower`` except that U+0130 ``İ`` stays
itself (Python lowercases it to ``i`` + U+0307), so that no non-ASCII letter ever reads as an
ASCII one (ķ is not k, é is not e, İ is not i), whatever rule looks at it.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt; unchanged from 14.0 to 16.0).
# tests/test_password_text.py checks it against the `regex` module's property where installed.
DEFAULT_IGNORABLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
                     "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
                     "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff")
# Emoji glue: ZWJ, VS15, VS16, and the tag characters of flag sequences (🏴 + tags + cancel tag),
# and the other invisible characters (DEFAULT_IGNORABLE is exactly the two together; tested).
GLUE = "\u200d\ufe0e\ufe0f\U000e0020-\U000e007f"
OTHER_IGNORABLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200c"
                   "\u200e\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0d\ufeff\uffa0"
                   "\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e001f"
                   "\U000e0080-\U000e0fff")
# The space separators (Zs) other than U+0020.
SPACES = "\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_DOTTED_CAPITAL_I = "\u0130"


def is_emoji(char: str) -> bool:
    """A symbol (category So: emoji, ♂) or a skin-tone modifier: what emoji glue may follow."""
    return unicodedata.category(char) == "So" or "\U0001f3fb" <= char <= "\U0001f3ff"


class _Patterns:
    """The regexes :func:`visible` runs. Built on first use from this Python's Unicode data
    (about 30 ms), so that they agree with :func:`is_emoji`."""

    def __init__(self) -> None:
        emoji, start = [], None
        for cp in range(0x20001):  # no symbol (So) lies above U+1FFFF; U+20000 ends the last run
            if is_emoji(chr(cp)):
                start = cp if start is None else start
            elif start is not None:
                emoji.append(f"{re.escape(chr(start))}-{re.escape(chr(cp - 1))}")
                start = None
        kept_glue = f"(?<![{''.join(emoji)}{GLUE}][{GLUE}])"  # glue not after emoji or glue
        # One scan that finds anything to change. Each pattern starts with one character class
        # so that the regex engine skips ahead fast (a leading lookbehind made it 15x slower, an
        # alternation 2x). The lookbehind can only match, and so refuse, a glue character.
        self.needs_work = re.compile(f"[{OTHER_IGNORABLE}{SPACES}{GLUE}]{kept_glue}")
        self.other = re.compile(f"[{OTHER_IGNORABLE}]+")
        self.lone_glue = re.compile(f"[{GLUE}]{kept_glue}[{GLUE}]*")
        self.spaces = re.compile(f"[{SPACES}]")


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


def visible(text: str) -> str:
    """``text`` normalised as the module docstring says. Idempotent; ASCII is returned as is."""
    if text.isascii():  # the common case: ASCII is NFC and has no invisible or odd spaces
        return text
    p = _patterns()
    if p.needs_work.search(text) is not None:
        # Other invisibles first: then the glue of an invisible run that followed an emoji
        # directly follows it too, and is kept; glue after anything else goes.
        text = p.spaces.sub(" ", p.lone_glue.sub("", p.other.sub("", text)))
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text


def lower(plain: str) -> str:
    """``plain.lower()``, except that ``İ`` (U+0130) is left alone: Python lowercases it to
    ``i`` + U+0307, which would make a non-ASCII letter read as the ASCII ``i``."""
    if _DOTTED_CAPITAL_I not in plain:
        return plain.lower()
    return _DOTTED_CAPITAL_I.join(part.lower() for part in plain.split(_DOTTED_CAPITAL_I))
