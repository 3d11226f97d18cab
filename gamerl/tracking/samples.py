"""Sample episodes as a Markdown table: what the policy actually played, for the validation log.

``episode_table(episodes, task_name, max_rows=8)`` shows a few evaluation episodes, one per
row, picked to be DIFFERENT games (a validation log that always shows the same sample hides
what the policy does; see DESIGN.md section 4):

* rows are distinct instances: distinct answers (Wordle), seeds (Password Game), or
  (game, seed) pairs (OpenSpiel); an instance played several times (GRPO groups) shows once;
* outcomes are mixed: the episodes are split by outcome (solved / not solved; win / draw /
  loss / unfinished) and rows are taken from each group in turn, in the episodes' order, so a
  table of a mostly-failing policy still shows its few successes and vice versa;
* the rows keep the episodes' order (deterministic: the same episodes give the same table).

Columns by task:

* ``wordle``: answer | guesses, each with its marks (``CRANE ⬜🟨⬜⬜⬜ → SLATE 🟩⬜⬜⬜🟩``;
  an invalid guess shows as ``✗ `xyzzy` `` with no marks) | result (``solved in 3`` /
  ``not solved``);
* ``password_game``: seed | passwords (one per turn, as code) | rules held/revealed
  (``4/5, breaks 5``: rule numbers are 1-based like the game's text);
* ``openspiel``: game | seat | moves (``you: x(1,1) · opp: o(0,0) · ...``, chance events in
  brackets, illegal attempts marked) | outcome.

Cells are escaped for Markdown tables (``|`` and newlines) and long cells are shortened with
``…``. ``episodes`` are ``gamerl.core.rollout.Episode`` objects (their ``instance``, ``turns``,
``last_obs`` and ``final_info``), from the in-process or the HTTP environment alike.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional, Sequence

__all__ = ["episode_table", "pick_episodes", "sample_rows"]

Rows = tuple  # (header, rows, the picked episodes) of one task's table

MAX_CELL = 400  # characters per cell before it is shortened
MAX_TURNS_SHOWN = 8  # longer episodes show the first turns, "…", and the last ones

_MARK_EMOJI = {"green": "🟩", "yellow": "🟨", "grey": "⬜", "gray": "⬜"}


# ----------------------------------------------------------------------------- helpers


def _cell(text: Any, limit: int = MAX_CELL) -> str:
    """One Markdown table cell: no newlines, pipes escaped, at most ``limit`` characters."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[:limit - 1].rstrip() + "…"
    return s.replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code that survives backticks inside it (Markdown's longer-fence rule)."""
    text = " ".join(str(text).split())
    if not text:
        return "∅"  # an empty answer: visible, not an empty code span
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _elide(items: list[str], keep: int = MAX_TURNS_SHOWN) -> list[str]:
    if len(items) <= keep:
        return items
    head = keep - 2
    return items[:head] + [f"… ({len(items) - keep} more) …"] + items[-2:]


def _instance(ep) -> Any:
    inst = getattr(ep, "instance", None)
    return inst if inst is not None else getattr(ep, "seed", None)


def _key(inst: Any) -> str:
    return json.dumps(inst, sort_keys=True, default=str)


def pick_episodes(episodes: Sequence[Any], key: Callable[[Any], Any],
                  outcome: Callable[[Any], Any], max_rows: int = 8) -> list[Any]:
    """Up to ``max_rows`` episodes with distinct ``key``s (the first episode of each key),
    shared out among the ``outcome`` groups in turn (groups in order of first appearance) and
    spread evenly over each group (not just its first few: held-out instances often come in
    order, e.g. Wordle's answers alphabetically); returned in the episodes' original order."""
    if max_rows <= 0:
        return []
    seen: set = set()
    groups: dict[Any, list[int]] = {}
    for i, ep in enumerate(episodes):
        k = key(ep)
        if k in seen:
            continue
        seen.add(k)
        groups.setdefault(outcome(ep), []).append(i)
    members = list(groups.values())
    quota = [0] * len(members)
    while sum(quota) < max_rows and any(q < len(g) for q, g in zip(quota, members)):
        for j, g in enumerate(members):
            if quota[j] < len(g) and sum(quota) < max_rows:
                quota[j] += 1
    chosen = [g[(r * len(g)) // q] for g, q in zip(members, quota) for r in range(q)]
    return [episodes[i] for i in sorted(chosen)]


def _table(header: Sequence[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- Wordle


def _wordle_answer(ep) -> Optional[str]:
    inst = getattr(ep, "instance", None)
    if isinstance(inst, dict) and inst.get("answer"):
        return str(inst["answer"])
    for src in (getattr(ep, "last_obs", None) or {}, getattr(ep, "final_info", None) or {}):
        if src.get("answer"):
            return str(src["answer"])
    return None


def _wordle_turns(ep, answer: Optional[str]) -> list[str]:
    """One entry per turn: ``GUESS 🟩⬜…`` for a valid guess, ``✗ `text` `` for a wasted turn.

    The game's own record (``last_obs["attempts"]`` and ``["marks"]``) when there is one; else
    the turns' actions, scored with ``tasks.wordle.feedback`` when the answer is known."""
    obs = getattr(ep, "last_obs", None) or {}
    attempts, marks = obs.get("attempts"), obs.get("marks")
    out: list[str] = []
    if attempts is not None and marks is not None and len(attempts) == len(ep.turns):
        scored = iter(marks)
        for att in attempts:
            if att.get("valid"):
                m = next(scored, None) or []
                out.append(f"{att['guess'].upper()} {''.join(_MARK_EMOJI.get(x, '?') for x in m)}")
            else:
                out.append(f"✗ {_code(att.get('guess', ''))}")
        return out
    for t in ep.turns:
        if t.stats.get("valid") and answer:
            from tasks.wordle import feedback

            m = feedback(answer, t.action.strip().lower())
            out.append(f"{t.action.strip().upper()} {''.join(_MARK_EMOJI[x] for x in m)}")
        elif t.stats.get("valid"):
            out.append(t.action.strip().upper())
        else:
            out.append(f"✗ {_code(t.action)}")
    return out


def _wordle_result(ep) -> str:
    if ep.success:
        n = len(ep.turns)
        return f"solved in {n}"
    if getattr(ep, "context_exhausted", False):
        return "not solved (context full)"
    return "not solved"


def _wordle_table(episodes: Sequence[Any], max_rows: int) -> Rows:
    picked = pick_episodes(episodes, key=lambda ep: _wordle_answer(ep) or _key(_instance(ep)),
                           outcome=lambda ep: bool(ep.success), max_rows=max_rows)
    rows = []
    for ep in picked:
        answer = _wordle_answer(ep)
        turns = _elide(_wordle_turns(ep, answer))
        rows.append([_cell(answer.upper() if answer else "?"),
                     _cell(" → ".join(turns) if turns else "(no guess)"),
                     _cell(_wordle_result(ep))])
    return ["answer", "guesses", "result"], rows, picked


# ----------------------------------------------------------------------------- Password Game


def _password_rules(ep) -> str:
    verdicts = ep.rule_verdicts() if hasattr(ep, "rule_verdicts") else {}
    if not verdicts and ep.turns:
        return f"{ep.rules_satisfied}/{ep.num_revealed}"
    held = sum(verdicts.values())
    text = f"{held}/{len(verdicts)}"
    broken = [str(i + 1) for i, ok in sorted(verdicts.items()) if not ok]
    if broken:
        text += ", breaks " + " ".join(broken)
    if ep.success:
        text += " (won)"
    return text


def _password_table(episodes: Sequence[Any], max_rows: int) -> Rows:
    picked = pick_episodes(episodes, key=lambda ep: _key(_instance(ep)),
                           outcome=lambda ep: bool(ep.success), max_rows=max_rows)
    rows = []
    for ep in picked:
        pws = _elide([_code(t.action) for t in ep.turns])
        rows.append([_cell(ep.seed), _cell(" → ".join(pws) if pws else "(none)"),
                     _cell(_password_rules(ep))])
    return ["seed", "passwords", "rules held/revealed"], rows, picked


# ----------------------------------------------------------------------------- OpenSpiel


def _openspiel_game(ep) -> str:
    inst = getattr(ep, "instance", None)
    if isinstance(inst, dict) and inst.get("game"):
        return str(inst["game"])
    return str((getattr(ep, "last_obs", None) or {}).get("game", "?"))


def _openspiel_moves(ep) -> list[str]:
    """The game's move history (``you`` / ``opp`` / chance), with the model's illegal attempts
    (turns the game did not play) marked ``✗``; the turns' actions when there is no history."""
    obs = getattr(ep, "last_obs", None) or {}
    history = obs.get("history")
    illegal = [t.action for t in ep.turns if t.stats.get("illegal")]
    if history is None:
        return [f"you: {'✗ ' if t.stats.get('illegal') else ''}{t.action}" for t in ep.turns]
    out = []
    for h in history:
        by = h.get("by")
        move = str(h.get("move", "?"))
        out.append(f"[{move}]" if by == "chance" else f"{'you' if by == 'you' else 'opp'}: {move}")
    if illegal:
        out.append("illegal tries: " + ", ".join(_code(a) for a in illegal))
    return out


def _openspiel_outcome(ep) -> str:
    outcome = ep.outcome if hasattr(ep, "outcome") else None
    if outcome is None:
        return "unfinished (context full)" if getattr(ep, "context_exhausted", False) else "unfinished"
    return str(outcome)


def _openspiel_table(episodes: Sequence[Any], max_rows: int) -> Rows:
    def key(ep) -> str:
        inst = getattr(ep, "instance", None)
        if isinstance(inst, dict):
            return _key({k: inst.get(k) for k in ("game", "seed", "opponent")})
        return _key([_openspiel_game(ep), ep.seed])

    picked = pick_episodes(episodes, key=key, outcome=_openspiel_outcome, max_rows=max_rows)
    rows = []
    for ep in picked:
        seat = (getattr(ep, "last_obs", None) or {}).get("player")
        moves = _elide(_openspiel_moves(ep), keep=2 * MAX_TURNS_SHOWN)
        rows.append([_cell(_openspiel_game(ep)), _cell("?" if seat is None else seat),
                     _cell(" · ".join(moves) if moves else "(none)"),
                     _cell(_openspiel_outcome(ep))])
    return ["game", "seat", "moves", "outcome"], rows, picked


# ----------------------------------------------------------------------------- entry point

_TABLES: dict[str, Callable[[Sequence[Any], int], "Rows"]] = {
    "wordle": _wordle_table,
    "password_game": _password_table,
    "openspiel": _openspiel_table,
}


def sample_rows(episodes: Sequence[Any], task_name: str, max_rows: int = 8,
                with_answers: bool = False) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of the sample table (``episode_table``'s cells). ``with_answers`` adds
    a column with the model's own answers, turn by turn, before the game read an action out of
    them (the tracker's tables, which have room for it). Unknown ``task_name`` raises
    ``ValueError``."""
    if task_name not in _TABLES:
        raise ValueError(f"episode_table: unknown task {task_name!r}; choose from {sorted(_TABLES)}")
    header, rows, picked = _TABLES[task_name](list(episodes), max_rows)
    if with_answers:
        header = header + ["answers (model text, per turn)"]
        rows = [row + [_cell(" → ".join(_elide([_code(t.answer) for t in ep.turns])) or "(none)")]
                for row, ep in zip(rows, picked)]
    return header, rows


def episode_table(episodes: Sequence[Any], task_name: str, max_rows: int = 8) -> str:
    """A Markdown table of up to ``max_rows`` different episodes (distinct instances, mixed
    outcomes; module docstring) in the task's columns. An empty ``episodes`` gives the header
    only. Unknown ``task_name`` raises ``ValueError``."""
    return _table(*sample_rows(episodes, task_name, max_rows))
