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
# Emoji glue: ZWJ, VS15, VS16, and the tag characters of flag sequences (🏴 + tags + cancel tag).
_GLUE = "\u200d\ufe0e\ufe0f\U000e0020-\U000e007f"
# The space separators (Zs) other than U+0020.
_SPACES = "\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_IGNORABLE_RUN_RE = re.compile(f"[{DEFAULT_IGNORABLE}]+")
_GLUE_RE = re.compile(f"[{_GLUE}]+")
_SPACES_RE = re.compile(f"[{_SPACES}]")
_DOTTED_CAPITAL_I = "\u0130"


def _is_emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" or "\U0001f3fb" <= char <= "\U0001f3ff"


@functools.cache
def _needs_work() -> re.Pattern:
    """A quick test for "some character would change": an invisible or space character, except
    emoji glue that follows an emoji or more glue (kept, and the common case: 🏋️‍♂️). Built on
    first use from this Python's Unicode data (about 30 ms), so it agrees with :func:`_is_emoji`."""
    emoji, start = [], None
    for cp in range(0x20001):  # no symbol (So) lies above U+1FFFF; U+20000 closes the last range
        if _is_emoji(chr(cp)):
            start = cp if start is None else start
        elif start is not None:
            emoji.append(f"{re.escape(chr(start))}-{re.escape(chr(cp - 1))}")
            start = None
    return re.compile(f"[{DEFAULT_IGNORABLE}{_SPACES}](?<![{''.join(emoji)}{_GLUE}][{_GLUE}])")


def visible(text: str) -> str:
    """``text`` normalised as the module docstring says. Idempotent; ASCII is returned as is."""
    if text.isascii():  # the common case: ASCII is NFC and has no invisible or odd spaces
        return text
    if _needs_work().search(text) is not None:
        text = _IGNORABLE_RUN_RE.sub(_keep_emoji_glue, text)
        text = _SPACES_RE.sub(" ", text)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text


def _keep_emoji_glue(match: re.Match) -> str:
    """An invisible run goes, except its emoji glue when it follows an emoji."""
    start = match.start()
    if start and _is_emoji(match.string[start - 1]):
        return "".join(_GLUE_RE.findall(match.group()))
    return ""


def lower(plain: str) -> str:
    """``plain.lower()``, except that ``İ`` (U+0130) is left alone: Python lowercases it to
    ``i`` + U+0307, which would make a non-ASCII letter read as the ASCII ``i``."""
    if _DOTTED_CAPITAL_I not in plain:
        return plain.lower()
    return _DOTTED_CAPITAL_I.join(part.lower() for part in plain.split(_DOTTED_CAPITAL_I))
