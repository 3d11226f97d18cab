"""Seeded game instances: everything neal.fun fetches or draws at random comes from the seed.

``make_instance(seed)`` is a pure function of the seed (no clock, no network): the CAPTCHA, the
Wordle answer, the game date (and so the moon phase), the country and its Street View clues, the
chess mate-in-one position, the YouTube video length with its offline search results, and the two
sacrificed letters. Every instance is proven solvable by construction: the generator runs the
solver and keeps only instances it solves, and the sacrificed letters are drawn among those the
solver's password does not use.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
import random
import string
from dataclasses import dataclass
from importlib import resources

from ..common.protocol import MAX_SEED, check_seed  # noqa: F401 (re-exported)

MOON_EMOJI = ("🌑", "🌒", "🌓", "🌔", "🌕", "🌖", "🌗", "🌘")
MOON_NAMES = (
    "new moon", "waxing crescent", "first quarter", "waxing gibbous",
    "full moon", "waning gibbous", "last quarter", "waning crescent",
)
_SYNODIC_MONTH = 29.530588853  # days
_REFERENCE_NEW_MOON = dt.datetime(2000, 1, 6, 18, 14, tzinfo=dt.timezone.utc)
_FIRST_DATE = dt.date(2000, 1, 1)
_LAST_DATE = dt.date(2030, 12, 31)
_CAPTCHA_ALPHABET = string.ascii_lowercase + string.digits
_VIDEO_ID_ALPHABET = string.ascii_letters + string.digits + "-_"
N_SEARCH_RESULTS = 6
N_MATCHING_VIDEOS = 2


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


# ---------------------------------------------------------------------------- data files
def _data_text(name: str) -> str:
    return resources.files("tasks.password_game").joinpath("data", name).read_text("utf-8")


@functools.cache
def wordle_answers() -> tuple[str, ...]:
    return tuple(w.strip() for w in _data_text("wordle_answers.txt").splitlines() if w.strip())


@functools.cache
def countries() -> tuple[Country, ...]:
    rows = json.loads(_data_text("countries.json"))
    return tuple(Country(r["name"], tuple(r.get("aliases", ())), tuple(r["clues"])) for r in rows)


@functools.cache
def chess_puzzles() -> tuple[ChessPuzzle, ...]:
    rows = json.loads(_data_text("chess_mate_in_one.json"))
    return tuple(ChessPuzzle(r["fen"], tuple(r["mates"])) for r in rows)


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


def _moon_phase_is_unambiguous(date: dt.date) -> bool:
    """True when the phase is the same from 00:00 to 24:00 UTC, so no time zone could argue."""
    midnight = dt.datetime(date.year, date.month, date.day, tzinfo=dt.timezone.utc)
    return _phase_at(midnight) == moon_phase_index(date) == _phase_at(midnight + dt.timedelta(days=1))


# ---------------------------------------------------------------------------- generation
def _draw_captcha(rng: random.Random) -> str:
    # neal.fun's CAPTCHAs mix lowercase letters and digits. Keep the digits small so the CAPTCHA
    # can never break rule 4 (digits sum to 25) on its own: at most two digits, sum <= 9.
    while True:
        c = "".join(rng.choice(_CAPTCHA_ALPHABET) for _ in range(5))
        digits = [int(ch) for ch in c if ch.isdigit()]
        if len(digits) <= 2 and sum(digits) <= 9:
            return c


def _draw_videos(rng: random.Random) -> tuple[int, tuple[Video, ...]]:
    target = rng.randrange(3 * 60, 15 * 60)
    lengths = {target}
    others: list[int] = []
    while len(others) < N_SEARCH_RESULTS - N_MATCHING_VIDEOS:
        s = rng.randrange(3 * 60, 15 * 60)
        if s not in lengths:
            lengths.add(s)
            others.append(s)
    all_lengths = [target] * N_MATCHING_VIDEOS + others
    rng.shuffle(all_lengths)
    ids: set[str] = set()
    videos = []
    for s in all_lengths:
        vid = "".join(rng.choice(_VIDEO_ID_ALPHABET) for _ in range(11))
        while vid in ids:
            vid = "".join(rng.choice(_VIDEO_ID_ALPHABET) for _ in range(11))
        ids.add(vid)
        videos.append(Video(vid, s))
    return target, tuple(videos)


def _draw_date(rng: random.Random) -> dt.date:
    span = (_LAST_DATE - _FIRST_DATE).days
    while True:
        d = _FIRST_DATE + dt.timedelta(days=rng.randrange(span + 1))
        if _moon_phase_is_unambiguous(d):
            return d


@functools.lru_cache(maxsize=4096, typed=True)  # typed: True and 1.0 must not hit the cache of 1
def make_instance(seed: int) -> Instance:
    """The instance for ``seed``. Deterministic across runs and platforms; cached."""
    from .solver import solve_plain  # local import: the solver needs the rules, which need us

    check_seed(seed)
    rng = random.Random(seed)
    answers, places, puzzles = wordle_answers(), countries(), chess_puzzles()
    for _attempt in range(1000):
        target, videos = _draw_videos(rng)
        candidate = Instance(
            seed=seed,
            captcha=_draw_captcha(rng),
            wordle=rng.choice(answers),
            date=_draw_date(rng),
            country=rng.choice(places),
            chess=rng.choice(puzzles),
            video_seconds=target,
            videos=videos,
            banned=(),
        )
        plain = solve_plain(candidate)
        if plain is None:
            continue
        free = sorted(set(string.ascii_lowercase) - set(plain.lower()))
        if len(free) < 2:
            continue
        banned = tuple(sorted(rng.sample(free, 2)))
        inst = dataclasses.replace(candidate, banned=banned)
        if solve_plain(inst) is not None:  # always true; kept as the proof, not an assumption
            return inst
    raise RuntimeError(f"no solvable instance found for seed {seed}")  # never seen in tests
