"""The OpenSpiel task: registry, move parsing, episodes through the text interface, illegal-move
policies, rewards, determinism, bots, the local env and the CLI.

Skipped where ``open_spiel`` is not installed (the ``openspiel`` extra).
"""

import json
import random
import re

import pytest

pyspiel = pytest.importorskip("pyspiel")

from tasks.openspiel import GAMES, HARDER_GAMES, SIMPLE_GAMES, get_spec, parse_move  # noqa: E402
from tasks.openspiel.__main__ import main as cli_main  # noqa: E402
from tasks.openspiel.bots import determinize, mcts_bot, random_bot  # noqa: E402
from tasks.openspiel.env import LocalOpenSpielEnv  # noqa: E402
from tasks.openspiel.game import GameOver, OpenSpielGame  # noqa: E402
from tasks.openspiel.match import play_match  # noqa: E402

JUNK = ["", "   ", "hello", "I resign", "x(9,9)", "999", "-1", "\x00", "\ud800", "🙂" * 5,
        "move:", "((((", "Liar Liar", "a" * 500, "1-1-1", "\n\n\n"]


def legal_from_text(text: str) -> list[str]:
    """The legal moves as the model reads them: from the observation's text, not its fields."""
    line = next(l for l in text.splitlines() if l.startswith("Legal moves: "))
    return line[len("Legal moves: "):].split(", ")


def play(game: OpenSpielGame, agent, seed: int, limit: int = 500):
    obs = game.reset(seed)
    steps = []
    done = False
    while not done:
        answer = agent(obs)
        obs, reward, done, info = game.step(answer)
        steps.append((answer, reward, done, info, obs))
        assert len(steps) < limit, "the episode does not end"
    return steps


# ============================================================================ registry
def test_registry_tags_and_games_load():
    assert set(SIMPLE_GAMES) == {"tic_tac_toe", "kuhn_poker"}
    assert {"connect_four", "leduc_poker", "liars_dice", "hex"} <= set(HARDER_GAMES)
    for name, spec in GAMES.items():
        game = pyspiel.load_game(spec.openspiel_name, dict(spec.params))
        assert game.num_players() == 2
        assert game.get_type().utility == pyspiel.GameType.Utility.ZERO_SUM
        assert spec.reward_scale == pytest.approx(1.0 / game.max_utility())
        json.dumps(spec.summary())


def test_unknown_game_and_bad_config():
    with pytest.raises(ValueError, match="supported games: tic_tac_toe"):
        OpenSpielGame("chess9")
    for kw in [{"model_seat": 2}, {"model_seat": True}, {"opponent": "alphazero"},
               {"mcts_simulations": 0}, {"illegal_move_policy": "ignore"},
               {"max_illegal_retries": -1}, {"reward": {"illegal_move_penalty": float("nan")}}]:
        with pytest.raises(ValueError):
            OpenSpielGame("tic_tac_toe", **kw)
    with pytest.raises(TypeError):
        OpenSpielGame("tic_tac_toe", reward={"no_such_field": 1})


# ============================================================================ parsing
TTT = [(a, f"x({a // 3},{a % 3})") for a in (0, 1, 2, 4, 6, 8)]


@pytest.mark.parametrize("answer, move, how", [
    ("x(1,1)", "x(1,1)", "name"),
    ("  X(1,1)  ", "x(1,1)", "name"),
    ('"x(1,1)"', "x(1,1)", "name"),
    ("`x(1,1)`.", "x(1,1)", "name"),
    ("**x(1,1)**", "x(1,1)", "name"),
    ("Move: x(1,1)", "x(1,1)", "name"),
    ("my move is x(1,1)!", "x(1,1)", "name"),
    ("action = x(1,1)", "x(1,1)", "name"),
    ("x (1, 1)", "x(1,1)", "key"),
    ("[x(1,1)]", "x(1,1)", "key"),
    ("(1,1)", "x(1,1)", "without_mark"),
    ("1,1", "x(1,1)", "without_mark"),
    ("move: 1 1", "x(1,1)", "without_mark"),
    ("(2, 2)", "x(2,2)", "without_mark"),
    ("4", "x(1,1)", "action_id"),
    ("I think the centre is best.\nx(1,1)", "x(1,1)", "name"),
])
def test_parse_tic_tac_toe(answer, move, how):
    p = parse_move(answer, TTT, marks=("x", "o"))
    assert (p.move, p.matched_by) == (move, how)
    assert p.action == dict((n, a) for a, n in TTT)[move]


@pytest.mark.parametrize("answer, why", [
    ("x(1,0)", "x(1,0) is not a legal move"),  # occupied
    ("3", "action id 3 (x(1,0)) is not legal"),
    ("o(1,1)", "opponent's mark"),
    ("", "empty"),
    ("centre please", "could not read"),
    ("x(1,1) or x(2,2)", "could not read"),
])
def test_parse_tic_tac_toe_illegal(answer, why):
    every = [(a, f"x({a // 3},{a % 3})") for a in range(9)]
    p = parse_move(answer, TTT, marks=("x", "o"), all_moves=lambda: every)
    assert not p.legal and p.action is None and why in p.reason


def test_parse_other_games():
    liars = [(a, f"{a // 6 + 1}-{a % 6 + 1}") for a in range(7, 12)] + [(12, "Liar")]
    assert parse_move("2-3", liars).action == 8
    assert parse_move("2 - 3", liars).action == 8
    assert parse_move("liar", liars).move == "Liar"
    assert parse_move("Move: LIAR.", liars).move == "Liar"
    assert parse_move("11", liars).move == "2-6"  # a bare number is an action id
    assert not parse_move("1-1", liars).legal
    poker = [(0, "Fold"), (1, "Call"), (2, "Raise")]
    assert parse_move("raise", poker).action == 2
    assert parse_move("'Call'", poker).action == 1
    assert parse_move("I will fold", poker).reason.startswith("could not read")
    assert parse_move("check", poker, aliases={"check": "Call"}).move == "Call"
    assert parse_move("Check.", poker, aliases={"check": "Call"}).matched_by == "synonym"
    assert parse_move("call", liars, aliases={"call": "Liar"}).move == "Liar"
    opening = [(a, f"1-{a + 1}") for a in range(6)]
    why = parse_move("challenge", opening, aliases={"challenge": "Liar"},
                     all_moves=lambda: opening + [(12, "Liar")]).reason
    assert why == "Liar is not a legal move in this position"
    bt = [(197, "e4f3*"), (194, "e4e3")]
    assert parse_move("e4f3", bt).action == 197
    assert parse_move("e4-f3", bt).action == 197
    assert parse_move("e4f3*", bt).matched_by == "name"
    assert parse_move("E4F3*", bt).matched_by == "name"
    c4 = [(a, f"o{a}") for a in range(7)]
    assert parse_move("3", c4, marks=("x", "o")).move == "o3"
    assert parse_move("O3", c4, marks=("x", "o")).move == "o3"
    assert not parse_move("x3", c4, marks=("x", "o")).legal
    for junk in JUNK + [None, 3, b"x"]:
        assert not parse_move(junk, TTT, marks=("x", "o")).legal  # never raises


def test_poker_synonyms_in_games():
    game = OpenSpielGame("kuhn_poker", model_seat=0)
    game.reset(0)
    assert game.feedback("check")["move"] == "Pass"
    assert game.feedback("call")["move"] == "Bet"
    game = OpenSpielGame("leduc_poker", model_seat=0)
    game.reset(0)
    assert game.feedback("Check")["move"] == "Call"
    assert game.feedback("fold")["reason"] == "Fold is not a legal move in this position"


def test_feedback_changes_nothing():
    env = LocalOpenSpielEnv("tic_tac_toe", opponent="random")
    obs = env.reset(1)
    before = env.state()
    fb = env.get_feedback("(1,1)")
    assert fb == {"legal": True, "move": "x(1,1)", "action": 4, "matched_by": "without_mark",
                  "reason": None}
    bad = env.get_feedback("banana")
    assert bad["legal"] is False and bad["reason"]
    assert env.state() == before and obs == env.game.observation()


# ============================================================================ episodes
STYLES = [lambda m: m, str.upper, lambda m: f"Move: {m}", lambda m: f'"{m}".',
          lambda m: f"Let me think.\n{m}"]


@pytest.mark.parametrize("name", list(GAMES))
def test_every_game_plays_to_the_end_with_legal_names(name):
    rng = random.Random(name)
    game = OpenSpielGame(name, model_seat="random")
    for seed in range(2):
        steps = play(game, lambda o: rng.choice(STYLES)(rng.choice(legal_from_text(o["text"]))),
                     seed)
        answer, reward, done, info, obs = steps[-1]
        assert done and obs["done"] and obs["legal_moves"] == [] and obs["legal_actions"] == []
        assert not any(s[3]["illegal_move"] for s in steps)
        assert info["outcome"] in ("win", "draw", "loss") and obs["outcome"] == info["outcome"]
        assert obs["returns"] == info["returns"] and len(obs["returns"]) == 2
        mine = obs["returns"][obs["player"]]
        assert reward == pytest.approx(mine * get_spec(name).reward_scale)
        assert all(s[1] == 0.0 for s in steps[:-1])
        assert "Game over" in obs["text"]
        assert json.loads(json.dumps(obs)) == obs and json.loads(json.dumps(info)) == info
        with pytest.raises(GameOver):
            game.step(answer)


@pytest.mark.parametrize("name", list(GAMES))
def test_every_game_ends_with_junk_answers(name):
    rng = random.Random(name)
    game = OpenSpielGame(name, illegal_move_policy="retry", max_illegal_retries=1,
                         reward={"illegal_move_penalty": 0.1})
    steps = play(game, lambda o: rng.choice(JUNK), 3)
    assert steps[-1][2]
    assert all(s[3]["illegal_move"] for s in steps)
    # every second junk answer (after one retry) gets a random move played for the model
    assert [s[3]["forced_random"] for s in steps] == [i % 2 == 1 for i in range(len(steps))]
    for answer, reward, done, info, obs in steps[:-1]:
        assert reward == pytest.approx(-0.1)
        assert "was not accepted" in obs["text"]
        assert obs["last_illegal"]["reason"] == info["reason"]


def test_policy_retry():
    game = OpenSpielGame("tic_tac_toe", max_illegal_retries=2,
                         reward={"illegal_move_penalty": 0.25})
    obs = game.reset(0)
    board = obs["board"]
    for left in (1, 0):
        obs, reward, done, info = game.step("nonsense")
        assert info["illegal_move"] and info["retries_left"] == left and not done
        assert info["move"] is None and reward == -0.25
        assert obs["board"] == board and obs["turn"] == 2 - left
        assert f"Try again ({left} more" in obs["text"]
    obs, reward, done, info = game.step("nonsense")
    assert info["forced_random"] and info["move"] in [
        f"x({a // 3},{a % 3})" for a in range(9)]
    assert obs["retries_left"] == 2 and obs["board"] != board
    assert f"A random legal move was played for you: {info['move']}" in obs["text"]
    obs, reward, done, info = game.step(obs["legal_moves"][0])
    assert not info["illegal_move"] and info["retries_left"] == 2


def test_policy_random_and_loss():
    game = OpenSpielGame("connect_four", illegal_move_policy="random")
    game.reset(5)
    obs, reward, done, info = game.step("x9")
    assert info["illegal_move"] and info["forced_random"] and info["move"].startswith("x")
    assert len(obs["history"]) == 2 and obs["history"][0]["move"] == info["move"]
    for name, worst in [("tic_tac_toe", -1.0), ("kuhn_poker", -2.0), ("leduc_poker", -13.0)]:
        game = OpenSpielGame(name, illegal_move_policy="loss", model_seat=1,
                             reward={"illegal_move_penalty": 0.5})
        game.reset(2)
        obs, reward, done, info = game.step("pass the salt")
        assert done and info["forfeit"] and info["outcome"] == "loss"
        assert obs["returns"][1] == worst and obs["returns"][0] == -worst
        assert reward == pytest.approx(-1.0 - 0.5)
        assert "forfeit" in obs["text"]


def test_shaping_and_scale():
    game = OpenSpielGame("tic_tac_toe", reward={"legal_move_bonus": 0.01, "scale": 10.0})
    obs = game.reset(4)
    total = 0.0
    done = False
    while not done:
        obs, reward, done, info = game.step(obs["legal_moves"][0])
        total += reward
    turns = obs["turn"]
    assert total == pytest.approx(0.01 * turns + 10.0 * obs["returns"][0])


# ============================================================================ determinism
@pytest.mark.parametrize("name, opponent", [("tic_tac_toe", "mcts"), ("leduc_poker", "mcts"),
                                            ("liars_dice", "random"), ("hex", "random")])
def test_same_seed_same_episode(name, opponent):
    def episode(seed):
        rng = random.Random(99)  # the same answers, junk included
        game = OpenSpielGame(name, opponent=opponent, model_seat="random", mcts_simulations=50,
                             illegal_move_policy="retry", max_illegal_retries=1)
        return [(s[1], s[3], s[4]) for s in play(
            game, lambda o: rng.choice(o["legal_moves"] + ["junk"]), seed)]

    assert episode(12345) == episode(12345)
    assert episode(2**63 - 1) == episode(2**63 - 1)
    episodes = {json.dumps(episode(s)) for s in range(6)}
    assert len(episodes) > 1


def test_random_seat_uses_both_seats():
    game = OpenSpielGame("kuhn_poker", model_seat="random")
    assert {game.reset(s)["player"] for s in range(12)} == {0, 1}


def test_opponent_moves_first_when_model_is_second():
    game = OpenSpielGame("tic_tac_toe", model_seat=1)
    obs = game.reset(0)
    assert len(obs["history"]) == 1 and obs["history"][0]["by"] == "opponent"
    assert all(m.startswith("o(") for m in obs["legal_moves"])
    assert "The opponent played x(" in obs["text"]


# ============================================================================ hidden information
def test_hidden_information_is_not_shown():
    game = OpenSpielGame("liars_dice", model_seat=0)
    for seed in range(5):
        obs = game.reset(seed)
        mine, theirs = game.state.history()[0], game.state.history()[1]
        assert f"Your die: {mine + 1}" in obs["text"]
        assert obs["history"] == []  # the rolls are not moves
    game = OpenSpielGame("leduc_poker", model_seat=0)
    obs = game.reset(0)
    while not obs["done"]:
        obs, *_ = game.step("Call")
    chance = [h for h in obs["history"] if h["by"] == "chance"]
    assert len(chance) <= 1 and all(h["move"].startswith("public card") for h in chance)
    world_rng = __import__("numpy").random.RandomState(0)
    game = OpenSpielGame("leduc_poker", model_seat=1)
    game.reset(1)
    state = game.state
    for _ in range(20):
        world = determinize(state, 1, world_rng)
        assert world.information_state_string(1) == state.information_state_string(1)
        assert world.legal_actions() == state.legal_actions()


# ============================================================================ bots and matches
def test_mcts_beats_random_at_tic_tac_toe():
    result = play_match("tic_tac_toe", "mcts", "random", n=20, seed=0, mcts_simulations=200)
    assert result["games"] == 20 and result["illegal_answers"] == 0
    assert result["win"] >= 12 and result["loss"] <= 2, result


def test_bots_are_seeded():
    game = pyspiel.load_game("tic_tac_toe")
    state = game.new_initial_state()
    assert [random_bot(3).step(state) for _ in range(3)] == [random_bot(3).step(state)] * 3
    a, b = mcts_bot("tic_tac_toe", 30, seed=1), mcts_bot(game, 30, seed=1)
    for _ in range(4):
        move = a.step(state)
        assert b.step(state) == move
        state.apply_action(move)


def test_play_match_with_text_agents():
    def scripted(obs):
        return "Move: " + legal_from_text(obs["text"])[-1]

    result = play_match("kuhn_poker", scripted, "random", n=6, seed=1)
    assert result["win"] + result["draw"] + result["loss"] == 6
    assert result["illegal_answers"] == 0
    junk = play_match("tic_tac_toe", lambda obs: "???", random_bot(0), n=2, seed=1)
    assert junk["illegal_answers"] > 0 and junk["games"] == 2


# ============================================================================ env and CLI
def test_local_env_api():
    with LocalOpenSpielEnv("hex", opponent="random") as env:
        obs = env.reset(seed=8)
        assert obs["game"] == "hex" and obs["seed"] == 8 and obs["player"] == 0
        assert obs["legal_actions"] == list(range(25)) and obs["legal_moves"][12] == "c3"
        obs, reward, done, info = env.submit("c3")
        assert info["move"] == "c3" and info["action"] == 12 and not done
        obs, reward, done, info = env.step("12")
        assert info["illegal_move"] and "action id 12 (c3) is not legal" in info["reason"]
        state = env.state()
        assert state["config"]["game"] == "hex" and state["actions"][0] == 12
        assert "state_string" in state
        assert isinstance(env.reset()["seed"], int)


def test_cli(capsys, monkeypatch):
    assert cli_main(["games"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in GAMES)
    assert cli_main(["games", "--json"]) == 0
    assert {g["name"] for g in json.loads(capsys.readouterr().out)} == set(GAMES)
    answers = iter(["x(1,1)", "banana", ":quit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    assert cli_main(["play", "--game", "tic_tac_toe", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "Legal moves:" in out and "was not accepted" in out
    assert re.search(r"1\. x\(1,1\) \(you\)", out)
