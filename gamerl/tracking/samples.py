"""Sample episodes as a Markdown table: what the policy actually played, for the validation log.

``episode_table(episodes, task_name, max_rows=8)`` shows a few evaluation episodes, one per
row, picked to be DIFFERENT games (a validation log that always shows the same sample hides
what the policy does; see DESIGN.md section 4):

* rows are distinct games: an instance played several times (GRPO groups) shows once (what
  counts as the same game is the task's: ``SampleTable.key``);
* outcomes are mixed: the episodes are split by outcome (``SampleTable.outcome``: won or not
  by default; OpenSpiel's win / draw / loss / unfinished) and rows are taken from each group in
  turn, in the episodes' order, so a table of a mostly-failing policy still shows its few
  successes and vice versa;
* the rows keep the episodes' order (deterministic: the same episodes give the same table).

The columns are the game's (``Task.sample_table``, in each game's module of ``gamerl.games``:
the Password Game's seed | passwords | rules held/revealed, Wordle's answer | guesses with
their marks | result, OpenSpiel's game | seat | moves | outcome). A game without one shows
instance | actions | result.

Cells are escaped for Markdown tables (``|`` and newlines) and long cells are shortened with
``…``, whatever the game wrote in them. ``episodes`` are ``gamerl.core.rollout.Episode``
objects, from the in-process or the HTTP environment alike.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..games.base import SampleTable, code_span, elide, episode_instance
from ..games.registry import get_task

__all__ = ["GENERIC_SAMPLE_TABLE", "episode_table", "pick_episodes", "sample_rows"]

MAX_CELL = 400  # characters per cell before it is shortened


def _cell(text: Any, limit: int = MAX_CELL) -> str:
    """One Markdown table cell: no newlines, pipes escaped, at most ``limit`` characters."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[:limit - 1].rstrip() + "…"
    return s.replace("|", "\\|")


def _generic_row(ep) -> list[str]:
    actions = elide([code_span(t.action) for t in ep.turns])
    return [str(episode_instance(ep)), " → ".join(actions) if actions else "(none)",
            "won" if ep.success else "not won"]


# The columns of a game that names none (Task.sample_table is None).
GENERIC_SAMPLE_TABLE = SampleTable(header=("instance", "actions", "result"), row=_generic_row)


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


def sample_rows(episodes: Sequence[Any], task_name: str, max_rows: int = 8,
                with_answers: bool = False) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of the sample table (``episode_table``'s cells). ``with_answers`` adds
    a column with the model's own answers, turn by turn, before the game read an action out of
    them (the tracker's tables, which have room for it). An unknown ``task_name`` raises
    ``ValueError`` (``get_task``)."""
    table = get_task(task_name).sample_table or GENERIC_SAMPLE_TABLE
    picked = pick_episodes(list(episodes), key=table.key, outcome=table.outcome,
                           max_rows=max_rows)
    header = list(table.header)
    rows = [[_cell(text) for text in table.row(ep)] for ep in picked]
    if with_answers:
        header.append("answers (model text, per turn)")
        for row, ep in zip(rows, picked):
            row.append(_cell(" → ".join(elide([code_span(t.answer) for t in ep.turns]))
                             or "(none)"))
    return header, rows


def episode_table(episodes: Sequence[Any], task_name: str, max_rows: int = 8) -> str:
    """A Markdown table of up to ``max_rows`` different episodes (distinct games, mixed
    outcomes; module docstring) in the task's columns. An empty ``episodes`` gives the header
    only. An unknown ``task_name`` raises ``ValueError``."""
    return _table(*sample_rows(episodes, task_name, max_rows))
