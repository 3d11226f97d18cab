"""The OpenSpiel HTTP server and client: identical results to the local env (random play, junk
included), and the hardening (422 / 404 / 409 / 413, never 5xx).

Skipped where ``open_spiel`` is not installed.
"""

import json
import random

import pytest

pytest.importorskip("pyspiel")

from fastapi.testclient import TestClient  # noqa: E402

from tasks.openspiel import GAMES  # noqa: E402
from tasks.openspiel.client import (EpisodeOverError, InvalidRequestError,  # noqa: E402
                                    OpenSpielEnv, SessionNotFoundError, find_free_port,
                                    start_server, stop_server)
from tasks.openspiel.env import LocalOpenSpielEnv  # noqa: E402
from tasks.openspiel.game import GameOver  # noqa: E402
from tasks.openspiel.server import ServerSettings, create_app  # noqa: E402

JUNK = ["", "nope", "99", "\ud800", "move: ???", "x" * 300]


@pytest.fixture(scope="module")
def tc():
    with TestClient(create_app(ServerSettings(max_mcts_simulations=500))) as client:
        yield client


def run_episode(env, seed, rng):
    """Random answers (legal names and junk); every result of the episode, in order."""
    out = [env.reset(seed)]
    done = False
    while not done:
        obs = out[-1] if len(out) == 1 else out[-1][0]
        answer = rng.choice(obs["legal_moves"] + JUNK[:2]) if rng.random() < 0.9 \
            else rng.choice(JUNK)
        out.append(("feedback", env.get_feedback(answer)))
        result = env.submit(answer)
        out.append(result)
        done = result[2]
    out.append(("state", env.state()))
    return out


CONFIGS = [
    ("tic_tac_toe", {"opponent": "mcts", "mcts_simulations": 30, "model_seat": "random"}),
    ("leduc_poker", {"opponent": "mcts", "mcts_simulations": 20, "model_seat": 1,
                     "reward": {"illegal_move_penalty": 0.1, "scale": 0.5}}),
    ("liars_dice", {"illegal_move_policy": "random"}),
    ("kuhn_poker", {"illegal_move_policy": "loss", "model_seat": "random"}),
    ("hex", {"max_illegal_retries": 0}),
    ("breakthrough", {}),
]


@pytest.mark.parametrize("game, cfg", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_client_agrees_with_local_env(tc, game, cfg):
    for seed in (0, 2**63 - 1):
        local = run_episode(LocalOpenSpielEnv(game, **cfg), seed, random.Random(seed))
        with OpenSpielEnv(client=tc, game=game, **cfg) as remote_env:
            remote = run_episode(remote_env, seed, random.Random(seed))
        assert json.loads(json.dumps(local)) == json.loads(json.dumps(remote))
        assert local == [tuple(r) if isinstance(r, tuple) else r for r in remote]


def test_real_server_subprocess():
    port = find_free_port()
    proc = start_server("127.0.0.1", port, timeout=60)
    try:
        with OpenSpielEnv(f"http://127.0.0.1:{port}", game="connect_four",
                          model_seat="random") as env:
            assert {g["name"] for g in env.games()} == set(GAMES)
            assert env.health()["status"] == "ok"
            remote = run_episode(env, 11, random.Random(1))
        local = run_episode(LocalOpenSpielEnv("connect_four", model_seat="random"), 11,
                            random.Random(1))
        assert local == remote
    finally:
        stop_server(proc)


def test_games_and_health(tc):
    body = tc.get("/games").json()
    assert [g["name"] for g in body["games"]] == list(GAMES)
    assert tc.get("/health").json()["limits"]["max_mcts_simulations"] == 500


def test_defaults_without_body(tc):
    r = tc.post("/sessions")
    assert r.status_code == 200
    obs = r.json()["observation"]
    assert obs["game"] == "tic_tac_toe" and obs["player"] == 0 and len(obs["legal_moves"]) == 9


@pytest.mark.parametrize("body, where", [
    ({"game": "chess9"}, "supported games: tic_tac_toe"),
    ({"game": 3}, "game"),
    ({"model_seat": 2}, "model_seat"),
    ({"model_seat": True}, "model_seat"),
    ({"model_seat": "0"}, "model_seat"),
    ({"opponent": "alphazero"}, "opponent"),
    ({"mcts_simulations": 501}, "mcts_simulations"),
    ({"mcts_simulations": 0}, "mcts_simulations"),
    ({"illegal_move_policy": "ignore"}, "illegal_move_policy"),
    ({"seed": -1}, "seed"),
    ({"seed": "7"}, "seed"),
    ({"reward": {"illegal_move_penalty": "big"}}, "reward"),
    ({"colour": "red"}, "colour"),
])
def test_bad_sessions_are_422(tc, body, where):
    r = tc.post("/sessions", json=body)
    assert r.status_code == 422
    assert where in json.dumps(r.json())


def test_session_errors(tc):
    sid = tc.post("/sessions", json={"game": "kuhn_poker", "seed": 1,
                                     "illegal_move_policy": "loss"}).json()["session_id"]
    assert tc.post(f"/sessions/{sid}/submit", json={"move": 3}).status_code == 422
    assert tc.post(f"/sessions/{sid}/submit", json={"move": "x" * 4097}).status_code == 422
    assert tc.post(f"/sessions/{sid}/submit", json={}).status_code == 422
    r = tc.post(f"/sessions/{sid}/submit", content=json.dumps({"move": "\ud800 hmm?"}),
                headers={"content-type": "application/json"})  # a lone surrogate, escaped
    assert r.status_code == 200 and r.json()["info"]["forfeit"] and r.json()["done"]
    r = tc.post(f"/sessions/{sid}/submit", json={"move": "Bet"})
    assert r.status_code == 409
    assert tc.get(f"/sessions/{sid}").status_code == 200
    assert tc.delete(f"/sessions/{sid}").json() == {"ended": True}
    for method, path in [("get", f"/sessions/{sid}"), ("delete", f"/sessions/{sid}")]:
        r = getattr(tc, method)(path)
        assert r.status_code == 404 and "deleted" in r.json()["detail"]
    r = tc.post("/sessions/nope/feedback", json={"move": "x"})
    assert r.status_code == 404
    big = b'{"move": "' + b"a" * (2 << 20) + b'"}'
    r = tc.post("/sessions/nope/submit", content=big,
                headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_client_errors(tc):
    env = OpenSpielEnv(client=tc, game="chess9")
    with pytest.raises(InvalidRequestError, match="supported games"):
        env.reset(0)
    env = OpenSpielEnv(client=tc, game="tic_tac_toe", illegal_move_policy="loss")
    env.reset(0)
    env.submit("resign")
    with pytest.raises(EpisodeOverError) as e:
        env.submit("x(1,1)")
    assert isinstance(e.value, GameOver)
    with pytest.raises(TypeError):
        env.submit(None)
    sid = env.session_id
    tc.delete(f"/sessions/{sid}")
    with pytest.raises(SessionNotFoundError):
        env.state()
    with pytest.raises(TypeError):
        OpenSpielEnv(client=tc, colour="red")
