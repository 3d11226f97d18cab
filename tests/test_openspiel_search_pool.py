"""MCTS searches in another process (``search_pool``, what the OpenSpiel server uses so that a
search never holds its GIL) play exactly the moves of a search in this process, in every game of
the registry, hidden-information games included (their determinization stays in this process);
the server's search processes end with it."""

import multiprocessing
import random
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
import pytest

from tasks.common.client import find_free_port, start_server, stop_server

pytest.importorskip("pyspiel")

from tasks.openspiel.bots import mcts_bot  # noqa: E402
from tasks.openspiel.games import GAMES  # noqa: E402


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as executor:
        yield executor


@pytest.mark.parametrize("name", list(GAMES))
def test_a_search_elsewhere_plays_the_same_moves(name, pool):
    here = mcts_bot(name, 40, seed=3, rollouts=2)
    there = mcts_bot(name, 40, seed=3, rollouts=2, search_pool=pool)
    state, chance, moves = here.game.new_initial_state(), random.Random(0), 0
    while not state.is_terminal() and moves < 10:
        if state.is_chance_node():
            state.apply_action(chance.choice([o for o, _ in state.chance_outcomes()]))
            continue
        action = here.step(state)
        assert there.step(state) == action, (name, moves)
        state.apply_action(action)
        moves += 1
    assert moves >= 2
    # the random streams moved on alike, so the next search agrees too
    assert here.rollout_rng.get_state()[1].tolist() == there.rollout_rng.get_state()[1].tolist()


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _gone(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() for pid in pids):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("how", ["terminate", "kill"])
def test_the_search_processes_end_with_the_server(how):
    # uvicorn ends a SIGTERMed server by raising the signal again, past the pool's shutdown:
    # the search processes were left behind, one more pair for every server a test started.
    port = find_free_port()
    proc = start_server("tasks.openspiel.server", "127.0.0.1", port, timeout=60)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/sessions", timeout=60,
                       json={"game": "othello", "opponent": "mcts", "model_seat": 1})
        assert r.status_code == 200  # the bot has searched its first move in a worker
        workers = _children(proc.pid)
        assert workers, "no search process was started"
        getattr(proc, how)()
        proc.wait(10)
        assert _gone(workers, 10), f"search processes {workers} outlived the server"
    finally:
        stop_server(proc)
