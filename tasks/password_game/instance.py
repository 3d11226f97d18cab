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
import random
import string
from importlib import resources

from ..common.protocol import MAX_SEED, check_seed  # noqa: F401 (re-exported)
from .instance_types import (MOON_EMOJI, MOON_NAMES, ChessPuzzle, Country,  # noqa: F401 (re-exported)
                             Instance, Video, _phase_at, moon_phase_emoji, moon_phase_index)
from .solver import solve_plain

_FIRST_DATE = dt.date(2000, 1, 1)
_LAST_DATE = dt.date(2030, 12, 31)
_CAPTCHA_ALPHABET = string.ascii_lowercase + string.digits
_VIDEO_ID_ALPHABET = string.ascii_letters + string.digits + "-_"
N_SEARCH_RESULTS = 6
N_MATCHING_VIDEOS = 2


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
