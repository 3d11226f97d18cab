"""A run as two JSON files, in the seed guide's shape: ``train_config.json`` (the trainer, in
sections) and ``env_config.json`` (the game and its settings: gamerl/config/envconfig.py).

    python -m gamerl configure                        # the wizard writes config/*.json
    python -m gamerl train --config config/train_config.json        # + config/env_config.json

    cfg, env_url = load_run_config("config/train_config.json")      # + config/env_config.json
    train, env = config_to_json(cfg, env_url)                          # the inverse
    write_run_config(cfg, "config", env_url)                           # -> (train path, env path)

Every key maps to one ``TrainConfig`` field (gamerl/config/train_config.py says what each does). A
key may be left out: its field keeps the base config's value (the file's ``preset``, default
``tiny``, for env_config.json's ``task``, default ``openspiel``; or the ``base`` argument). An
unknown key or section, or a value of the wrong type, is an error naming the file, the key and the
known keys: nothing is silently ignored. JSON has no comments, so every object (the top level, each
section, ``reward``) may hold a ``"_comment"`` (a string or a list of strings), which is ignored.

train_config.json
=================

============  ==========================  ==============================================
section       key                         TrainConfig field
============  ==========================  ==============================================
(top level)   preset                      preset (``tiny`` | ``qwen3-0.6b``: also the base
                                          for keys left out, unless ``base`` is given)
(top level)   output_dir                  out_dir (null: checkpoints/<preset>-<time>)
model         model_name                  model (``tiny``, a hub id, a directory)
model         use_4bit                    load_in_4bit (QLoRA: CUDA + bitsandbytes + LoRA)
model         device, dtype,              device, dtype, attn_implementation,
              attn_implementation,        gradient_checkpointing, trainable_layers,
              gradient_checkpointing,     share_prefix
              trainable_layers,
              share_prefix
lora          enabled                     lora
lora          r                           lora_rank
lora          lora_alpha, lora_dropout    lora_alpha, lora_dropout
lora          target_modules              lora_target_modules (null: every projection)
ppo           learning_rate               lr
ppo           batch_size                  minibatch_size (episodes per optimizer step)
ppo           value_head_lr, weight_decay, adam_eps, ppo_epochs, micro_batch_size,
              clip_range, value_clip_range, vf_coef, entropy_coef, max_grad_norm, gamma,
              lam, discount_per, whiten_advantages, kl_coef, kl_estimator, kl_in_reward,
              advantage_estimator, group_size, reward_scale,
              score_batch_size                         the field of the same name
generation    max_new_tokens, temperature, top_p, top_k, eval_temperature, eval_top_p,
              eval_top_k, eval_greedy, max_context_tokens, feedback,
              system_prompt, cuda_graphs               the field of the same name
training      epochs, episodes_per_epoch, max_steps, seed, train_seed_start,
              train_seed_count, eval_seed_start, eval_episodes, val_seed_start,
              val_episodes, eval_batch_size, save_every, eval_every,
              warmstart, warmstart_examples, warmstart_steps, warmstart_batch_size,
              warmstart_lr, warmstart_checkpoint_seconds,
              warmstart_all_layers                     the field of the same name
curriculum    enabled, stages             curriculum: enabled false -> None; stages null
                                          (or "default") -> "default"; else the list of
                                          stage dicts {"name", "games", "opponent",
                                          "threshold"}
curriculum    window                      curriculum_window
replay        enabled, fraction           replay_fraction: fraction if enabled, else 0
                                          (fraction is kept while disabled, for switching on)
replay        capacity                    replay_capacity
logging       wandb_mode, wandb_project,  the field of the same name (wandb_mode
              progress                    "disabled": tensorboard + JSONL log instead)
============  ==========================  ==============================================

Not in the file: ``task`` and ``task_config``, and the Password Game's num_rules,
reward_per_rule, length_penalty, episode_bonus, bonus_min_rules and reward_mode (all from
env_config.json: gamerl/config/envconfig.py says which keys each game has), and warmstart_extra_prob
and warmstart_demos (the base's values).

A key of a setting removed on 2026-12-07 (``removed.REMOVED_SETTINGS``) is dropped where it
holds the value that left it off, and refused in one line, naming the git tag that still runs it,
where it does not.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

from .presets import PRESETS
from .removed import REMOVED_SETTINGS, refuse_removed
from .train_config import TrainConfig, get_config
from .envconfig import ENV_FILE, LEGACY_TASK, config_files, env_to_json, read_env
from .jsonchecks import COMMENT, PathLike, check_keys, field_value, read_json

TRAIN_FILE = "train_config.json"
DEFAULT_REPLAY_FRACTION = 0.3  # written for a disabled replay, so switching it on just works

# section -> {json key: TrainConfig field}; the special keys (curriculum.enabled/stages,
# replay.enabled/fraction) are handled by hand and listed in SPECIAL_KEYS.
SECTIONS: dict[str, dict[str, str]] = {
    "model": {"model_name": "model", "use_4bit": "load_in_4bit", "device": "device",
              "dtype": "dtype", "attn_implementation": "attn_implementation",
              "gradient_checkpointing": "gradient_checkpointing",
              "trainable_layers": "trainable_layers", "share_prefix": "share_prefix"},
    "lora": {"enabled": "lora", "r": "lora_rank", "lora_alpha": "lora_alpha",
             "lora_dropout": "lora_dropout", "target_modules": "lora_target_modules"},
    "ppo": {"learning_rate": "lr", "value_head_lr": "value_head_lr",
            "weight_decay": "weight_decay", "adam_eps": "adam_eps", "ppo_epochs": "ppo_epochs",
            "batch_size": "minibatch_size", "micro_batch_size": "micro_batch_size",
            "clip_range": "clip_range", "value_clip_range": "value_clip_range",
            "vf_coef": "vf_coef", "entropy_coef": "entropy_coef",
            "max_grad_norm": "max_grad_norm", "gamma": "gamma", "lam": "lam",
            "discount_per": "discount_per", "whiten_advantages": "whiten_advantages",
            "kl_coef": "kl_coef", "kl_estimator": "kl_estimator",
            "kl_in_reward": "kl_in_reward", "advantage_estimator": "advantage_estimator",
            "group_size": "group_size", "reward_scale": "reward_scale",
            "score_batch_size": "score_batch_size"},
    "generation": {k: k for k in ("max_new_tokens", "temperature", "top_p", "top_k",
                                  "eval_temperature", "eval_top_p", "eval_top_k", "eval_greedy",
                                  "max_context_tokens", "feedback", "system_prompt",
                                  "cuda_graphs")},
    "training": {k: k for k in ("epochs", "episodes_per_epoch", "max_steps", "seed",
                                "train_seed_start", "train_seed_count", "eval_seed_start",
                                "eval_episodes", "val_seed_start", "val_episodes",
                                "eval_batch_size", "save_every", "eval_every",
                                "warmstart",
                                "warmstart_examples", "warmstart_steps",
                                "warmstart_batch_size", "warmstart_lr",
                                "warmstart_checkpoint_seconds", "warmstart_all_layers")},
    "curriculum": {"window": "curriculum_window"},
    "replay": {"capacity": "replay_capacity"},
    "logging": {k: k for k in ("wandb_mode", "wandb_project", "progress")},
}
SPECIAL_KEYS: dict[str, tuple[str, ...]] = {"curriculum": ("enabled", "stages"),
                                            "replay": ("enabled", "fraction")}
TOP_LEVEL: dict[str, str] = {"preset": "preset", "output_dir": "out_dir"}
# TrainConfig fields that train_config.json does not hold (see the module docstring).
NOT_IN_TRAIN_FILE = ("task", "task_config", "curriculum", "replay_fraction", "num_rules",
                     "reward_per_rule", "length_penalty", "episode_bonus", "bonus_min_rules",
                     "reward_mode", "warmstart_extra_prob", "warmstart_demos")

# The comments that say the same for every game; train_comments(task) adds the game's own
# (its module's ConfigFiles.train_comments).
_COMMON_COMMENTS: dict[str, Any] = {
    "model": ["model_name: 'tiny' (the embedded model: CPU, minutes), a hub id or a directory.",
              "On a GPU with Qwen3-0.6B: \"preset\": \"qwen3-0.6b\", model_name "
              "\"Qwen/Qwen3-0.6B\", use_4bit true (QLoRA: needs CUDA, bitsandbytes and "
              "lora.enabled true), gradient_checkpointing true, training.warmstart false, "
              "lora.r 16 with lora_alpha 32; or run `python -m gamerl configure`.",
              "device/dtype/attn_implementation null: chosen automatically."],
    "lora": "Low-rank adapters (peft): only they and the value head train; the reference "
            "policy is the base model with the adapters off. target_modules null: every "
            "attention and MLP projection.",
    "ppo": "learning_rate -> lr, batch_size -> minibatch_size (episodes per optimizer step); "
           "the rest are TrainConfig's PPO fields under their own names.",
    "replay": "Failure replay: `fraction` of each epoch's games are replayed from the "
              "`capacity` most recent failures (fraction is used only when enabled).",
    "logging": "wandb_mode offline | online | disabled (disabled: a local tensorboard + JSONL "
               "log instead).",
}
def train_comments(task: str) -> dict[str, Any]:
    """The "_comment" of each section of train_config.json (key "" for the top level): the
    common ones and the game's own (``Task.config_files``)."""
    files = config_files(task)
    top = ["gamerl run configuration (gamerl/config/jsonconfig.py maps every key to a TrainConfig "
           "field; gamerl/config/train_config.py documents them). Written by "
           "`python -m gamerl configure`.",
           f"Run: python -m gamerl train --task {task} --config config/train_config.json "
           f"(env_config.json next to it holds {files.env_holds}).",
           "Keys left out keep the preset's values; unknown keys are errors."]
    return {"": top, **_COMMON_COMMENTS, **files.train_comments}


__all__ = ["ENV_FILE", "SECTIONS", "TRAIN_FILE", "config_to_json", "dumps", "load_run_config",
           "read_json", "train_comments", "write_run_config"]


# ----------------------------------------------------------------------------- reading

def _train_values(data: dict, path: Path, base: TrainConfig) -> dict[str, Any]:
    """TrainConfig fields from a train_config.json object (only the keys present)."""
    check_keys(data, [*TOP_LEVEL, *SECTIONS], str(path))
    out: dict[str, Any] = {}
    for key, field in TOP_LEVEL.items():
        if key in data:
            out[field] = field_value(data[key], field, f"{path}: {key}")
    for section, mapping in SECTIONS.items():
        if section not in data:
            continue
        obj = data[section]
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: section {section!r} must be an object, got "
                             f"{json.dumps(obj)}")
        obj = _without_removed(obj, f"{path}: {section}")
        check_keys(obj, [*SPECIAL_KEYS.get(section, ()), *mapping], f"{path}: {section}")
        for key, field in mapping.items():
            if key in obj:
                out[field] = field_value(obj[key], field, f"{path}: {section}.{key}")
    if isinstance(data.get("curriculum"), dict):
        out.update(_curriculum_value(data["curriculum"], path, base))
    if isinstance(data.get("replay"), dict):
        out.update(_replay_value(data["replay"], path, base))
    return out


def _without_removed(obj: dict, where: str) -> dict:
    """A section without the keys of removed settings (``REMOVED_SETTINGS``), refused where one
    is on (``refuse_removed``)."""
    refuse_removed(obj, where)
    return {k: v for k, v in obj.items() if k not in REMOVED_SETTINGS}


def _curriculum_value(sec: dict, path: Path, base: TrainConfig) -> dict[str, Any]:
    if "enabled" not in sec and "stages" not in sec:
        return {}
    where = f"{path}: curriculum"
    enabled = sec.get("enabled", bool(base.curriculum) or sec.get("stages") is not None)
    if not isinstance(enabled, bool):
        raise ValueError(f"{where}.enabled: expected true or false, got {json.dumps(enabled)}")
    stages = sec["stages"] if "stages" in sec else (
        base.curriculum if isinstance(base.curriculum, list) else None)
    if stages == "default":
        stages = None
    if stages is not None:
        if not isinstance(stages, list) or not all(isinstance(s, dict) for s in stages):
            raise ValueError(f"{where}.stages: expected null (the game's default stages) or a "
                             "list of {\"name\", \"games\", \"opponent\", \"threshold\"} "
                             f"objects, got {json.dumps(stages)}")
        from ..games.registry import get_task
        from .curriculum_stages import parse_stages

        # what the game's stages may name, whatever the run: a bound of the run's (a Password
        # stage past num_rules, which env_config.json may set) is TrainConfig's to check, once
        # both files are read
        choices = get_task(base.task).curriculum
        try:  # a game without a curriculum: TrainConfig refuses it, naming the game
            if choices is not None:
                parse_stages(stages, choices=choices)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where}.stages: {e}") from None
    return {"curriculum": (stages if stages is not None else "default") if enabled else None}


def _replay_value(sec: dict, path: Path, base: TrainConfig) -> dict[str, Any]:
    if "enabled" not in sec and "fraction" not in sec:
        return {}
    where = f"{path}: replay"
    fraction = base.replay_fraction or DEFAULT_REPLAY_FRACTION
    if "fraction" in sec:
        fraction = field_value(sec["fraction"], "replay_fraction", f"{where}.fraction")
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"{where}.fraction: must be in [0, 1), got {fraction}")
    enabled = sec.get("enabled", base.replay_fraction > 0 or ("fraction" in sec and fraction > 0))
    if not isinstance(enabled, bool):
        raise ValueError(f"{where}.enabled: expected true or false, got {json.dumps(enabled)}")
    if enabled and fraction <= 0:
        raise ValueError(f"{where}: enabled is true but fraction is 0; set a fraction in "
                         "(0, 1) (0.3 is usual) or enabled false")
    return {"replay_fraction": fraction if enabled else 0.0}


def load_run_config(train_path: PathLike, env_path: Optional[PathLike] = None, *,
                    base: Optional[TrainConfig] = None,
                    overrides: Optional[dict[str, Any]] = None,
                    ) -> tuple[TrainConfig, Optional[str]]:
    """``(TrainConfig, env_url)`` from train_config.json and env_config.json.

    ``env_path`` defaults to ``env_config.json`` next to ``train_path`` if there is one (no env
    file: the base's task and task_config stay). ``base`` supplies every key the files leave
    out; default: ``get_config(<the file's "preset" or "tiny">, task=<env_config.json's task,
    default "openspiel">)``. A ``base`` made for another task than the env file's is replaced by
    its preset for that task (``--preset tiny`` means the tiny preset of the configured game).
    ``overrides`` (TrainConfig field names, e.g. from ``--set``) are applied last. ``env_url``
    is the server URL when env_config.json says ``"execution": "http"``, else None.
    """
    train_path = Path(train_path)
    train = read_json(train_path)
    if env_path is None:
        candidate = train_path.parent / ENV_FILE
        env_path = candidate if candidate.exists() else None
    preset = train.get("preset")
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"{train_path}: preset: expected one of {', '.join(PRESETS)} or null, "
                         f"got {json.dumps(preset)}")
    env, sources = None, str(train_path)
    if env_path is not None:
        env_path = Path(env_path)
        env = read_env(read_json(env_path), env_path)
        sources += f" + {env_path}"
    task = env.task if env is not None else (base.task if base is not None else LEGACY_TASK)
    if base is None or base.task != task:
        base = get_config((base.preset if base is not None else None) or preset or "tiny",
                          task=task)
    values = _train_values(train, train_path, base)
    env_url = None
    if env is not None:
        values.update(env.values)
        env_url = env.url
    try:
        cfg = base.replace(**values)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{sources}: {e}") from None
    from ..games.registry import get_task

    files = get_task(cfg.task).config_files
    if files is not None and files.check is not None:  # the game's check of the whole
        try:
            files.check(cfg)
        except ValueError as e:
            raise ValueError(f"{sources}: {e}") from None
    if overrides:
        cfg = cfg.replace(**overrides)
    return cfg, env_url


# ----------------------------------------------------------------------------- writing

def _curriculum_json(cfg: TrainConfig) -> tuple[bool, Optional[list], int]:
    spec, window = cfg.curriculum, cfg.curriculum_window
    if isinstance(spec, dict):  # Curriculum.to_dict()'s {"stages", "window"} form
        spec, window = spec.get("stages", "default"), spec.get("window", window)
    if not spec:
        return False, None, window
    if spec == "default":
        return True, None, window
    return True, [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in spec], window


def config_to_json(cfg: TrainConfig, env_url: Optional[str] = None) -> tuple[dict, dict]:
    """``(train_config.json object, env_config.json object)`` for ``cfg``: the inverse of
    ``load_run_config`` (every mapped field written, with "_comment"s). ``env_url`` set: the env
    file says ``"execution": "http"`` with that ``base_url``."""
    comments = train_comments(cfg.task)

    def section(name: str) -> dict:
        out: dict[str, Any] = {COMMENT: comments[name]} if name in comments else {}
        if name == "curriculum":
            enabled, stages, window = _curriculum_json(cfg)
            return {**out, "enabled": enabled, "stages": stages, "window": window}
        if name == "replay":
            on = cfg.replay_fraction > 0
            return {**out, "enabled": on,
                    "fraction": cfg.replay_fraction if on else DEFAULT_REPLAY_FRACTION,
                    "capacity": cfg.replay_capacity}
        out.update({key: _jsonable(getattr(cfg, field)) for key, field in SECTIONS[name].items()})
        return out

    train: dict[str, Any] = {COMMENT: comments[""], "preset": cfg.preset,
                             "output_dir": cfg.out_dir}
    for name in SECTIONS:
        train[name] = section(name)
    return train, env_to_json(cfg, env_url)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def dumps(obj: dict) -> str:
    """The files' text: 2-space indent, keys in schema order, a final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # not mkstemp's 600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run_config(cfg: TrainConfig, out_dir: PathLike, env_url: Optional[str] = None,
                     ) -> tuple[Path, Path]:
    """Write ``out_dir/train_config.json`` and ``out_dir/env_config.json`` (atomically; the
    directory is created); return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, env = config_to_json(cfg, env_url)
    train_path, env_path = out / TRAIN_FILE, out / ENV_FILE
    _write_atomic(train_path, dumps(train))
    _write_atomic(env_path, dumps(env))
    return train_path, env_path
