"""``eval_batch_size``: the held-out games play that many at a time (their KV caches are the
evaluation's memory), every game still played once, in order; 0 (the default) plays them all at
once exactly as before. CPU only, the tiny model built fresh."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest

import gamerl.core.evaluate as evaluate_module
from gamerl.config import get_config
from gamerl.core.evaluate import eval_instances, evaluate
from gamerl.models import load_policy

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_policy(str(tiny_dir), device="cpu")


def _played(monkeypatch):
    """Record the seeds of every rollout call evaluate makes."""
    calls = []
    real = evaluate_module.rollout

    def recording(policy, tokenizer, seeds, *args, **kwargs):
        calls.append(list(seeds))
        return real(policy, tokenizer, seeds, *args, **kwargs)

    monkeypatch.setattr(evaluate_module, "rollout", recording)
    return calls


def _seeds_of(episodes):
    return [ep.seed for ep in episodes]


def test_games_play_in_batches_each_once_in_order(tiny, monkeypatch):
    lm, tok = tiny
    cfg = get_config("tiny", max_steps=2, max_new_tokens=8, eval_episodes=7, eval_batch_size=3)
    seeds = eval_instances(cfg)
    calls = _played(monkeypatch)
    metrics, episodes = evaluate(lm, tok, seeds, cfg, return_episodes=True)
    assert [len(c) for c in calls] == [3, 3, 1]
    assert sum(calls, []) == list(seeds) == _seeds_of(episodes)
    assert metrics["episodes"] == 7
    # Deterministic: the sampling RNG runs on from batch to batch the same way every time.
    again, episodes_again = evaluate(lm, tok, seeds, cfg, return_episodes=True)
    assert again == metrics
    assert [ep.token_ids for ep in episodes_again] == [ep.token_ids for ep in episodes]


def test_zero_plays_every_game_at_once_as_before(tiny, monkeypatch):
    lm, tok = tiny
    cfg = get_config("tiny", max_steps=2, max_new_tokens=8, eval_episodes=5)
    assert cfg.eval_batch_size == 0
    seeds = eval_instances(cfg)
    calls = _played(monkeypatch)
    all_at_once, episodes = evaluate(lm, tok, seeds, cfg, return_episodes=True)
    assert calls == [list(seeds)]
    # A batch as large as the held-out set is the same single call, to the same numbers.
    big, big_episodes = evaluate(lm, tok, seeds, cfg.replace(eval_batch_size=64),
                                 return_episodes=True)
    assert big == all_at_once
    assert [ep.token_ids for ep in big_episodes] == [ep.token_ids for ep in episodes]
    assert evaluate(lm, tok, [], cfg)["episodes"] == 0


def test_a_negative_batch_size_is_refused():
    with pytest.raises(ValueError, match="eval_batch_size"):
        get_config("tiny", eval_batch_size=-1)
