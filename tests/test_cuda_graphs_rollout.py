"""The ``cuda_graphs`` decoding path (``LMPolicy._generate_on_graphs``), on CPU: the same static
cache and fixed batch as on a GPU, without the compile (transformers compiles only on an
accelerator; docs/benchmarks.md has the H200's numbers). It must play the same games as the
default path, keep one cache for the run, stop its filler rows at once, and record the log-probs
that PPO's scoring recomputes."""

import pytest
import torch

from gamerl.config import get_config
from gamerl.core.epoch import collect, kl_stats
from gamerl.core.evaluate import local_env_factory
from gamerl.core.rollout import EndRows, LMPolicy, RolloutConfig, rollout
from gamerl.models import PolicyWithValue, load_policy, load_reference
from gamerl.models.kv_cache import fixed_cache


def _tiny():
    cfg = get_config("tiny", device="cpu", wandb_mode="disabled", progress=False)
    lm, tok = load_policy("tiny", device="cpu")
    return cfg, lm, tok


def _greedy_games(lm, tok, cfg, graphs: bool, seeds):
    rcfg = RolloutConfig.from_train_config(cfg, greedy=True)
    rcfg.cuda_graphs = graphs
    episodes = rollout(LMPolicy(lm, tok, rcfg), tok, seeds, local_env_factory(cfg), rcfg)
    return [ep.token_ids for ep in episodes]


def test_graphs_path_plays_the_default_paths_games():
    cfg, lm, tok = _tiny()
    seeds = list(range(12))
    assert _greedy_games(lm, tok, cfg, True, seeds) == _greedy_games(lm, tok, cfg, False, seeds)


def test_one_cache_for_the_run_and_filler_rows_stop_at_once():
    cfg, lm, tok = _tiny()
    cache, rows = fixed_cache(lm, 3, cfg.max_context_tokens)
    again, rows_again = fixed_cache(lm, 2, cfg.max_context_tokens)
    assert again is cache and rows_again == 3  # fewer rows: the same cache, filled
    bigger, rows_bigger = fixed_cache(lm, 4, cfg.max_context_tokens)
    assert bigger is not cache and rows_bigger == 4
    # a later call with fewer games: 2 real rows in a batch of 4, answers as the default path's
    seeds = [5, 6]
    assert _greedy_games(lm, tok, cfg, True, seeds) == _greedy_games(lm, tok, cfg, False, seeds)
    scores = torch.randn(4, 10)
    out = EndRows(2, stop_id=7)(None, scores.clone())
    assert torch.equal(out[:2], scores[:2])  # real rows untouched
    assert out[2:].argmax(-1).tolist() == [7, 7] and torch.isinf(out[2:, :7]).all()


def test_graphs_path_records_the_log_probs_ppo_scores():
    cfg, lm, tok = _tiny()
    cfg = cfg.replace(cuda_graphs=True)
    policy = PolicyWithValue(lm)
    torch.manual_seed(0)
    batch = collect(policy, load_reference(lm), tok, list(range(8)), local_env_factory(cfg), cfg)
    stats = kl_stats(batch, cfg)
    assert batch.mask.sum() > 0
    assert stats["check/gen_vs_old_mismatch"] == 0.0 and stats["check/gen_vs_old_max_abs"] < 1e-4


@pytest.mark.slow
def test_one_compiled_graph_serves_every_turn_and_batch():
    """What CUDA graphs need: the compiled decoding step sees one shape for the whole run, so it
    compiles (and on a GPU records) once. Forced here on the CPU (``_compile_all_devices``):
    two rollouts of 3 turns, 8 games then 5 (filled to 8), every turn a wider prompt."""
    from torch._dynamo.utils import counters
    from transformers import CompileConfig

    cfg, lm, tok = _tiny()
    compile_config = CompileConfig(mode="default")
    compile_config._compile_all_devices = True
    lm.generation_config.compile_config = compile_config
    rcfg = RolloutConfig.from_train_config(cfg)
    rcfg.cuda_graphs = True
    torch._dynamo.reset()
    counters.clear()
    for games in (8, 5):
        episodes = rollout(LMPolicy(lm, tok, rcfg), tok, list(range(games)),
                           local_env_factory(cfg), rcfg)
        assert all(len(ep.turns) == 3 for ep in episodes)
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()
