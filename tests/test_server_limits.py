"""What every game server guarantees under load and abuse (issue 13, items 6, 8, 9 and the UTF-8
half of 10), on the three servers in-process (TestClient); tests/test_server_faults.py runs real
servers for the socket-level limits.

* 6: a per-client session quota, and 429 with ``Retry-After`` when a cap is reached instead of
  evicting an active game (sessions idle past ``evict_idle_after`` may still be evicted);
* 8: a busy session answers 409 at once (no thread waits for it); the MCTS budget has a ceiling;
* 9: DELETE waits for the turn in flight, and no turn is applied to a deleted game;
* 10: bodies that are not UTF-8, CESU-8 surrogates included, are 400.
"""

import threading
import time

import pytest

from tasks.common.client import SessionBusyError, TooManySessionsError
from tasks.password_game import server as pg
from tasks.password_game.client import PasswordGameEnv
from tasks.wordle import server as wd
from server_checks import CheckedClient  # tests/ is on sys.path (pytest rootdir-less import)

# name -> (server module, settings class, session body, a legal action body)
SERVERS = {
    "password_game": (pg, pg.ServerSettings, {"seed": 3, "max_steps": 1000}, {"password": "Hi1!"}),
    "wordle": (wd, wd.WordleServerSettings, {"seed": 3, "max_guesses": 100}, {"guess": "crane"}),
}
try:
    import pyspiel  # noqa: F401

    from tasks.openspiel import server as ops

    SERVERS["openspiel"] = (ops, ops.ServerSettings, {"game": "tic_tac_toe", "seed": 3},
                            {"move": "x(1,1)"})
except ImportError:  # OpenSpiel is optional; its server is then not tested here
    ops = None

TOKEN = "X-Client-Token"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=sorted(SERVERS))
def server(request):
    return request.param


def make(server: str, **settings) -> CheckedClient:
    module, settings_cls, _, _ = SERVERS[server]
    return CheckedClient(module.create_app(settings_cls(**settings)))


def create(tc, server: str, token=None):
    headers = {TOKEN: token} if token else {}
    return tc.post("/sessions", json=SERVERS[server][2], headers=headers)


def new_id(tc, server: str, token=None) -> str:
    r = create(tc, server, token)
    assert r.status_code == 200, r.text
    return r.json()["session_id"]


def act(tc, server: str, sid: str, what: str = "submit"):
    return tc.post(f"/sessions/{sid}/{what}", json=SERVERS[server][3])


def in_thread(fn):
    """Run ``fn`` in a thread; ``.result`` holds its return value once it has finished."""
    box = threading.Thread(target=lambda: setattr(box, "result", fn()), daemon=True)
    box.start()
    return box


# ============================================================================ 6: quotas, no eviction of active games
def test_a_flood_of_new_sessions_never_evicts_an_active_game(server):
    clock = FakeClock()
    tc = make(server, max_sessions=8, max_sessions_per_client=4, evict_idle_after=300,
              clock=clock)
    player = new_id(tc, server, "player")
    flood = [create(tc, server, "flood") for _ in range(10)]
    assert [r.status_code for r in flood] == [200] * 4 + [429] * 6  # at most its quota
    r = flood[-1]
    assert r.headers["retry-after"] == "300" and "max_sessions_per_client" in r.json()["detail"]
    others = [new_id(tc, server, "other") for _ in range(3)]
    r = create(tc, server, "late")  # 8 sessions, all used in the last 300 s: refused
    assert r.status_code == 429 and "max_sessions" in r.json()["detail"]
    assert int(r.headers["retry-after"]) >= 1
    assert tc.get("/health").json()["sessions"] == 8
    # The player takes a turn every 5 s for ten minutes while everyone else is idle; then a new
    # session may evict the least recently used idle session, never the player's.
    for _ in range(120):
        clock.now += 5
        assert act(tc, server, player, "feedback").status_code == 200
    late = new_id(tc, server, "late")
    assert act(tc, server, player, "feedback").status_code == 200
    assert tc.get(f"/sessions/{late}").status_code == 200
    idle = [r.json()["session_id"] for r in flood[:4]] + others
    answers = [tc.get(f"/sessions/{sid}") for sid in idle]
    evicted = [a for a in answers if a.status_code == 404]
    assert len(evicted) == 1 and "evicted" in evicted[0].json()["detail"]


def test_without_a_token_the_quota_is_per_address(server):
    tc = make(server, max_sessions_per_client=3)
    assert [create(tc, server).status_code for _ in range(4)] == [200, 200, 200, 429]
    assert create(tc, server, "someone-else").status_code == 200


def test_a_client_at_its_quota_may_evict_its_own_idle_session():
    clock = FakeClock()
    tc = make("wordle", max_sessions_per_client=2, evict_idle_after=60, clock=clock)
    first, second = new_id(tc, "wordle", "a"), new_id(tc, "wordle", "a")
    clock.now += 61
    act(tc, "wordle", second, "feedback")
    third = new_id(tc, "wordle", "a")
    assert "evicted" in tc.get(f"/sessions/{first}").json()["detail"]
    assert tc.get(f"/sessions/{third}").status_code == 200


def test_the_client_token_is_checked(server):
    tc = make(server)
    for bad in ("", "x" * 65, "a b", "é"):
        r = tc.post("/sessions", json=SERVERS[server][2], headers={TOKEN: bad.encode("utf-8")})
        assert r.status_code == 400 and TOKEN in r.json()["detail"], bad


def test_the_client_reports_429_with_its_retry_after():
    tc = make("password_game", max_sessions_per_client=1)
    with PasswordGameEnv(client=tc, client_token="t", retries=0) as env:
        env.reset(3)
        other = PasswordGameEnv(client=tc, client_token="t", retries=0)
        with pytest.raises(TooManySessionsError) as info:
            other.reset(3)
        assert info.value.status_code == 429 and info.value.retry_after == 300


# ============================================================================ 8: busy sessions answer at once
@pytest.mark.timeout(60)
def test_a_busy_session_is_refused_at_once(server):
    tc = make(server)
    sid = new_id(tc, server)
    session = tc.app.state.sessions.get(sid)
    session.lock.acquire()  # as if a request were using it
    try:
        calls = [lambda: act(tc, server, sid), lambda: act(tc, server, sid, "feedback"),
                 lambda: tc.get(f"/sessions/{sid}")]
        for call in calls:
            t = in_thread(call)
            t.join(5)
            assert not t.is_alive(), "the request waited for the busy session"
            assert t.result.status_code == 409 and t.result.headers["retry-after"] == "1"
            assert "busy" in t.result.json()["detail"]
    finally:
        session.lock.release()
    assert act(tc, server, sid).status_code == 200


def test_an_ended_episode_409_has_no_retry_after():
    tc = make("wordle")
    sid = tc.post("/sessions", json={"answer": "crane"}).json()["session_id"]
    assert tc.post(f"/sessions/{sid}/submit", json={"guess": "crane"}).json()["done"]
    r = tc.post(f"/sessions/{sid}/submit", json={"guess": "crane"})
    assert r.status_code == 409 and "retry-after" not in r.headers


def test_the_client_retries_a_busy_session_then_says_so():
    tc = make("password_game")
    env = PasswordGameEnv(client=tc, retries=2, backoff=0.01)
    env.reset(3)
    session = tc.app.state.sessions.get(env.session_id)
    session.lock.acquire()
    releaser = threading.Timer(0.5, session.lock.release)
    releaser.start()  # busy for 0.5 s: the client's retry (after Retry-After: 1 s) gets through
    t0 = time.monotonic()
    assert env.submit("Hello1!")[3]["turn"] == 1
    assert 0.5 <= time.monotonic() - t0 < 5
    session.lock.acquire()
    env.retries = 0
    try:
        with pytest.raises(SessionBusyError) as info:
            env.submit("Hello1!")
        assert info.value.status_code == 409 and info.value.retry_after == 1
    finally:
        session.lock.release()


@pytest.mark.skipif(ops is None, reason="open_spiel is not installed")
def test_the_mcts_budget_has_a_ceiling():
    tc = make("openspiel")
    limits = tc.get("/health").json()["limits"]
    assert limits["max_mcts_playouts"] == 1000 and limits["max_mcts_simulations"] == 1000
    for sims, rollouts in ((5000, 100), (1000, 2), (501, 2), (1001, 1)):
        r = tc.post("/sessions", json={"opponent": "mcts", "mcts_simulations": sims,
                                       "mcts_rollouts": rollouts})
        assert r.status_code == 422, (sims, rollouts)
        assert "mcts_simulations" in r.text
    # At the ceiling the costliest game's search (Othello, bot to move first) stays short.
    t0 = time.monotonic()
    r = tc.post("/sessions", json={"game": "othello", "opponent": "mcts", "model_seat": 1,
                                   "mcts_simulations": 1000, "seed": 1})
    assert r.status_code == 200 and time.monotonic() - t0 < 10


# ============================================================================ 9: DELETE and turns in flight
@pytest.mark.timeout(60)
def test_delete_waits_for_the_turn_in_flight_and_no_turn_follows_it(server):
    tc = make(server)
    sid = new_id(tc, server)
    game = tc.app.state.sessions.get(sid).game
    real_step, finished = game.step, []

    def slow_step(action):  # a turn that takes 0.5 s, like an MCTS reply
        time.sleep(0.5)
        out = real_step(action)
        finished.append(time.monotonic())
        return out

    game.step = slow_step
    first = in_thread(lambda: (act(tc, server, sid), time.monotonic()))
    time.sleep(0.1)
    second = in_thread(lambda: (act(tc, server, sid), time.monotonic()))
    delete = in_thread(lambda: (tc.delete(f"/sessions/{sid}"), time.monotonic()))
    for t in (first, second, delete):
        t.join(10)
    (r1, _), (r2, _), (rd, td) = first.result, second.result, delete.result
    assert r1.status_code == 200 and rd.status_code == 200
    assert r2.status_code == 409  # busy: refused at once, never queued behind the first
    assert len(finished) == 1 and finished[0] <= td  # DELETE answered after the turn in flight
    r = act(tc, server, sid)
    assert r.status_code == 404 and "deleted" in r.json()["detail"]


@pytest.mark.timeout(60)
def test_delete_that_cannot_wait_long_enough_deletes_nothing(server):
    tc = make(server, delete_wait=0.2)
    sid = new_id(tc, server)
    session = tc.app.state.sessions.get(sid)
    session.lock.acquire()
    try:
        r = tc.delete(f"/sessions/{sid}")
        assert r.status_code == 409 and "nothing was deleted" in r.json()["detail"]
    finally:
        session.lock.release()
    assert act(tc, server, sid).status_code == 200
    assert tc.delete(f"/sessions/{sid}").status_code == 200


# ============================================================================ 10: UTF-8 bodies
CESU8 = [b"\xed\xa0\x80", b"\xed\xb0\x80", b"\xed\xa0\xbd\xed\xb8\x80"]  # lone, lone, pair (emoji)


@pytest.mark.parametrize("raw", CESU8, ids=["high", "low", "pair"])
def test_cesu8_surrogates_are_400(server, raw):
    tc = make(server)
    sid = new_id(tc, server)
    (field, _), = SERVERS[server][3].items()
    body = b'{"' + field.encode() + b'": "a' + raw + b'b"}'
    for path in (f"/sessions/{sid}/submit", f"/sessions/{sid}/feedback"):
        r = tc.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "UTF-8" in r.json()["detail"], (path, r.text)
    assert tc.get(f"/sessions/{sid}").json()["turn"] == 0


# ============================================================================ /health
def test_health_reports_the_shared_limits(server):
    limits = make(server).get("/health").json()["limits"]
    assert {"max_sessions": 1024, "max_sessions_per_client": 256, "evict_idle_after": 300.0,
            "session_ttl": 3600.0, "body_timeout": 30.0, "header_timeout": 10.0,
            "max_connections": 128, "delete_wait": 30.0}.items() <= limits.items()
