"""The trainer's HTTP path when a game server loses a session mid-episode (evicted, expired,
restarted): the episode is replayed on a fresh session (same seed, same moves) or, when that
fails, dropped with a warning and a metric. A run never dies of it (issue 13, item 6).

Servers run on 127.0.0.1 (a free port), started and stopped by these tests.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import logging
from collections import Counter

import httpx
import pytest

from gamerl.config import get_config
from gamerl.core.evaluate import evaluate_scripted, http_env_factory, local_env_factory
from gamerl.models import load_tokenizer
from gamerl.core.epoch import epoch_seeds
from gamerl.core.trainer import Trainer
from gamerl.games import get_task
from tasks.common.client import find_free_port, stop_server
from tasks.password_game.client import PasswordGameEnv, start_server


def cfg_for(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=3, max_new_tokens=12,
                episodes_per_epoch=4, minibatch_size=4, ppo_epochs=1, eval_episodes=4, epochs=1,
                warmstart=False, wandb_mode="disabled", progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


def start(**kw):
    port = find_free_port()
    return start_server("127.0.0.1", port, **kw), f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server():
    proc, url = start()
    yield url
    stop_server(proc)


def lose_sessions(monkeypatch, url, times: dict[int, int]):
    """After a submission, delete the session on the server (as eviction or expiry would) for
    the games whose seed is in ``times``, at most ``times[seed]`` times (a large number: every
    time, replays included). Returns the count of sessions lost per seed."""
    lost = Counter()
    real_reset, real_submit = PasswordGameEnv.reset, PasswordGameEnv.submit

    def reset(self, seed=None):
        self._test_seed = seed
        return real_reset(self, seed)

    def submit(self, password):
        out = real_submit(self, password)
        seed = getattr(self, "_test_seed", None)
        if seed in times and lost[seed] < times[seed] and not out[2]:
            httpx.delete(f"{url}/sessions/{self.session_id}")
            lost[seed] += 1
        return out

    monkeypatch.setattr(PasswordGameEnv, "reset", reset)
    monkeypatch.setattr(PasswordGameEnv, "submit", submit)
    return lost


def answer(ep):  # deterministic, so local and HTTP games can be compared move for move
    return f"garden{len(ep.turns)}"  # never wins: every game plays all its turns


def test_a_lost_session_is_replayed_and_the_episode_is_unchanged(tiny_dir, server,
                                                                   monkeypatch, caplog):
    cfg = cfg_for(tiny_dir)
    tok = load_tokenizer(str(tiny_dir))
    seeds = [3, 4, 5, 6]
    local, local_eps = evaluate_scripted(answer, tok, seeds, cfg, local_env_factory(cfg),
                                         return_episodes=True)
    lost = lose_sessions(monkeypatch, server, {3: 1, 5: 2})
    with caplog.at_level(logging.INFO, logger="gamerl"):
        remote, remote_eps = evaluate_scripted(answer, tok, seeds, cfg,
                                               http_env_factory(cfg, server),
                                               return_episodes=True)
    assert lost == {3: 1, 5: 2}  # the sessions really were lost mid-episode
    task = get_task(cfg.task)
    replays = [ep.record(task).pop("session_replays", 0) for ep in remote_eps]
    assert replays == [1, 0, 2, 0]
    assert [ep.record(task) for ep in remote_eps] == [
        {**ep.record(task), "lost": False, "session_replays": n} if n else ep.record(task)
        for ep, n in zip(local_eps, replays)]
    assert remote["reward"] == local["reward"] and remote["episodes"] == 4
    assert remote["lost_episodes"] == 0 and remote["replayed_episodes"] == 2
    assert "replayed" in caplog.text


def test_an_episode_that_cannot_be_replayed_is_dropped_with_a_warning(tiny_dir, server,
                                                                     monkeypatch, caplog):
    cfg = cfg_for(tiny_dir)
    tok = load_tokenizer(str(tiny_dir))
    lose_sessions(monkeypatch, server, {4: 10 ** 6})  # every session of game 4 is lost
    with caplog.at_level(logging.WARNING, logger="gamerl"):
        metrics = evaluate_scripted(answer, tok, [3, 4, 5], cfg, http_env_factory(cfg, server))
    assert metrics["lost_episodes"] == 1 and metrics["episodes"] == 2
    assert "seed 4" in caplog.text and "dropped" in caplog.text


def test_training_survives_lost_sessions(tiny_dir, server, monkeypatch, tmp_path):
    cfg = cfg_for(tiny_dir, episodes_per_epoch=4)
    seeds = epoch_seeds(cfg, 0)
    victim = seeds[0]
    other = next(s for s in seeds if s != victim)
    lose_sessions(monkeypatch, server, {victim: 10 ** 6, other: 1})
    trainer = Trainer(cfg, tmp_path / "run", make_env=http_env_factory(cfg, server))
    metrics = trainer.train_epoch(0)
    n_victim = seeds.count(victim)
    assert metrics["rollout/lost_episodes"] == n_victim
    assert metrics["rollout/episodes"] == len(seeds) - n_victim
    assert metrics["rollout/replayed_episodes"] >= 1
    assert metrics["update/optimizer_steps"] >= 1  # the rest still trained
    trainer.tracker.finish()


def test_cli_evaluate_on_a_server_with_fewer_sessions_than_the_batch(tiny_dir, tmp_path, capsys,
                                                                     caplog):
    """A server that holds one session while the evaluation plays three games. It never evicts
    a session in use (429 instead, issue 13), so the batch cannot play in lockstep. Before: the
    second session's 429 ended the evaluation (exit 1). Now: the games play in waves as sessions
    free up, the evaluation completes, and a warning says why and what to change."""
    from gamerl.cli import main

    cfg = cfg_for(tiny_dir)
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.save("best")
    trainer.tracker.finish()
    proc, url = start(max_sessions=1)
    try:
        with caplog.at_level(logging.WARNING, logger="gamerl"):
            code = main(["evaluate", "--checkpoint", str(tmp_path / "run" / "best"), "--episodes",
                         "3", "--device", "cpu", "--env-url", url])
        assert code == 0
        assert "--max-sessions of at least 3" in caplog.text
        # A server whose only session is held by another client: a clear error, not a hang.
        other = PasswordGameEnv(url)
        other.reset(seed=1)
        from gamerl.core.evaluate import evaluate
        from tasks.common.client import TooManySessionsError
        with pytest.raises(TooManySessionsError, match="no room for any of this batch"):
            evaluate(trainer.policy.lm, trainer.tokenizer, [5, 6], cfg,
                     make_env=http_env_factory(cfg, url))
        other.close()
    finally:
        stop_server(proc)


def test_without_lost_keeps_every_row_field_aligned(tiny_dir, tmp_path):
    """Dropping a lost episode drops its row from every per-row tensor, the frozen bottom's
    output too (trainable_layers, the smollm2-135m preset's setting): before the fix the trunk
    cache kept all rows, so every later row was updated from another episode's hidden states
    (issue 22, defect 1)."""
    import dataclasses

    import torch

    from gamerl.core.epoch import PPOBatch, collect, without_lost

    cfg = cfg_for(tiny_dir, trainable_layers=1, top_k=8, top_p=0.9)  # supports to keep too
    trainer = Trainer(cfg, tmp_path / "run")
    try:
        batch = collect(trainer.policy, trainer.reference, trainer.tokenizer,
                        epoch_seeds(cfg, 0), local_env_factory(cfg), cfg)
        assert batch.trunk_cache is not None and len(batch) == 4
        batch.episodes[1].lost = True
        kept = without_lost(batch)
        assert len(kept) == 3 and kept.trunk_cache.shape[0] == 3
        for new, old in enumerate([0, 2, 3]):
            assert torch.equal(kept.input_ids[new], batch.input_ids[old])
            assert torch.equal(kept.trunk_cache[new], batch.trunk_cache[old])
        # PPOBatch.PER_ROW lists every [B, ...] tensor a collected batch holds, so select()
        # (and without_lost through it) cannot drift from the batch's fields again
        per_row = {f.name for f in dataclasses.fields(batch)
                   if torch.is_tensor(getattr(batch, f.name))
                   and getattr(batch, f.name).shape[:1] == (len(batch),)}
        assert per_row <= set(PPOBatch.PER_ROW), per_row - set(PPOBatch.PER_ROW)
        # a general selection keeps each row's packed sampling supports with its tokens
        assert batch.support is not None  # top-k/top-p sampling: supports are kept
        picked = batch.select(torch.tensor([3, 0]))
        for new, old in enumerate([3, 0]):
            mine = picked.support[picked.support_index[new][picked.mask[new].bool()]]
            theirs = batch.support[batch.support_index[old][batch.mask[old].bool()]]
            assert torch.equal(mine, theirs) and len(mine) == int(batch.mask[old].sum())
        assert [e.seed for e in picked.episodes] == [batch.episodes[3].seed,
                                                     batch.episodes[0].seed]
    finally:
        trainer.close()
