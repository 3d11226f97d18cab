"""Soak test of the TRAINER's path to a Wordle server: thousands of episodes played by
``gamerl.core.rollout.rollout`` (the function PPO collects with) through
``gamerl.core.evaluate.http_env_factory`` (one ``WordleEnv`` HTTP client, one server session, per
episode) against a real server subprocess.

What must hold (the verl multi-turn Wordle lesson in DESIGN.md section 4: per-episode state
that is never cleaned grows CPU RAM without bound):

* the server's resident memory (``/proc/<pid>/statm``) stays flat after warm-up;
* so does this process's (the client side: the rollout, one httpx client per episode, the
  tokenizer, the solver's memo), and its open file descriptors (sockets closed);
* sessions are freed: the rollout closes every env it opened (``DELETE``; the server then
  answers 404 "it was deleted" for them); sessions whose client is dropped without a ``DELETE``
  (a crashed trainer) are evicted, and ``/health``'s session count never exceeds
  ``max_sessions``.

Policies (``ScriptedPolicy``, as the reference rows of an evaluation use them), one per batch in
turn: the entropy solver (wins, about 3.5 turns), random answer words (6 turns, mostly lost),
junk text (invalid words: 6 wasted turns), and random words whose clients are abandoned.
Answers cycle over the 128 held-out ones, so the solver's memo (keyed by mark history) fills
during warm-up. The loop stops after ``EPISODES`` or at a time budget (at least
``MIN_EPISODES``), and memory is compared over the second half of the episodes that ran.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gc
import random
import time

import httpx
import pytest

from gamerl.config import get_config
from gamerl.core.evaluate import http_env_factory
from gamerl.games import get_task
from gamerl.games.wordle import wordle_heldout_answers
from gamerl.models import build_tiny, load_tokenizer
from gamerl.core.rollout import RolloutConfig, ScriptedPolicy, rollout, summarize
from gamerl.tracking.samples import episode_table
from tasks.wordle.client import find_free_port, start_server, stop_server

from conftest import rss_bytes  # pytest (prepend import mode) puts tests/ on sys.path

EPISODES = 4000
MIN_EPISODES = 1200
BUDGET_S = 45.0
BATCH = 40  # episodes per rollout call (one session each, all open at once)
MAX_SESSIONS = 100  # the server's cap: abandoned sessions beyond it are evicted (LRU, idle)
MIB = 2**20


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Recording:
    """``make_env`` that remembers each env's session id when the rollout closes it. With
    ``abandon`` the close only drops the HTTP client, WITHOUT ``DELETE /sessions/{id}`` (as if
    the trainer died mid-episode): the server must evict those sessions."""

    def __init__(self, make_env, abandon: bool = False):
        self.make_env, self.abandon, self.closed = make_env, abandon, []

    def __call__(self):
        env = self.make_env()
        real_close = env._http.close if self.abandon else env.close

        def close():
            self.closed.append(env.session_id)
            real_close()

        env.close = close
        return env


def why_gone(http: httpx.Client, sid: str) -> str:
    r = http.get(f"/sessions/{sid}")
    return r.json()["detail"] if r.status_code == 404 else f"alive ({r.status_code})"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return load_tokenizer(str(build_tiny(tmp_path_factory.mktemp("soak") / "tiny")))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_rollouts_through_the_server_keep_memory_flat(tokenizer):
    cfg = get_config("tiny", task="wordle")  # 6 guesses, the default rewards
    task = get_task("wordle")
    agents = task.reference_agents(cfg)
    junk_rng = random.Random(0)
    policies = {
        "solver": ScriptedPolicy(tokenizer, agents["solver"]),
        "random": ScriptedPolicy(tokenizer, agents["random"]),
        "junk": ScriptedPolicy(tokenizer, lambda ep: "".join(
            junk_rng.choice("abcxyz!? |") for _ in range(junk_rng.randint(0, 9)))),
        "abandoned": ScriptedPolicy(tokenizer, agents["random"]),
    }
    kinds = list(policies)
    rcfg = RolloutConfig.from_train_config(cfg)
    held = wordle_heldout_answers()
    port = find_free_port()
    # Abandoned sessions are evicted once the table is full, but only those idle for
    # --evict-idle-after (300 s by default; the server answers 429 before that): make it short,
    # since every other live session belongs to the rollout in progress.
    proc = start_server("127.0.0.1", port, max_sessions=MAX_SESSIONS, timeout=60,
                        extra_args=["--evict-idle-after", "0.5"])
    base_url = f"http://127.0.0.1:{port}"
    make_env = http_env_factory(cfg, base_url)
    server, client, fds, sessions_seen, abandoned = {}, {}, {}, [], []
    stats = {k: {"episodes": 0, "wins": 0, "turns": 0, "invalid": 0} for k in kinds}
    start = time.perf_counter()
    episodes = batches = 0
    table = ""
    try:
        with httpx.Client(base_url=base_url, timeout=10) as http:
            while episodes < EPISODES:
                kind = kinds[batches % len(kinds)]
                instances = [{"seed": 1_000_000 + episodes + i,
                              "answer": held[(episodes + i) % len(held)]} for i in range(BATCH)]
                envs = Recording(make_env, abandon=kind == "abandoned")
                eps = rollout(policies[kind], tokenizer, instances, envs, rcfg)
                assert len(envs.closed) == BATCH  # the rollout closed every env it opened
                sessions_seen.append(http.get("/health").json()["sessions"])
                assert sessions_seen[-1] <= MAX_SESSIONS
                if kind == "abandoned":
                    abandoned.extend(envs.closed)
                elif batches < 2 * len(kinds) or batches % 10 == 0:  # spot checks: deleted
                    for sid in envs.closed:
                        assert "it was deleted" in why_gone(http, sid), sid
                s = stats[kind]
                s["episodes"] += len(eps)
                s["wins"] += sum(ep.success for ep in eps)
                s["turns"] += sum(len(ep.turns) for ep in eps)
                s["invalid"] += sum(not t.stats["valid"] for ep in eps for t in ep.turns)
                if batches == len(kinds):
                    table = episode_table(eps, "wordle", max_rows=4)
                    summarize(eps, cfg)
                del eps
                episodes += BATCH
                batches += 1
                if batches % len(kinds) == 0:  # one sample per cycle of the four policies
                    gc.collect()
                    server[episodes] = rss_bytes(proc.pid)
                    client[episodes] = rss_bytes("self")
                    fds[episodes] = open_fds()
                    if episodes >= MIN_EPISODES and time.perf_counter() - start > BUDGET_S:
                        break
            final_sessions = http.get("/health").json()["sessions"]
            first_abandoned = why_gone(http, abandoned[0])
    finally:
        stop_server(proc)
    elapsed = time.perf_counter() - start
    fmt = lambda d: {k: round(v / MIB, 1) for k, v in d.items()}  # noqa: E731
    print(f"\n{episodes} episodes ({batches} rollouts of {BATCH}) in {elapsed:.1f} s; "
          f"sessions after each rollout: max {max(sessions_seen)}, final {final_sessions}")
    print(f"per policy: {stats}")
    print(f"server RSS (MiB): {fmt(server)}\nclient RSS (MiB): {fmt(client)}\nclient fds: {fds}")
    print(table)

    assert episodes >= MIN_EPISODES
    assert stats["solver"]["wins"] == stats["solver"]["episodes"]  # the game is the real one
    assert stats["junk"]["invalid"] == stats["junk"]["turns"] == 6 * stats["junk"]["episodes"]
    assert stats["random"]["turns"] > 4 * stats["random"]["episodes"]
    # abandoned sessions piled up to the cap and were evicted, never beyond it
    assert max(sessions_seen) == MAX_SESSIONS and 0 < final_sessions <= MAX_SESSIONS
    assert "evicted" in first_abandoned, first_abandoned
    half = min(k for k in server if k >= episodes // 2)
    last = max(server)
    grew_s, grew_c = server[last] - server[half], client[last] - client[half]
    assert grew_s < 8 * MIB, f"server RSS grew {grew_s / MIB:.1f} MiB: {fmt(server)}"
    assert grew_c < 8 * MIB, f"client RSS grew {grew_c / MIB:.1f} MiB: {fmt(client)}"
    assert fds[last] <= fds[half] + 2, f"file descriptors leak: {fds}"
    assert "| answer | guesses | result |" in table
