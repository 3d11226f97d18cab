"""The game as an environment: seeded instances, the solver, turn mechanics, rewards, the CLI."""

import json
import re
import string
import subprocess
import sys

import chess
import pytest

from tasks.password_game import (GameConfig, GameOver, LocalPasswordGameEnv, PasswordGame,
                                 RewardConfig, check_password, make_instance, solve)
from tasks.password_game.instance import (N_MATCHING_VIDEOS, N_SEARCH_RESULTS, _moon_phase_is_unambiguous,
                                          chess_puzzles, countries, wordle_answers)
from tasks.password_game.richtext import parse
from tasks.password_game.rules import NUM_RULES, check_rules
from tasks.password_game.solver import solve_plain

SOLVER_SEEDS = range(500)


# ---------------------------------------------------------------- instances
def test_instances_are_deterministic_and_differ_by_seed():
    make_instance.cache_clear()
    a = make_instance(123)
    make_instance.cache_clear()
    assert make_instance(123) == a
    assert len({make_instance(s).captcha for s in range(50)}) > 45


@pytest.mark.parametrize("seed", [0, 1, 2, 2**63 - 1, 987654321])
def test_instance_data_is_well_formed(seed):
    inst = make_instance(seed)
    assert len(inst.captcha) == 5 and set(inst.captcha) <= set(string.ascii_lowercase + string.digits)
    assert inst.wordle in wordle_answers()
    assert inst.country in countries()
    assert _moon_phase_is_unambiguous(inst.date)
    board = chess.Board(inst.chess.fen)
    for san in inst.chess.mates:
        b = board.copy()
        b.push_san(san)
        assert b.is_checkmate()
    assert len(inst.videos) == N_SEARCH_RESULTS
    assert sum(v.seconds == inst.video_seconds for v in inst.videos) == N_MATCHING_VIDEOS
    assert len(set(inst.banned)) == 2 and all(c in string.ascii_lowercase for c in inst.banned)


@pytest.mark.parametrize("bad", [-1, 2**63, 1.5, "7", None, True])
def test_bad_seeds_are_rejected(bad):
    with pytest.raises((TypeError, ValueError)):
        make_instance(bad)


def test_data_files_are_sane():
    words = wordle_answers()
    assert len(words) > 2000 and all(len(w) == 5 and w.isalpha() and w.islower() for w in words)
    names = [c.name for c in countries()]
    assert len(names) == len(set(names)) >= 40
    for c in countries():
        for clue in c.clues:
            for n in (c.name, *c.aliases):
                assert n not in clue.lower(), (c.name, clue)
    assert len(chess_puzzles()) >= 300


# ---------------------------------------------------------------- the solver
def test_solver_solves_hundreds_of_seeds():
    for seed in SOLVER_SEEDS:
        inst = make_instance(seed)
        result = check_password(solve(inst), seed)
        assert result["all_satisfied"], (seed, [r["id"] for r in result["rules"] if not r["satisfied"]])
        # The sacrificed letters are ones the solver never needs.
        assert not set(solve_plain(inst).lower()) & set(inst.banned)


def test_solver_wins_a_fresh_game_in_two_turns():
    # Turn 1 reveals rules up to the fire (which costs a turn); turn 2 hatches Paul and wins.
    for seed in range(0, 300, 7):
        game = PasswordGame()
        game.reset(seed)
        password = solve(game.instance, hatched=False)
        _, _, done, info = game.step(password)
        assert not done and info["on_fire"] and info["num_revealed"] == 20
        assert "🔥" in game.last_password
        _, _, done, info = game.step(password)
        assert done and info["success"] and info["rules_satisfied"] == NUM_RULES
        assert game.hatched and "🐔" in game.last_password and "🥚" not in game.last_password


# ---------------------------------------------------------------- turn mechanics
def test_one_good_password_reveals_several_rules():
    game = PasswordGame()
    game.reset(5)
    _, _, _, info = game.step("Abcde1!996")  # rules 0..4 hold, 5 (month) appears and fails
    assert info["newly_revealed"] == [1, 2, 3, 4, 5]
    assert [r["satisfied"] for r in info["rules"]] == [True] * 5 + [False]


def test_after_hatching_paul_must_be_a_chicken():
    game = PasswordGame()
    game.reset(11)
    egg = solve(game.instance, hatched=False)
    game.step(egg)
    # Break rule 23 (the video) so the cascade stops after Paul hatched.
    broken = egg
    for video in game.instance.videos:
        broken = broken.replace(video.id, "x" + video.id)
    _, _, _, info = game.step(broken)
    assert game.hatched and info["num_revealed"] == 24 and not info["success"]
    fb = game.feedback(solve(game.instance, hatched=True))
    assert fb["all_satisfied"]
    fb_egg = game.feedback(solve(game.instance, hatched=False))
    assert not fb_egg["rules"][16]["satisfied"]


def test_feedback_changes_nothing():
    game = PasswordGame()
    obs = game.reset(9)
    fb = game.feedback(solve(game.instance, hatched=False))
    assert fb["all_satisfied"] and len(fb["rules"]) == 1
    assert game.observation() == obs


def test_episode_ends_after_max_steps_and_rejects_more():
    game = PasswordGame(GameConfig(max_steps=3))
    game.reset(1)
    for turn in range(1, 4):
        _, _, done, info = game.step("x")
        assert done == (turn == 3)
    assert info["truncated"] and not info["success"]
    with pytest.raises(GameOver):
        game.step("x")


def test_reward_follows_the_seed_formula():
    cfg = RewardConfig(reward_per_rule=1.0, length_penalty=0.01, episode_bonus=10.0)
    game = PasswordGame(GameConfig(reward=cfg))
    game.reset(2)
    _, reward, _, info = game.step("Abcde1!996")  # 5 of 6 revealed rules hold, length 10
    assert info["rules_satisfied"] == 5 and info["length"] == 10
    assert reward == pytest.approx(5 * 1.0 - 10 * 0.01 + 10.0)
    _, reward, _, info = game.step("abc")  # 0 rules hold (rule 0 fails... and the rest)
    assert reward == pytest.approx(info["rules_satisfied"] - 0.03)


def test_delta_rewards_sum_to_the_final_score():
    game = PasswordGame(GameConfig(reward=RewardConfig(mode="delta")))
    game.reset(4)
    egg = solve(game.instance, hatched=False)
    total = 0.0
    for pw in ["hello", "Hello1!", egg, egg]:
        _, r, done, info = game.step(pw)
        total += r
    assert done and total == pytest.approx(info["score"])


def test_local_env_has_the_seed_api():
    with LocalPasswordGameEnv() as env:
        obs = env.reset(seed=None)
        assert 0 <= obs["seed"] < 2**63 and obs["num_revealed"] == 1 and "Rule 1:" in obs["text"]
        fb = env.get_feedback("hello")
        obs2, reward, done, info = env.submit("hello")
        assert fb["rules"] == info["rules"][:1] and isinstance(reward, float) and not done


def test_answers_that_are_not_passwords_are_moves_not_crashes():
    game = PasswordGame()
    game.reset(0)
    for junk in ["", "\x00\x01\x1b[31m", "\ud800", "*" * 10_000, "\\" * 999, "🔥" * 50]:
        _, reward, _, info = game.step(junk)
        assert isinstance(reward, float)
    with pytest.raises(TypeError):
        game.step(None)


# ---------------------------------------------------------------- command line
def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tasks.password_game", *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_check_json_lists_all_26_rules():
    out = run_cli("check", "--seed", "7", "--password", "Hello1!", "--json")
    assert out.returncode == 0, out.stderr
    rules = json.loads(out.stdout)["rules"]
    assert [r["id"] for r in rules] == list(range(NUM_RULES))
    assert [r["satisfied"] for r in rules[:4]] == [True] * 4 and rules[4]["satisfied"] is False
    assert all(set(r) == {"id", "text", "satisfied"} for r in rules)


def test_cli_solve_prints_a_full_solution():
    out = run_cli("solve", "--seed", "7")
    assert out.returncode == 0, out.stderr
    assert all(check_rules(parse(out.stdout.rstrip("\n")), make_instance(7)))


def test_cli_play_reads_passwords_from_stdin():
    out = subprocess.run([sys.executable, "-m", "tasks.password_game", "play", "--seed", "3"],
                         input="hello\n:feedback Hello1!\n:quit\n", capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Rule 2:" in out.stdout and "PASS rule 1" in out.stdout


def test_cli_rejects_bad_seed_with_a_message():
    out = run_cli("check", "--seed", "abc", "--password", "x")
    assert out.returncode == 2 and "seed must be an integer" in out.stderr


def test_a_shorter_game_is_won_on_its_own_rules():
    game = PasswordGame(GameConfig(num_rules=5))
    game.reset(8)
    _, _, done, info = game.step("Abcde1!996")
    assert done and info["success"] and info["num_revealed"] == 5
    with pytest.raises(ValueError):
        GameConfig(num_rules=0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1", None])
def test_reward_weights_must_be_finite_numbers(bad):
    with pytest.raises(ValueError):
        RewardConfig(reward_per_rule=bad)


def test_fire_never_splits_markup():
    from tasks.password_game.game import set_on_fire

    for seed in range(200):
        pw = solve(make_instance(seed), hatched=False)
        burning = set_on_fire(pw, seed)
        assert burning.count("🔥") == 3
        assert re.findall(r"\*+", burning) == re.findall(r"\*+", pw)  # no run of markers split
        assert parse(burning).plain.replace("🔥", "") == parse(pw).plain
        assert parse(burning).unbolded_vowels == parse(pw).unbolded_vowels
