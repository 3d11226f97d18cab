"""What a Password Game instance is: its data types and the moon arithmetic its date needs.

Generation (``make_instance``, in :mod:`.instance`) runs the solver, which runs the rules, which
read these types; keeping the types here, apart from the generator, lets every module import
what it needs at module level with no import circle (``instance`` -> ``solver`` -> ``rules`` ->
``instance_types``).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from dataclasses import dataclass

MOON_EMOJI = ("🌑", "🌒", "🌓", "🌔", "🌕", "🌖", "🌗", "🌘")
MOON_NAMES = (
    "new moon", "waxing crescent", "first quarter", "waxing gibbous",
    "full moon", "waning gibbous", "last quarter", "waning crescent",
)
_SYNODIC_MONTH = 29.530588853  # days
_REFERENCE_NEW_MOON = dt.datetime(2000, 1, 6, 18, 14, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Video:
    id: str
    seconds: int

    @property
    def url(self) -> str:
        return f"youtu.be/{self.id}"

    @property
    def length_text(self) -> str:
        return f"{self.seconds // 60}:{self.seconds % 60:02d}"


@dataclass(frozen=True)
class Country:
    name: str
    aliases: tuple[str, ...]
    clues: tuple[str, ...]


@dataclass(frozen=True)
class ChessPuzzle:
    fen: str
    mates: tuple[str, ...]  # SAN of every mating move, with the trailing '#'

    @property
    def side_to_move(self) -> str:
        return "White" if self.fen.split()[1] == "w" else "Black"


@dataclass(frozen=True)
class Instance:
    seed: int
    captcha: str
    wordle: str
    date: dt.date
    country: Country
    chess: ChessPuzzle
    video_seconds: int
    videos: tuple[Video, ...]  # the offline "search results"; some have the right length
    banned: tuple[str, ...]  # the two sacrificed letters (lowercase; banned in either case)

    @functools.cached_property
    def moon(self) -> str:
        return moon_phase_emoji(self.date)

    def video_length(self, video_id: str) -> int | None:
        for v in self.videos:
            if v.id == video_id:
                return v.seconds
        return None


# ---------------------------------------------------------------------------- moon
def _phase_at(moment: dt.datetime) -> int:
    age_days = (moment - _REFERENCE_NEW_MOON).total_seconds() / 86400.0
    fraction = (age_days / _SYNODIC_MONTH) % 1.0
    return int(math.floor(fraction * 8 + 0.5)) % 8


def moon_phase_index(date: dt.date) -> int:
    """Phase 0..7 (new, waxing crescent, ..., waning crescent) at noon UTC on ``date``.

    Mean synodic month from the new moon of 2000-01-06 18:14 UTC; each phase covers an eighth of
    the cycle centred on its name (new moon is the eighth around age 0).
    """
    return _phase_at(dt.datetime(date.year, date.month, date.day, 12, tzinfo=dt.timezone.utc))


def moon_phase_emoji(date: dt.date) -> str:
    return MOON_EMOJI[moon_phase_index(date)]
