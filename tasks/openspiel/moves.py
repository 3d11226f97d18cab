"""Reading a move from the model's answer (pure Python; no pyspiel).

The scheme (also in tasks/openspiel/README.md). The observation lists the legal moves by name,
exactly as OpenSpiel writes them (``state.action_to_string``): ``x(1,1)``, ``x3``, ``Bet``,
``2-5``, ``Liar``, ``c3``, ``d3``, ``pass``, ``e4f3*``. An answer is read as follows.

1. Clean-up. Surrounding whitespace is dropped, then surrounding quotes, backticks, asterisks
   (markdown bold) and underscores, and trailing ``. , ; : ! ?``. A leading ``move:`` /
   ``action:`` / ``answer:`` / ``play:`` / ``my move is`` (any case, ``:``/``=``/``-`` or
   just a space) is dropped.
2. The answer is matched against the legal moves, first rule that matches wins:

   a. the move name, ignoring case: ``X(1,1)``, ``bet``, ``LIAR``;
   b. the name's *key*: letters, digits and ``-`` only, lower case, so spaces, brackets, commas
      and ``*`` do not matter: ``x (1, 1)``, ``[d3]``, ``e4f3`` for ``e4f3*``;
   c. the key without ``-`` as well (``e4-f3`` for ``e4f3``), unless the answer is all digits;
   d. a per-game synonym (poker words): in kuhn_poker ``check`` / ``fold`` mean ``Pass`` and
      ``call`` means ``Bet``; in leduc_poker ``check`` means ``Call`` and ``bet`` means
      ``Raise``; in liars_dice ``challenge`` / ``call`` mean ``Liar``;
   e. in games whose move names start with a player mark (tic_tac_toe ``x(1,1)``, connect_four
      ``x3``): the name without the mark, ``(1,1)``, ``1,1``, ``1 1``, ``3``; only your own
      mark or none is accepted (``o(1,1)`` is not x's move);
   f. a bare integer is an OpenSpiel action id (the observation's ``legal_actions``): ``4`` is
      ``x(1,1)`` in tic_tac_toe and ``x4`` in connect_four.

   Moves are not numbered in the observation, so a number is never a list position.
3. If the whole answer does not parse and has several non-empty lines, its last non-empty line
   is tried the same way (a model that thinks aloud and ends with its move).

Anything else is illegal: the reason says whether the text named a move that is not legal in
this position (an occupied cell, a bid that is too low), an action id that is not legal, or no
move at all. Parsing never raises on any string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence

_WRAP = " \t\r\n\"'`*_“”‘’«»"
_TRAIL = ".,;:!?"
_PREFIX = re.compile(
    r"^(?:my\s+)?(?:final\s+)?(?:move|action|answer|play|choice)\b\s*(?:is\b)?\s*[:=\-]?\s*",
    re.IGNORECASE)
_KEEP = re.compile(r"[^a-z0-9\-]")
MAX_ECHO = 60


@dataclass(frozen=True)
class ParsedMove:
    """``action`` and ``move`` (its name) when the answer names a legal move; else ``reason``.

    ``matched_by``: ``name``, ``key``, ``synonym``, ``without_mark`` or ``action_id``.
    """

    action: Optional[int]
    move: Optional[str]
    reason: Optional[str] = None
    matched_by: Optional[str] = None

    @property
    def legal(self) -> bool:
        return self.action is not None


def key(text: str) -> str:
    """Lower case, letters / digits / ``-`` only."""
    return _KEEP.sub("", text.lower())


def clean(text: str) -> str:
    """Step 1 of the scheme: wrapping characters and a ``move:``-style prefix removed."""
    t = text.strip(_WRAP).rstrip(_TRAIL).strip(_WRAP)
    stripped = _PREFIX.sub("", t, count=1)
    if stripped != t:
        t = stripped.strip(_WRAP).rstrip(_TRAIL).strip(_WRAP)
    return t


def echo(text: str, limit: int = MAX_ECHO) -> str:
    """A one-line, bounded rendering of an answer for messages."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _strip_mark(name: str, marks: Sequence[str]) -> Optional[str]:
    low = name.lower()
    for mark in marks:
        if low.startswith(mark) and len(low) > len(mark) and not low[len(mark)].isalpha():
            return name[len(mark):]
    return None


def _match(text: str, legal: Sequence[tuple[int, str]], own_mark: Optional[str],
           marks: Sequence[str] = (),
           aliases: Optional[Mapping[str, str]] = None) -> Optional[ParsedMove]:
    t = clean(text)
    if not t:
        return None
    lows = {t.lower(), text.strip().lower()}
    for a, name in legal:  # a. the name
        if name.lower() in lows:
            return ParsedMove(a, name, matched_by="name")
    k = key(t)
    if not k:
        return None
    by_key = _unique((key(name), a, name) for a, name in legal)
    if k in by_key:  # b. the key
        a, name = by_key[k]
        return ParsedMove(a, name, matched_by="key")
    if not k.replace("-", "").isdigit():  # c. the key without dashes
        by_key2 = _unique((key(name).replace("-", ""), a, name) for a, name in legal)
        k2 = k.replace("-", "")
        if k2 in by_key2:
            a, name = by_key2[k2]
            return ParsedMove(a, name, matched_by="key")
    if aliases and k in aliases:  # d. a synonym
        target = aliases[k].lower()
        for a, name in legal:
            if name.lower() == target:
                return ParsedMove(a, name, matched_by="synonym")
    if own_mark is not None:  # e. without the player's mark
        bare = _unique((key(rest), a, name) for a, name in legal
                       if (rest := _strip_mark(name, [own_mark])) is not None)
        if k in bare:
            a, name = bare[k]
            return ParsedMove(a, name, matched_by="without_mark")
    if k.isdigit() and len(k) <= 9:  # f. an action id
        ids = {a: name for a, name in legal}
        if int(k) in ids:
            return ParsedMove(int(k), ids[int(k)], matched_by="action_id")
    return None


def _unique(rows: Iterable[tuple[str, int, str]]) -> dict[str, tuple[int, str]]:
    """key -> (action, name), leaving out keys that two different actions share."""
    out: dict[str, tuple[int, str]] = {}
    clash: set[str] = set()
    for k, a, name in rows:
        if not k:
            continue
        if k in out and out[k][0] != a:
            clash.add(k)
        out.setdefault(k, (a, name))
    for k in clash:
        del out[k]
    return out


def player_mark(legal: Sequence[tuple[int, str]], marks: Sequence[str]) -> Optional[str]:
    """The mark every legal move name of this player starts with (``x``), if the game has marks."""
    if not marks or not legal:
        return None
    for mark in marks:
        if all(_strip_mark(name, [mark]) is not None for _, name in legal):
            return mark
    return None


def parse_move(text: object, legal: Sequence[tuple[int, str]], *, marks: Sequence[str] = (),
               aliases: Optional[Mapping[str, str]] = None,
               all_moves: Optional[Callable[[], Sequence[tuple[int, str]]]] = None) -> ParsedMove:
    """Read ``text`` as one of the ``legal`` (action id, name) pairs; see the module docstring.

    ``marks`` are the game's player marks (``("x", "o")``) for rule e, ``aliases`` its
    synonyms (lower-case word -> move name) for rule d; ``all_moves``, when
    given, returns (id, name) pairs of every action of the player, legal or not, and is only
    called to explain an illegal answer ("x(1,1) is not legal in this position").
    """
    if not isinstance(text, str):
        return ParsedMove(None, None, f"the answer must be text, got {type(text).__name__}")
    if not legal:
        return ParsedMove(None, None, "there is no legal move: the game is over")
    own = player_mark(legal, marks)
    found = _match(text, legal, own, marks, aliases)
    if found is None:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1:
            found = _match(lines[-1], legal, own, marks, aliases)
    if found is not None:
        return found
    return ParsedMove(None, None, _why_illegal(text, legal, own, marks, all_moves, aliases))


def _why_illegal(text: str, legal: Sequence[tuple[int, str]], own: Optional[str],
                 marks: Sequence[str],
                 all_moves: Optional[Callable[[], Sequence[tuple[int, str]]]],
                 aliases: Optional[Mapping[str, str]] = None) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "the answer is empty"
    candidates = [text] if len(lines) == 1 else [text, lines[-1]]
    if all_moves is not None:
        try:
            every = list(all_moves())
        except Exception:  # noqa: BLE001 - only an explanation; never fail here
            every = []
        legal_ids = {a for a, _ in legal}
        others = [(a, n) for a, n in every if a not in legal_ids]
        for cand in candidates:
            hit = _match(cand, others, own, marks, aliases) if others else None
            if hit is not None and hit.matched_by == "action_id":
                return f"action id {hit.action} ({hit.move}) is not legal in this position"
            if hit is not None:
                return f"{hit.move} is not a legal move in this position"
    for cand in candidates:
        k = key(clean(cand))
        if k.isdigit() and len(k) <= 9:
            return f"action id {int(k)} is not legal here"
        if own is not None:
            other = [m for m in marks if m != own]
            if other and k.startswith(other[0]) and _match(own + k[len(other[0]):], legal, own,
                                                           marks):
                return f"{echo(clean(cand))} uses the opponent's mark; you play {own}"
    return f"could not read a legal move from {echo(text)!r}"
