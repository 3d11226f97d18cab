"""gamerl.core.evaluate.format_table: full column names, rows named for what they are (no model)."""

import pytest

from gamerl.core.evaluate import format_table
from gamerl.games import TASKS, get_task

ROWS = {
    "baseline": {"reward": 4.21, "rules_satisfied": 2.85, "success_rate": 0.109, "turns": 2.87,
                 "episodes": 128},
    "solver": {"label": "solver (all rules)", "reward": 14.93, "rules_satisfied": 6.0,
               "success_rate": 1.0, "turns": 1.0, "episodes": 128},
}


def _columns(table: str) -> tuple[list[str], list[str]]:
    """(header line, data lines): the header's names end where their numbers end."""
    lines = table.splitlines()
    assert set(lines[1]) == {"-"} and len(lines[1]) == len(lines[0])
    return lines[0], lines[2:]


def test_column_names_are_printed_in_full_and_aligned():
    rows = {"policy": {"reward": -0.3, "best_greens": 0.41, "guesses_when_solved": 4.25,
                       "success_rate": 0.0, "turns": 6.0, "episodes": 6}}
    head, (line,) = _columns(format_table(rows, ("best_greens", "guesses_when_solved")))
    assert "guesses when solved" in head and "best greens" in head
    assert "rules_satisfie" not in format_table(ROWS)  # the old 14-character cut
    # every value is right-aligned under its column name
    for name, value in (("guesses when solved", "4.25"), ("best greens", "0.41"),
                        ("success", "0.0%"), ("episodes", "6")):
        end = head.index(name) + len(name)
        assert line[end - len(value):end] == value, (name, line)


def test_rows_are_named_by_their_label():
    head, lines = _columns(format_table(ROWS))
    assert "rules satisfied" in head
    assert lines[0].startswith("baseline ") and lines[1].startswith("solver (all rules) ")
    assert all(len(l) == len(head) for l in lines)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_reference_agent_has_a_label_that_is_not_an_upper_bound(task):
    from gamerl.config import get_config

    t = get_task(task)
    agents = t.reference_agents(get_config("tiny", task=task))
    assert set(agents) == set(t.reference_labels)
    assert not any("upper bound" in label for label in t.reference_labels.values())


def test_password_game_rows_say_what_they_bound():
    labels = get_task("password_game").reference_labels
    assert labels == {"solver": "solver (all rules)", "random": "random strings (floor)"}


def test_a_games_report_columns_head_the_console_table_as_the_docs_tables():
    """The trainer's and the CLI's table show the game's ``Task.report_columns`` (the columns
    the docs' tables print) with their headers and formats; reward, success and turns once each;
    the per-rule pass rates (a list) stay out of a console line."""
    wordle = {"policy": {"reward": 0.31, "invalid_rate": 0.016, "repeat_rate": 0.107,
                         "best_greens": 1.32, "guesses_when_solved": 4.0, "success_rate": 0.0,
                         "turns": 6.0, "episodes": 256}}
    head, (line,) = _columns(format_table(wordle, get_task("wordle").report_columns))
    for name, value in (("invalid guesses", "1.6%"), ("repeated guesses", "10.7%"),
                        ("best greens (of 5)", "1.32"), ("success", "0.0%")):
        end = head.index(name) + len(name)
        assert line[end - len(value):end] == value, (name, line)
    assert head.split().count("reward") == 1 and "won" not in head.split()
    password = {k: {**r, "per_rule_pass_rate": [1.0, 0.5]} for k, r in ROWS.items()}
    head, lines = _columns(format_table(password, get_task("password_game").report_columns,
                                        {"num_rules": 12}))
    assert "rules satisfied (of 12)" in head and "per-rule" not in head
    # without the run's config the header has no number to fill in: the key's name, no KeyError
    assert "rules satisfied  " in format_table(password, get_task("password_game").report_columns)
    assert head.split().count("turns") == 1 and all(len(l) == len(head) for l in lines)


def test_a_report_columns_title_is_the_one_place_its_header_is_filled():
    """``ReportColumn.title``: what the console's table and the docs' tables
    (``bench/doc_numbers.py``) both print; a config without the header's field falls back to the
    key's words instead of raising."""
    from gamerl.games.base import ReportColumn

    col = ReportColumn("rules_satisfied", "rules satisfied (of {num_rules})")
    assert col.title({"num_rules": 12, "task": "password_game"}) == "rules satisfied (of 12)"
    assert col.title({"task": "password_game"}) == col.title() == "rules satisfied"
    assert ReportColumn("reward", "reward").title({}) == "reward"


def test_distinct_games_counts_the_games_a_player_meets():
    """The first 9 rules carry no per-game data: 100 seeds (training and held-out alike) give
    one game with 6 or 9 rules and 100 with 12. Wordle's games are its answers."""
    from gamerl.config import get_config
    from gamerl.core.evaluate import distinct_games, eval_instances

    seeds = list(range(50)) + list(range(1_000_000, 1_000_050))
    for rules, games in ((6, 1), (9, 1), (12, 100)):
        assert distinct_games(get_config("tiny", num_rules=rules), seeds) == games
    wordle = get_config("tiny", task="wordle", eval_episodes=64)
    assert distinct_games(wordle, eval_instances(wordle)) == 64
    # the validation games are other answers than the test games
    val = {g["answer"] for g in eval_instances(wordle, split="validation")}
    assert not val & {g["answer"] for g in eval_instances(wordle)}


def test_an_evaluation_of_one_game_says_so(tiny_dir, caplog):
    """Every evaluation reports its distinct games, and warns when they are one."""
    import logging

    from gamerl.config import get_config
    from gamerl.core.evaluate import evaluate
    from gamerl.models import load_policy

    cfg = get_config("tiny", num_rules=4, max_steps=1, max_new_tokens=8, eval_episodes=4,
                     warmstart=False, device="cpu", progress=False)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    with caplog.at_level(logging.WARNING, logger="gamerl"):
        metrics = evaluate(lm, tok, cfg.eval_seeds(), cfg)
    assert metrics["distinct_games"] == 1
    assert "all one game" in caplog.text
