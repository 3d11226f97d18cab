"""gamerl.tracking.samples.episode_table: the validation log's table of different sample episodes,
in each game's columns (``Task.sample_table``); and the games' own fields of an episode's record
(``Task.record_fields``).

Episodes are played against the real games through each task's own start / extract /
turn_stats (the rollout's game side, without a model: no tokenizer or torch work), so the table
sees exactly the Episode fields a rollout fills in (instance, turns, last_obs, final_info).
"""

import random

import pytest

from gamerl.config import get_config
from gamerl.games import get_task
from gamerl.games.base import code_span
from gamerl.games.openspiel import outcome
from gamerl.games.password_game import num_revealed, rules_satisfied
from gamerl.games.wordle import wordle_heldout_answers
from gamerl.core.rollout import Episode, Turn
from gamerl.tracking.samples import episode_table, pick_episodes


def play(task_name: str, instances, answer_fn, cfg=None) -> list[Episode]:
    """One episode per instance: ``answer_fn(episode) -> text`` each turn, as rollout does."""
    cfg = cfg or get_config("tiny", task=task_name)
    task = get_task(task_name)
    make_env = task.env_factory(cfg)
    out = []
    for inst in instances:
        env, obs = task.start(make_env, inst)
        ep = Episode(seed=inst["seed"] if isinstance(inst, dict) else inst, token_ids=[],
                     policy_mask=[], gen_logprobs=[], rewards=[], prompt_len=0, last_obs=obs,
                     instance=inst)
        for _ in range(task.max_turns(cfg)):
            text = answer_fn(ep)
            action = task.extract(text)
            obs, reward, done, info = env.submit(action)
            stats = task.turn_stats(info)
            ep.turns.append(Turn(answer=text, action=action, reward=float(reward),
                                 success=bool(stats["success"]), n_tokens=1, last_token=0,
                                 stats=stats))
            ep.last_obs, ep.final_info, ep.success = obs, info, bool(stats["success"])
            if done:
                break
        ep.done = True
        out.append(ep)
    return out


def rows(table: str) -> list[list[str]]:
    """The body rows of a Markdown table, cells split on unescaped pipes."""
    import re

    lines = table.splitlines()
    assert lines[1].startswith("|---"), table
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[2:]]


# ----------------------------------------------------------------------------- Wordle


@pytest.fixture(scope="module")
def wordle_episodes():
    cfg = get_config("tiny", task="wordle")
    task = get_task("wordle")
    agents = task.reference_agents(cfg)
    held = wordle_heldout_answers()
    # GRPO-like: every answer played 3 times; the solver wins, a bad player wastes turns
    instances = [{"seed": 1_000_000 + i, "answer": held[i]} for i in range(12) for _ in range(3)]
    solver = play("wordle", instances[:18], agents["solver"])
    words = ["xyzzy", "crane", "Guess: SLATE", "crane", "qqqqq", "pious"]
    scripted = play("wordle", instances[18:], lambda ep: words[len(ep.turns) % len(words)])
    return solver + scripted


def test_wordle_table_shows_answer_guesses_marks_and_result(wordle_episodes):
    table = episode_table(wordle_episodes, "wordle", max_rows=8)
    print("\n" + table)
    assert table.splitlines()[0] == "| answer | guesses | result |"
    body = rows(table)
    assert len(body) == 8
    answers = [r[0] for r in body]
    assert len(set(answers)) == 8, "rows must be different episodes (distinct answers)"
    held = {w.upper() for w in wordle_heldout_answers()}
    assert set(answers) <= held
    by_answer = {ep.instance["answer"].upper(): ep for ep in wordle_episodes}
    for answer, guesses, result in body:
        ep = by_answer[answer]
        turns = guesses.split(" → ")
        assert len(turns) == len(ep.turns)
        if ep.success:
            assert result == f"solved in {len(ep.turns)}"
            assert turns[-1] == f"{answer} 🟩🟩🟩🟩🟩"
            assert turns[0].startswith("SOARE ")  # the solver's opening
        else:
            assert result == "not solved"
            assert turns[0] == "✗ `xyzzy`"  # a wasted turn: the text, no marks
            assert turns[2].startswith("SLATE ")  # "Guess: SLATE" extracted and upper-cased
            assert "(repeated" not in guesses
    # the marks are the game's: check one against tasks.wordle.feedback
    from tasks.wordle import feedback

    answer, guesses, _ = body[0]
    word, marks = guesses.split(" → ")[0].split(" ")
    emoji = {"green": "🟩", "yellow": "🟨", "grey": "⬜"}
    assert marks == "".join(emoji[m] for m in feedback(answer.lower(), word.lower()))


def test_wordle_rows_mix_solved_and_unsolved(wordle_episodes):
    body = rows(episode_table(wordle_episodes, "wordle", max_rows=4))
    results = [r[2] for r in body]
    assert sum(r.startswith("solved") for r in results) == 2
    assert sum(r == "not solved" for r in results) == 2
    # and they keep the episodes' order
    order = [ep.instance["answer"].upper() for ep in wordle_episodes]
    assert [r[0] for r in body] == sorted((r[0] for r in body), key=order.index)


def test_wordle_fewer_distinct_answers_than_rows(wordle_episodes):
    same = [ep for ep in wordle_episodes if ep.instance["answer"] == wordle_episodes[0].instance["answer"]]
    assert len(same) == 3
    body = rows(episode_table(same, "wordle", max_rows=8))
    assert len(body) == 1  # one answer: one row, never the same game three times


def test_wordle_table_from_turns_when_no_board():
    """Episodes without the game's board (e.g. rebuilt from records) still get marks."""
    [ep] = play("wordle", [{"seed": 5, "answer": "abbey"}],
                lambda ep: ["babes", "zzzzz", "abbey"][len(ep.turns)])
    ep.last_obs = {}
    body = rows(episode_table([ep], "wordle"))
    assert body == [["ABBEY", "BABES 🟨🟨🟩🟩⬜ → ✗ `zzzzz` → ABBEY 🟩🟩🟩🟩🟩", "solved in 3"]]


def test_cells_are_escaped_and_shortened():
    nasty = "a|b\nc`d " + "x" * 1000
    [ep] = play("wordle", [{"seed": 6, "answer": "crane"}], lambda ep: nasty)
    table = episode_table([ep], "wordle")
    body = rows(table)
    assert len(body) == 1 and len(body[0]) == 3  # the pipe did not split the cell
    assert "\n" not in body[0][1] and len(body[0][1]) <= 400
    assert body[0][1].count("✗") == 6


def test_empty_and_unknown():
    assert rows(episode_table([], "wordle")) == []
    with pytest.raises(ValueError, match="unknown task"):
        episode_table([], "chess")


def test_pick_episodes_round_robins_over_outcomes():
    eps = [("a", 1), ("b", 1), ("a", 1), ("c", 1), ("d", 0), ("e", 1), ("f", 0)]
    got = pick_episodes(eps, key=lambda e: e[0], outcome=lambda e: e[1], max_rows=4)
    assert got == [("a", 1), ("c", 1), ("d", 0), ("f", 0)]  # 2 of a,b,c,e spread: a, c
    got = pick_episodes(eps, key=lambda e: e[0], outcome=lambda e: e[1], max_rows=5)
    assert got == [("a", 1), ("b", 1), ("c", 1), ("d", 0), ("f", 0)]
    many = [(i, 1) for i in range(100)]
    got = pick_episodes(many, key=lambda e: e[0], outcome=lambda e: e[1], max_rows=4)
    assert got == [(0, 1), (25, 1), (50, 1), (75, 1)]  # spread, not the first four
    assert pick_episodes(eps, key=lambda e: e[0], outcome=lambda e: e[1], max_rows=0) == []


# ----------------------------------------------------------------------------- Password Game


def test_password_game_table():
    cfg = get_config("tiny")  # 6 rules, 3 turns
    rng = random.Random(0)
    pool = ["hello", "Hello1!", "Hello997!May", "**bold** | pipe", "`tick`"]
    seeds = [1_000_000 + i for i in range(6)]
    eps = play("password_game", seeds + seeds, lambda ep: rng.choice(pool), cfg)
    table = episode_table(eps, "password_game", max_rows=8)
    print("\n" + table)
    assert table.splitlines()[0] == "| seed | passwords | rules held/revealed |"
    body = rows(table)
    assert len(body) == 6 and len({r[0] for r in body}) == 6  # distinct seeds only
    by_seed = {}
    for ep in eps:
        by_seed.setdefault(str(ep.seed), ep)
    for seed, passwords, rules in body:
        ep = by_seed[seed]
        assert len(passwords.split(" → ")) == len(ep.turns)
        held, revealed = rules.split(",")[0].split(" ")[0].split("/")
        assert (int(held), int(revealed)) == (rules_satisfied(ep), num_revealed(ep))
        if int(held) < int(revealed):
            assert "breaks" in rules
    assert "`**bold** \\| pipe`" in table  # markup kept verbatim, the pipe escaped


def test_code_spans_survive_backticks():
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`") == "`` `x` ``"
    assert code_span("") == "∅"


def test_password_game_record_has_its_own_fields():
    cfg = get_config("tiny")
    [ep] = play("password_game", [7], lambda ep: ["hello", "Hello1!", "Hello997!"][len(ep.turns)],
                cfg)
    record = ep.record(get_task("password_game"))
    assert record["actions"] == record["passwords"] == ["hello", "Hello1!", "Hello997!"]
    assert (record["rules_satisfied"], record["num_revealed"]) == (rules_satisfied(ep),
                                                                  num_revealed(ep))
    assert "outcome" not in record


# ----------------------------------------------------------------------------- OpenSpiel


def test_openspiel_table():
    pytest.importorskip("pyspiel")
    cfg = get_config("tiny", task="openspiel")
    rng = random.Random(1)

    def mover(ep):  # mostly legal random moves, sometimes nonsense (an illegal try)
        legal = ep.last_obs.get("legal_moves") or ["?"]
        return "banana" if rng.random() < 0.15 else rng.choice(legal)

    instances = [{"seed": 1_000_000 + i, "game": "tic_tac_toe", "opponent": "random"}
                 for i in range(10)]
    eps = play("openspiel", instances, mover, cfg)
    table = episode_table(eps, "openspiel", max_rows=6)
    print("\n" + table)
    assert table.splitlines()[0] == "| game | seat | moves | outcome |"
    body = rows(table)
    assert len(body) == 6
    outcomes = {outcome(ep) or "unfinished" for ep in eps}
    assert {r[3] for r in body} == outcomes or len(outcomes) > 6
    for game, seat, moves, result in body:
        assert game == "tic_tac_toe" and seat in ("0", "1")
        assert "you: " in moves or "illegal tries" in moves
    records = [ep.record(get_task("openspiel")) for ep in eps]
    assert [r.get("outcome") for r in records] == [outcome(ep) for ep in eps]
    assert not any("rules_satisfied" in r for r in records)
