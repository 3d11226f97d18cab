"""Training configuration: every setting of a run, grouped by concern, one small dataclass each
(as nanoGPT's ``GPTConfig`` is the model's): ``network``, ``adapters`` (LoRA), ``game``,
``password_game`` (that game's own ``PasswordGameSettings``; Wordle's and OpenSpiel's settings are
their ``task_config``), ``sampling``, ``evaluation``, ``schedule``, ``instances`` (which games are
played), ``optim``, ``ppo``, ``advantage``, ``kl``, ``demos`` and ``sft`` (the warm start), and
``output``. The presets are in ``presets.py``; settings removed on 2026-12-07, in ``removed.py``.

Every setting also has one flat name, unique across the sections (``lr``, ``num_rules``): presets,
``--set NAME=VALUE``, ``get_config(**overrides)``, ``TrainConfig(**settings)``, ``cfg.replace``
and a run's ``config.json`` use it, and ``cfg.NAME`` reads and writes it in its section
(``cfg.lr is cfg.optim.lr``). The defaults are the original notebook's (3 epochs of 20 episodes,
30 turns, clip 0.2, gamma 0.99, lambda 0.95, lr 1e-6, temperature 0.7, 256 new tokens) plus the
usual PPO settings. An *epoch* collects ``episodes_per_epoch`` episodes with the current policy,
then runs ``ppo_epochs`` passes of minibatch updates over them; the checkpoint counter counts
finished epochs.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from ..games.password_game import PasswordGameSettings
from .presets import PRESET_TASKS, PRESETS
from .removed import REMOVED_SECTIONS, REMOVED_SETTINGS, REMOVED_TAG, refuse_removed

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
    # Train only the last N decoder layers (+ final norm, value head); the frozen layers below
    # run in the rollout only (scoring keeps their output), the updates run the top N. None:
    # every layer trains.
    trainable_layers: Optional[int] = None


@dataclass
class AdapterSettings:
    """LoRA (peft): train low-rank adapters instead of every weight (gamerl/models/lora.py). The
    frozen reference is then the base model with the adapters switched off (no second copy), and
    checkpoints hold the adapters and the value head only; no dropout (PPO's old and new
    log-probs must come from the same function). load_in_4bit needs CUDA and bitsandbytes."""
    lora: bool = False
    lora_rank: int = 16
    lora_alpha: int = 32
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
    # Later-turn user messages: "full" the game's whole text, "compact" without what the first
    # message said, "latest" only what changed (Wordle's last board line; elsewhere compact);
    # "letters" (Wordle's only): latest, each word spelled letter by letter beside its marks.
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
    # step 7.1x faster on an H200: docs/benchmarks.md); the first call compiles (~40-70 s).
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
    # Env rewards are multiplied by this before GAE. The policy loss does not care (advantages are
    # whitened) but the critic and its clip range (value_clip_range, in return units) do: choose
    # it so a typical discounted return is O(1) (each preset says how it chose its own).
    reward_scale: float = 1.0


@dataclass
class KLSettings:
    """The leash to the frozen reference (the policy at the start of PPO). With kl_in_reward
    (InstructGPT's and TRL's way) each policy token's reward gets -kl_coef * (logp - ref_logp),
    the unbiased k1 estimate; otherwise, and always with grpo, it is a loss term
    kl_coef * mean(k3): verl's low_var_kl, >= 0 (k1's expected gradient as a loss is 0)."""
    kl_coef: float = 0.05
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


def setting_fields() -> dict[str, Any]:
    """Every setting's flat name -> its ``dataclasses.Field`` (type, default), section by section."""
    return {f.name: f for cls in SECTIONS.values() for f in fields(cls)}


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
                raise ValueError(f"unknown setting {key!r}{did_you_mean(key, SETTING_SECTION)}")
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
        _need(self.discount_per in ("turn", "token"), "discount_per: 'turn' or 'token'")
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
                             f"{did_you_mean(unknown[0], SETTING_SECTION)}")
        return TrainConfig(**{**self.settings(), **overrides})


def _flat_setting(section: str, name: str) -> property:
    """``cfg.NAME``: the setting in its section (read and write)."""
    return property(lambda cfg: getattr(getattr(cfg, section), name),
                    lambda cfg, value: setattr(getattr(cfg, section), name, value),
                    doc=f"{section}.{name}")


for _name, _section in SETTING_SECTION.items():
    setattr(TrainConfig, _name, _flat_setting(_section, _name))
del _name, _section


# ----------------------------------------------------------------------------- a preset's config

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


def did_you_mean(name: str, known) -> str:
    import difflib

    if name in REMOVED_SETTINGS:
        return (f": removed from the trainer on 2026-12-07 (no preset changed it); it is "
                f"{REMOVED_SETTINGS[name]!r} now, and the git tag {REMOVED_TAG} still has it")
    guess = ALIASES.get(name) or next(iter(difflib.get_close_matches(name, list(known), n=1)), None)
    return (f"; did you mean {guess!r}?" if guess
            else " (python -m gamerl train --print-config lists the settings)")


__all__ = ["PRESETS", "TrainConfig", "get_config"]
