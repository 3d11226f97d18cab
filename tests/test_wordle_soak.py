"""Soak test: thousands of Wordle episodes through a real server subprocess. The server's resident
memory must stay flat after warm-up and its session table bounded (deleted sessions are freed,
abandoned ones are evicted).

Episodes cycle through three paths: abandoned after one wasted turn (left for LRU eviction), a
repeated guess that runs out of turns (``max_guesses`` 2) then DELETE, a wasted turn then the win
then DELETE. 3,000 episodes are about 10,000 requests; on a loaded machine the loop stops at a
time budget (at least 1,000 episodes) so that the test stays under a minute, and the memory check
is made over the second half of the episodes that ran.
"""

import os
import time

import httpx
import pytest

from conftest import rss_bytes  # pytest (prepend import mode) puts tests/ on sys.path
from tasks.wordle.client import find_free_port, start_server, stop_server
from tasks.wordle.game import make_instance

EPISODES = 3000
MIN_EPISODES = 1000
BUDGET_S = 40.0
MAX_SESSIONS = 200
SAMPLE_EVERY = 100


def play(http: httpx.Client, episode: int) -> None:
    seed = 10_000 + episode
    kind = episode % 3
    body = {"seed": seed, "max_guesses": 2} if kind == 1 else {"seed": seed}
    r = http.post("/sessions", json=body)
    assert r.status_code == 200, r.text
    sid = r.json()["session_id"]
    if kind == 0:  # abandoned after a wasted turn
        r = http.post(f"/sessions/{sid}/submit", json={"guess": "zzzzz"})
        assert r.status_code == 200 and r.json()["info"]["valid"] is False
        return
    answer = make_instance(seed).answer
    word = "slate" if answer != "slate" else "crane"
    guesses = [word, word] if kind == 1 else ["xyzzy", answer.upper()]
    for guess in guesses:
        r = http.post(f"/sessions/{sid}/submit", json={"guess": guess})
        assert r.status_code == 200, r.text
    result = r.json()
    assert result["done"] and result["info"]["success"] == (kind == 2)
    assert http.delete(f"/sessions/{sid}").status_code == 200


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_thousands_of_episodes_keep_memory_flat():
    port = find_free_port()
    # Abandoned sessions are evicted once the table is full; the server evicts only sessions
    # idle for --evict-idle-after (300 s by default, answering 429 before that), so make that
    # short: here every live session but the abandoned ones is in use.
    proc = start_server("127.0.0.1", port, max_sessions=MAX_SESSIONS, timeout=60,
                        extra_args=["--evict-idle-after", "0.2"])
    samples: dict[int, int] = {}
    start = time.perf_counter()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            http.post("/solve", json={"seed": 0}).raise_for_status()  # load the solver table once
            episodes = 0
            while episodes < EPISODES:
                play(http, episodes)
                episodes += 1
                if episodes % SAMPLE_EVERY == 0:
                    assert http.get("/health").json()["sessions"] <= MAX_SESSIONS
                    samples[episodes] = rss_bytes(proc.pid)
                    if episodes >= MIN_EPISODES and time.perf_counter() - start > BUDGET_S:
                        break
            sessions = http.get("/health").json()["sessions"]
            assert 0 < sessions <= MAX_SESSIONS  # only abandoned ones remain, at most the cap
    finally:
        stop_server(proc)
    elapsed = time.perf_counter() - start
    mib = {k: round(v / 2**20, 1) for k, v in samples.items()}
    print(f"\n{episodes} episodes in {elapsed:.1f} s, {sessions} sessions left; server RSS (MiB) "
          f"every {SAMPLE_EVERY} episodes: {mib}")
    assert episodes >= MIN_EPISODES
    half = min(k for k in samples if k >= episodes // 2)
    growth = samples[max(samples)] - samples[half]
    assert growth < 10 * 2**20, f"RSS grew {growth / 2**20:.1f} MiB over the second half: {mib}"
