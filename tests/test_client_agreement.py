"""The HTTP client and the in-process environment give identical results.

Observations, rewards, done flags and infos must be equal (``==`` on the decoded JSON, floats
included), both through FastAPI's in-process TestClient and through a real uvicorn server started
as a subprocess.
"""

import json
import random

import pytest
from fastapi.testclient import TestClient

from tasks.password_game import (GameConfig, LocalPasswordGameEnv, check_password, make_instance,
                                 solve)
from tasks.password_game.client import (EpisodeOverError, PasswordGameEnv, find_free_port,
                                        start_server, stop_server)
from tasks.password_game.game import GameOver
from tasks.password_game.server import create_app

SEEDS = [0, 1, 7, 42, 2**63 - 1]
ALPHABET = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !?.#/*\\"
            "IVXLCDM" "🥚🐔🐛🔥🌑🌕🌗🏋️‍♂️\x00\t\ud800é")
REWARDS = [None, {"reward_per_rule": 0.5, "length_penalty": 0.1, "episode_bonus": 3.0,
                  "bonus_min_rules": 3, "mode": "delta"}]


@pytest.fixture(scope="module", params=["testclient", "subprocess"])
def make_remote(request):
    """A factory of HTTP envs: in-process (TestClient) or against a real server."""
    if request.param == "testclient":
        tc = TestClient(create_app())
        yield lambda **kw: PasswordGameEnv(client=tc, **kw)
        tc.close()
    else:
        port = find_free_port()
        proc = start_server("127.0.0.1", port, timeout=60)
        try:
            yield lambda **kw: PasswordGameEnv(f"http://127.0.0.1:{port}", **kw)
        finally:
            stop_server(proc)


def mutate(password: str, rng: random.Random) -> str:
    chars = list(password)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.3 and chars:
            del chars[rng.randrange(len(chars))]
        elif op < 0.6:
            chars.insert(rng.randint(0, len(chars)), rng.choice(ALPHABET))
        elif op < 0.8 and chars:
            chars[rng.randrange(len(chars))] = rng.choice(ALPHABET)
        else:
            chars.append(rng.choice(["🔥", "🐛", "**", "*", "🥚", "🐔"]))
    return "".join(chars)


def random_password(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))


def normalized(obj):
    """What JSON makes of an object (tuples become lists)."""
    return json.loads(json.dumps(obj))


def assert_same_step(local, remote, password):
    expected = local.submit(password)
    got = remote.submit(password)
    assert type(got[1]) is float and type(got[2]) is bool
    assert got == expected, password


@pytest.mark.parametrize("reward", REWARDS, ids=["absolute", "delta"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_play_agrees(make_remote, seed, reward):
    rng = random.Random(seed * 31 + (reward is None))
    inst = make_instance(seed)
    good = [solve(inst, hatched=False), solve(inst, hatched=True)]
    local = LocalPasswordGameEnv(GameConfig(max_steps=8, reward=dict(reward or {})))
    with make_remote(max_steps=8, reward=reward) as remote:
        assert remote.reset(seed) == local.reset(seed)
        done = False
        while not done:
            kind = rng.random()
            if kind < 0.3:
                password = random_password(rng)
            elif kind < 0.9:
                password = mutate(rng.choice(good), rng)
            else:
                password = rng.choice(good)
            assert remote.get_feedback(password) == local.get_feedback(password)
            expected = local.submit(password)
            got = remote.submit(password)
            assert got == expected, password
            assert type(got[1]) is float and type(got[2]) is bool
            done = got[2]
        assert remote.state() == normalized(local.state())
        with pytest.raises(GameOver):
            local.submit("x")
        with pytest.raises(EpisodeOverError):  # also a GameOver
            remote.submit("x")
        # Stateless checks agree too.
        probes = [mutate(good[1], rng) for _ in range(5)] + good
        for pw in probes[:3]:
            assert remote.check(pw, seed) == check_password(pw, seed)
            assert remote.check(pw, seed, n_revealed=9) == check_password(pw, seed, 9)
        batch = remote.check_batch(probes, seed=seed)
        assert [r["satisfied"] for r in batch] == [
            [row["satisfied"] for row in check_password(pw, seed)["rules"]] for pw in probes]
        assert remote.check_batch(probes, seeds=[seed] * len(probes), verbose=True) == [
            check_password(pw, seed) for pw in probes]


@pytest.mark.parametrize("seed", SEEDS + [3, 123456789])
def test_solver_episode_wins_identically(make_remote, seed):
    password = solve(make_instance(seed), hatched=False)
    local = LocalPasswordGameEnv()
    with make_remote() as remote:
        assert remote.solve(seed, hatched=False) == password
        assert remote.reset(seed) == local.reset(seed)
        first = remote.submit(password)
        assert first == local.submit(password)
        assert first[3]["on_fire"] and not first[2]  # the fire costs a turn
        second = remote.submit(password)
        assert second == local.submit(password)
        obs, reward, done, info = second
        assert done and info["success"] and obs["success"] and info["rules_satisfied"] == 26
        assert info["turn"] == 2
        assert remote.state() == normalized(local.state())


@pytest.mark.parametrize("num_rules", [1, 5, 20])
def test_short_games_agree(make_remote, num_rules):
    rng = random.Random(num_rules)
    inst = make_instance(11)
    good = solve(inst, hatched=False)
    local = LocalPasswordGameEnv(GameConfig(max_steps=6, num_rules=num_rules))
    with make_remote(max_steps=6, num_rules=num_rules) as remote:
        assert remote.reset(11) == local.reset(11)
        done = False
        while not done:
            password = good if rng.random() < 0.3 else mutate(good, rng)
            got = remote.submit(password)
            assert got == local.submit(password)
            done = got[2]
        assert got[0]["num_rules"] == num_rules


def test_reset_reuses_the_env(make_remote):
    """Several episodes through one client: each reset gives the same as a fresh local reset."""
    local = LocalPasswordGameEnv()
    with make_remote() as remote:
        for seed in (5, 6, 5):
            assert remote.reset(seed) == local.reset(seed)
            assert_same_step(local, remote, "Hello1!")
