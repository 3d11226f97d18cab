"""The Wordle server (on the shared tasks.common scaffolding) and its client: endpoints, bad inputs
(4xx, never a 5xx), session limits, and agreement with the local environment on random play,
in-process and through a real server subprocess."""

import json
import random
import threading

import pytest
from fastapi.testclient import TestClient

from tasks.wordle import LocalWordleEnv, WordleConfig, WordleEnv, answers, feedback, valid_words
from tasks.wordle.client import (EpisodeOverError, InvalidRequestError, SessionNotFoundError,
                                 WordleError, find_free_port, start_server, stop_server)
from tasks.wordle.game import GameOver, make_instance
from tasks.wordle.server import (FeedbackResponse, GuessCheck, SessionResponse, SessionState,
                                 SolveResponse, SubmitResponse, WordleServerSettings, create_app)
from tasks.wordle.solver import default_solver
from server_checks import CheckedClient  # tests/ is on sys.path (pytest rootdir-less import)

SEED = 3


def make_client(**settings) -> CheckedClient:
    return CheckedClient(create_app(WordleServerSettings(**settings)))


@pytest.fixture()
def tc() -> CheckedClient:
    return make_client()


def new_session(tc, **body) -> str:
    r = tc.post("/sessions", json={"seed": SEED, **body})
    assert r.status_code == 200, r.text
    return r.json()["session_id"]


# ============================================================================ happy paths
def test_health_and_schema(tc):
    body = tc.get("/health").json()
    assert body["status"] == "ok" and body["sessions"] == 0
    assert {"max_sessions": 1024, "session_ttl": 3600.0, "max_guess_chars": 64,
            "max_body_bytes": 65536}.items() <= body["limits"].items()
    paths = set(tc.get("/openapi.json").json()["paths"])
    assert {"/health", "/sessions", "/sessions/{session_id}", "/sessions/{session_id}/submit",
            "/sessions/{session_id}/feedback", "/feedback", "/solve"} <= paths


def test_session_lifecycle_matches_local_env(tc):
    reward = {"win_reward": 2.0, "turn_decay": 0.2, "green_reward": 0.3, "present_reward": 0.1,
              "invalid_penalty": 0.5, "repeat_penalty": 0.25, "loss_penalty": 1.0,
              "latest_green_reward": 0.2, "fit_reward": 0.3}
    r = tc.post("/sessions", json={"seed": SEED, "max_guesses": 4, "reward": reward})
    assert r.status_code == 200
    sid = SessionResponse.model_validate(r.json()).session_id
    local = LocalWordleEnv(WordleConfig(max_guesses=4, reward=reward))
    assert r.json()["observation"] == local.reset(SEED)
    fb = tc.post(f"/sessions/{sid}/feedback", json={"guess": " Soare"})
    GuessCheck.model_validate(fb.json())
    assert fb.json() == local.get_feedback(" Soare")
    for guess in ["soare", "xyzzy", "SOARE", "crane"]:
        r = tc.post(f"/sessions/{sid}/submit", json={"guess": guess})
        assert r.status_code == 200
        SubmitResponse.model_validate(r.json())
        obs, reward_, done, info = local.submit(guess)
        assert r.json() == {"observation": obs, "reward": reward_, "done": done, "info": info}
    assert done and r.json()["info"]["answer"] == make_instance(SEED).answer
    state = tc.get(f"/sessions/{sid}").json()
    SessionState.model_validate(state)
    assert state == local.state()
    r = tc.post(f"/sessions/{sid}/submit", json={"guess": "crane"})
    assert r.status_code == 409 and "ended" in r.json()["detail"]
    assert tc.delete(f"/sessions/{sid}").json() == {"ended": True}
    r = tc.get(f"/sessions/{sid}")
    assert r.status_code == 404 and "deleted" in r.json()["detail"]
    assert tc.get("/health").json()["sessions"] == 0


def test_create_session_defaults_and_answer(tc):
    for kwargs in ({}, {"json": {}}, {"json": None}):
        r = tc.post("/sessions", **kwargs)
        assert r.status_code == 200, r.text
        obs = r.json()["observation"]
        assert 0 <= obs["seed"] <= 2**63 - 1 and obs["max_guesses"] == 6 and not obs["hard_mode"]
    r = tc.post("/sessions", json={"answer": " Abbey ", "hard_mode": True})
    sid = r.json()["session_id"]
    assert r.json()["observation"]["seed"] is None
    assert tc.get(f"/sessions/{sid}").json()["answer"] == "abbey"
    r = tc.post(f"/sessions/{sid}/submit", json={"guess": "abbey"}).json()
    assert r["done"] and r["info"]["success"]


def test_stateless_feedback_and_solve(tc):
    for answer, guess in [("abbey", "babes"), ("crane", "eerie"), ("speed", "erase"),
                          ("allow", "lolly"), ("CRANE", " slate ")]:
        r = tc.post("/feedback", json={"answer": answer, "guess": guess})
        assert r.status_code == 200
        FeedbackResponse.model_validate(r.json())
        assert r.json()["marks"] == feedback(answer, guess)
    assert tc.post("/feedback", json={"answer": "abbey", "guess": "babes"}).json() == {
        "answer": "abbey", "guess": "babes", "marks": ["yellow", "yellow", "green", "green", "grey"],
        "pattern": "🟨🟨🟩🟩⬜", "code": 1 + 3 + 2 * 9 + 2 * 27}
    r = tc.post("/solve", json={"seed": SEED})
    SolveResponse.model_validate(r.json())
    answer = make_instance(SEED).answer
    assert r.json()["guesses"] == default_solver().solve(answer)
    assert r.json()["answer"] == answer and r.json()["seed"] == SEED
    r = tc.post("/solve", json={"answer": "Crane"}).json()
    assert r["guesses"][-1] == "crane" and r["seed"] is None and r["num_guesses"] == len(r["guesses"])


def test_invalid_words_are_wasted_turns_not_errors(tc):
    sid = new_session(tc)
    for guess in ["", "   ", "xyzzy", "cr4ne", "\x00\x00\x00\x00\x00", "\ud800abcd", "é" * 5,
                  "x" * 64]:
        r = tc.post(f"/sessions/{sid}/submit", content=json.dumps({"guess": guess}).encode(),
                    headers={"content-type": "application/json"})
        if r.json()["done"]:
            break
        assert r.status_code == 200 and r.json()["info"]["valid"] is False
        assert r.json()["info"]["message"] and r.json()["reward"] == -0.1


# ============================================================================ bad inputs
BAD = [
    ("/sessions", {"seed": -1}, "negative seed"),
    ("/sessions", {"seed": 2**63}, "seed 2**63"),
    ("/sessions", {"seed": "3"}, "string seed"),
    ("/sessions", {"seed": 3.0}, "float seed"),
    ("/sessions", {"seed": True}, "bool seed"),
    ("/sessions", {"seed": 1, "answer": "crane"}, "seed and answer"),
    ("/sessions", {"answer": "xyzzy"}, "answer not a word"),
    ("/sessions", {"answer": "aahed"}, "answer not an answer"),
    ("/sessions", {"answer": 5}, "int answer"),
    ("/sessions", {"max_guesses": 0}, "max_guesses 0"),
    ("/sessions", {"max_guesses": 101}, "max_guesses 101"),
    ("/sessions", {"max_guesses": "6"}, "string max_guesses"),
    ("/sessions", {"hard_mode": "yes"}, "string hard_mode"),
    ("/sessions", {"hard_mode": 1}, "int hard_mode"),
    ("/sessions", {"reward": {"win_reward": -1}}, "negative weight"),
    ("/sessions", {"reward": {"win_reward": 1e300}}, "huge weight"),
    ("/sessions", {"reward": {"win_reward": "1"}}, "string weight"),
    ("/sessions", {"reward": {"typo": 1}}, "unknown reward field"),
    ("/sessions", {"reward": {"latest_green_reward": -0.1}}, "negative latest_green_reward"),
    ("/sessions", {"reward": {"fit_reward": -0.1}}, "negative fit_reward"),
    ("/sessions", {"reward": 5}, "reward not an object"),
    ("/sessions", {"extra": 1}, "unknown field"),
    ("/sessions", [], "array body"),
    ("/feedback", {"answer": "crane"}, "missing guess"),
    ("/feedback", {"guess": "crane"}, "missing answer"),
    ("/feedback", {"answer": "crane", "guess": "xyzzy"}, "guess not a word"),
    ("/feedback", {"answer": "crane", "guess": "cran"}, "short guess"),
    ("/feedback", {"answer": "cr4ne", "guess": "crane"}, "answer not letters"),
    ("/feedback", {"answer": "crane", "guess": 5}, "int guess"),
    ("/feedback", {"answer": "crane", "guess": None}, "null guess"),
    ("/feedback", {"answer": "crane", "guess": "x" * 65}, "guess too long"),
    ("/feedback", {"answer": "crane", "guess": "crane", "x": 1}, "extra field"),
    ("/solve", {}, "neither seed nor answer"),
    ("/solve", {"seed": 1, "answer": "crane"}, "both"),
    ("/solve", {"seed": "1"}, "string seed"),
    ("/solve", {"answer": "xyzzy"}, "answer not an answer"),
    ("/solve", {"answer": ["crane"]}, "list answer"),
]


@pytest.mark.parametrize("path,body,what", BAD, ids=[f"{p}:{w}" for p, _, w in BAD])
def test_bad_json_is_422_with_message(tc, path, body, what):
    r = tc.post(path, json=body)
    assert r.status_code == 422, (what, r.status_code, r.text)
    detail = r.json()["detail"]
    assert detail, what
    if isinstance(detail, list):
        assert all(err["msg"] and "loc" in err and "input" not in err for err in detail)


@pytest.mark.parametrize("body", [{}, {"guess": 1}, {"word": "crane"}, {"guess": "x" * 65},
                                  {"guess": "crane", "x": 1}, {"guess": ["crane"]}])
def test_bad_session_bodies_are_422_and_use_no_turn(tc, body):
    sid = new_session(tc)
    for action in ("submit", "feedback"):
        assert tc.post(f"/sessions/{sid}/{action}", json=body).status_code == 422
    assert tc.get(f"/sessions/{sid}").json()["turn"] == 0


RAW = [
    (b'{"guess": "\xff\xfe"}', (400, 422), "invalid UTF-8"),
    (b"hello", (422,), "not JSON"),
    (b'{"guess": ', (422,), "truncated JSON"),
    (b"", (422,), "empty body"),
    (b'{"guess": NaN}', (422,), "NaN"),
    (b"[" * 30_000 + b"]" * 30_000, (400, 422), "deep nesting"),
    (b'{"guess": "crane", "guess": 5}', (422,), "duplicate key"),
]


@pytest.mark.parametrize("content,codes,what", RAW, ids=[w for *_, w in RAW])
def test_raw_bad_bodies_are_4xx(tc, content, codes, what):
    sid = new_session(tc)
    for path in (f"/sessions/{sid}/submit", "/feedback", "/solve"):
        r = tc.post(path, content=content, headers={"content-type": "application/json"})
        assert r.status_code in codes, (what, path, r.status_code, r.text[:200])
        assert r.json()["detail"]
    assert tc.get(f"/sessions/{sid}").json()["turn"] == 0


def test_long_guess_is_422_and_not_echoed(tc):
    sid = new_session(tc)
    big = "crane" * 10_000
    for path, body in [(f"/sessions/{sid}/submit", {"guess": big}),
                       ("/feedback", {"answer": "crane", "guess": big})]:
        r = tc.post(path, json=body)
        assert r.status_code == 422 and "too long" in r.text and len(r.content) < 1000


def test_body_over_limit_is_413():
    tc = make_client(max_body_bytes=4096)
    sid = new_session(tc)
    huge = json.dumps({"guess": "x" * 10_000}).encode()
    for path in (f"/sessions/{sid}/submit", "/feedback", "/sessions", "/solve"):
        r = tc.post(path, content=huge, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "too large" in r.json()["detail"]
    r = tc.post("/feedback", content=(b"x" * 1024 for _ in range(10)),
                headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_unknown_sessions_are_404(tc):
    for sid in ("nope", "x" * 300, "%00"):
        assert tc.get(f"/sessions/{sid}").status_code == 404
        r = tc.post(f"/sessions/{sid}/submit", json={"guess": "crane"})
        assert r.status_code == 404 and "not found" in r.json()["detail"]
        assert tc.delete(f"/sessions/{sid}").status_code == 404


def test_settings_are_validated():
    for bad in ({"max_sessions": 0}, {"session_ttl": 0}, {"max_guess_chars": 4},
                {"max_body_bytes": 10}):
        with pytest.raises(ValueError):
            WordleServerSettings(**bad)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sessions_are_evicted_and_expire():
    clock = FakeClock()
    tc = make_client(max_sessions=2, session_ttl=60, evict_idle_after=1, clock=clock)
    a, b = new_session(tc), new_session(tc)
    assert tc.post("/sessions", json={"seed": SEED}).status_code == 429  # both in use just now
    clock.now += 1
    c = new_session(tc)  # evicts a (the oldest, idle for evict_idle_after)
    r = tc.get(f"/sessions/{a}")
    assert r.status_code == 404 and "evicted" in r.json()["detail"]
    assert tc.get("/health").json()["sessions"] == 2
    clock.now += 61
    r = tc.post(f"/sessions/{b}/submit", json={"guess": "crane"})
    assert r.status_code == 404 and "expired" in r.json()["detail"]
    assert tc.get(f"/sessions/{c}").status_code == 404
    assert tc.get("/health").json()["sessions"] == 0


def test_concurrent_submits_to_one_session_never_interleave():
    """Ten threads submit to one session until it has ended: each submit is played (200) or
    refused at once (409: busy, with Retry-After, or the episode has ended); exactly 20 turns."""
    app = create_app()
    with CheckedClient(app) as tc:
        sid = new_session(tc, max_guesses=20)
    codes: list[str] = []
    lock = threading.Lock()

    def hammer() -> None:
        with CheckedClient(app) as tc:
            for _ in range(500):
                r = tc.post(f"/sessions/{sid}/submit", json={"guess": "zzzzz"})
                kind = "busy" if r.status_code == 409 and "retry-after" in r.headers \
                    else str(r.status_code)
                with lock:
                    codes.append(kind)
                if kind == "409":
                    return

    threads = [threading.Thread(target=hammer) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(codes) <= {"200", "409", "busy"}
    assert codes.count("200") == 20 and codes.count("409") == 10
    assert TestClient(app).get(f"/sessions/{sid}").json()["turn"] == 20


# ============================================================================ the client
def test_client_errors(tc):
    env = WordleEnv(client=tc)
    with pytest.raises(WordleError, match="reset"):
        env.submit("crane")
    env.reset(answer="crane")
    with pytest.raises(TypeError):
        env.submit(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="too long"):
        env.submit("x" * 100)
    with pytest.raises(InvalidRequestError):
        env.reset(answer="xyzzy")
    with pytest.raises(InvalidRequestError, match="not in the word list"):
        env.feedback("crane", "xyzzy")
    assert env.submit("crane")[2]
    with pytest.raises(EpisodeOverError) as info:
        env.submit("crane")
    assert isinstance(info.value, GameOver) and info.value.status_code == 409
    tc.delete(f"/sessions/{env.session_id}")
    with pytest.raises(SessionNotFoundError, match="deleted"):
        env.state()
    env.close()
    assert tc.get("/health").json()["sessions"] == 0


# ============================================================================ agreement
@pytest.fixture(scope="module", params=["testclient", "subprocess"])
def make_remote(request):
    if request.param == "testclient":
        tc = TestClient(create_app())
        yield lambda **kw: WordleEnv(client=tc, **kw)
        tc.close()
    else:
        port = find_free_port()
        proc = start_server("127.0.0.1", port, timeout=60)
        try:
            yield lambda **kw: WordleEnv(f"http://127.0.0.1:{port}", **kw)
        finally:
            stop_server(proc)


WORDS = sorted(valid_words())
REWARDS = [None, {"win_reward": 3.0, "turn_decay": 0.25, "green_reward": 0.2,
                  "present_reward": 0.1, "invalid_penalty": 0.3, "repeat_penalty": 0.2,
                  "loss_penalty": 1.0, "latest_green_reward": 0.15, "fit_reward": 0.25}]


def random_guess(rng: random.Random, answer: str, previous: list[str]) -> str:
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(WORDS)
    if kind < 0.5:
        return rng.choice(answers())
    if kind < 0.6 and previous:
        return rng.choice(previous)  # a repeat
    if kind < 0.7:
        return answer if rng.random() < 0.5 else f"  {answer.upper()} "
    if kind < 0.8:
        w = rng.choice(WORDS)
        return "".join(c.upper() if rng.random() < 0.5 else c for c in w) + rng.choice(["", " ", "\n"])
    return "".join(rng.choice("abcxyz é1\t\x00\ud800") for _ in range(rng.randint(0, 8)))


@pytest.mark.parametrize("hard_mode", [False, True], ids=["normal", "hard"])
@pytest.mark.parametrize("reward", REWARDS, ids=["default", "custom"])
def test_random_play_agrees(make_remote, reward, hard_mode):
    rng = random.Random(hash((hard_mode, reward is None)) & 0xFFFF)
    for episode in range(6):
        seed = rng.randrange(2**63)
        config = WordleConfig(max_guesses=6, hard_mode=hard_mode, reward=dict(reward or {}))
        local = LocalWordleEnv(config)
        with make_remote(max_guesses=6, hard_mode=hard_mode, reward=reward) as remote:
            assert remote.reset(seed) == local.reset(seed)
            answer = local.state()["answer"]
            done, previous = False, []
            while not done:
                guess = random_guess(rng, answer, previous)
                previous.append(guess.strip().lower())
                assert remote.get_feedback(guess) == local.get_feedback(guess)
                got = remote.submit(guess)
                assert got == local.submit(guess), guess
                assert type(got[1]) is float and type(got[2]) is bool
                done = got[2]
            assert remote.state() == local.state()
            with pytest.raises(GameOver):
                local.submit("crane")
            with pytest.raises(EpisodeOverError):
                remote.submit("crane")
            assert remote.feedback(answer, previous[0] if previous[0] in valid_words() else "crane") \
                == feedback(answer, previous[0] if previous[0] in valid_words() else "crane")


def test_solver_episodes_agree(make_remote):
    with make_remote() as remote:
        local = LocalWordleEnv()
        for seed in (0, 1, 2**63 - 1):
            guesses = remote.solve(seed)
            assert guesses == default_solver().solve(make_instance(seed).answer)
            assert remote.reset(seed) == local.reset(seed)
            for g in guesses:
                got = remote.submit(g)
                assert got == local.submit(g)
            assert got[2] and got[3]["success"]
        assert remote.solve(answer="abbey")[-1] == "abbey"
        assert remote.health()["status"] == "ok"
