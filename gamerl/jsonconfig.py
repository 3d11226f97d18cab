"""A run as two JSON files, in the seed guide's shape: ``train_config.json`` (the trainer, in
sections) and ``env_config.json`` (the OpenSpiel environment).

    python -m gamerl configure                        # the wizard writes config/*.json
    python -m gamerl train --task openspiel --config config/train_config.json

    cfg, env_url = load_run_config("config/train_config.json")      # + config/env_config.json
    train, env = config_to_json(cfg, env_url)                          # the inverse
    write_run_config(cfg, "config", env_url)                           # -> (train path, env path)

Every key maps to one ``TrainConfig`` field (gamerl/config.py says what each does). A key may be
left out: its field keeps the base config's value (the file's ``preset``, default ``tiny``, for
task ``openspiel``; or the ``base`` argument). An unknown key or section, or a value of the wrong
type, is an error naming the file, the key and the known keys: nothing is silently ignored.
JSON has no comments, so every object (the top level, each section, ``reward``) may hold a
``"_comment"`` (a string or a list of strings), which is ignored.

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
              attn_implementation,        gradient_checkpointing, trainable_layers
              gradient_checkpointing,
              trainable_layers
lora          enabled                     lora
lora          r                           lora_rank
lora          lora_alpha, lora_dropout    lora_alpha, lora_dropout
lora          target_modules              lora_target_modules (null: every projection)
ppo           learning_rate               lr
ppo           batch_size                  minibatch_size (episodes per optimizer step)
ppo           value_head_lr, weight_decay, adam_eps, ppo_epochs, micro_batch_size,
              clip_range, clip_range_high, clip_ratio_c, value_clip_range, vf_coef,
              entropy_coef, max_grad_norm, gamma, lam, discount_per, whiten_advantages,
              target_kl, loss_agg, kl_coef, kl_estimator, kl_loss_estimator, kl_in_reward,
              advantage_estimator, group_size, reward_scale,
              score_batch_size                         the field of the same name
generation    max_new_tokens, temperature, top_p, top_k, max_context_tokens, feedback,
              system_prompt                            the field of the same name
training      epochs, episodes_per_epoch, max_steps, seed, train_seed_start,
              train_seed_count, eval_seed_start, eval_episodes, save_every, eval_every,
              warmstart, warmstart_examples, warmstart_steps, warmstart_batch_size,
              warmstart_lr                             the field of the same name
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

Not in the file (they keep the base's values): ``task`` and ``task_config`` (from
env_config.json), and the Password Game's own fields (num_rules, reward_per_rule,
length_penalty, episode_bonus, bonus_min_rules, reward_mode, warmstart_extra_prob).

env_config.json
===============

===================  ==========================================================
key                  meaning
===================  ==========================================================
execution            ``local_openspiel`` (in-process games) or ``http`` (a server
                     started with ``python -m tasks.openspiel.server``)
base_url             the server's URL; used (and required) with ``http`` only:
                     ``load_run_config`` returns it as its second value
games, opponent, model_seat, mcts_simulations, mcts_uct_c, mcts_rollouts,
illegal_move_policy, max_illegal_retries, reward
                     TrainConfig.task_config (exactly these keys:
                     ``gamerl.games.OPENSPIEL_ENV_KEYS``; tasks/openspiel/README.md)
===================  ==========================================================

A present env_config.json makes the task ``openspiel``. With the curriculum on, training plays
the current stage's games and opponent; ``games`` and ``opponent`` are then what the held-out
evaluation plays (and what training plays without a curriculum).
"""

from __future__ import annotations

import ast
import json
import math
import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional, Union

from .config import PRESETS, TrainConfig, get_config
from .games import OPENSPIEL_ENV_KEYS

PathLike = Union[str, "os.PathLike[str]"]

TRAIN_FILE = "train_config.json"
ENV_FILE = "env_config.json"
COMMENT = "_comment"
EXECUTIONS = ("local_openspiel", "http")
DEFAULT_REPLAY_FRACTION = 0.3  # written for a disabled replay, so switching it on just works

# section -> {json key: TrainConfig field}; the special keys (curriculum.enabled/stages,
# replay.enabled/fraction) are handled by hand and listed in SPECIAL_KEYS.
SECTIONS: dict[str, dict[str, str]] = {
    "model": {"model_name": "model", "use_4bit": "load_in_4bit", "device": "device",
              "dtype": "dtype", "attn_implementation": "attn_implementation",
              "gradient_checkpointing": "gradient_checkpointing",
              "trainable_layers": "trainable_layers"},
    "lora": {"enabled": "lora", "r": "lora_rank", "lora_alpha": "lora_alpha",
             "lora_dropout": "lora_dropout", "target_modules": "lora_target_modules"},
    "ppo": {"learning_rate": "lr", "value_head_lr": "value_head_lr",
            "weight_decay": "weight_decay", "adam_eps": "adam_eps", "ppo_epochs": "ppo_epochs",
            "batch_size": "minibatch_size", "micro_batch_size": "micro_batch_size",
            "clip_range": "clip_range", "clip_range_high": "clip_range_high",
            "clip_ratio_c": "clip_ratio_c", "value_clip_range": "value_clip_range",
            "vf_coef": "vf_coef", "entropy_coef": "entropy_coef",
            "max_grad_norm": "max_grad_norm", "gamma": "gamma", "lam": "lam",
            "discount_per": "discount_per",
            "whiten_advantages": "whiten_advantages", "target_kl": "target_kl",
            "loss_agg": "loss_agg", "kl_coef": "kl_coef", "kl_estimator": "kl_estimator",
            "kl_loss_estimator": "kl_loss_estimator",
            "kl_in_reward": "kl_in_reward", "advantage_estimator": "advantage_estimator",
            "group_size": "group_size", "reward_scale": "reward_scale",
            "score_batch_size": "score_batch_size"},
    "generation": {k: k for k in ("max_new_tokens", "temperature", "top_p", "top_k",
                                  "max_context_tokens", "feedback", "system_prompt")},
    "training": {k: k for k in ("epochs", "episodes_per_epoch", "max_steps", "seed",
                                "train_seed_start", "train_seed_count", "eval_seed_start",
                                "eval_episodes", "save_every", "eval_every", "warmstart",
                                "warmstart_examples", "warmstart_steps",
                                "warmstart_batch_size", "warmstart_lr")},
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
                     "reward_mode", "warmstart_extra_prob")
ENV_ONLY_KEYS = ("execution", "base_url")
REWARD_KEYS = ("scale", "illegal_move_penalty", "legal_move_bonus")

TRAIN_COMMENTS: dict[str, Any] = {
    "": ["gamerl run configuration (gamerl/jsonconfig.py maps every key to a TrainConfig "
         "field; gamerl/config.py documents them). Written by `python -m gamerl configure`.",
         "Run: python -m gamerl train --task openspiel --config config/train_config.json "
         "(env_config.json next to it holds the games).",
         "Keys left out keep the preset's values; unknown keys are errors."],
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
    "generation": "Per turn: an OpenSpiel move is a few tokens (max_new_tokens 8).",
    "training": "epochs x episodes_per_epoch training games; eval_episodes held-out games per "
                "game; max_steps caps the turns of an episode (illegal-move retries included).",
    "curriculum": "easy -> medium -> hard (gamerl/curriculum.py) when stages is null; or a "
                  "list of {\"name\", \"games\", \"opponent\", \"threshold\"}. A stage ends "
                  "when the success rate over the last `window` episodes reaches its threshold.",
    "replay": "Failure replay: `fraction` of each epoch's games are replayed from the "
              "`capacity` most recent failures (fraction is used only when enabled).",
    "logging": "wandb_mode offline | online | disabled (disabled: a local tensorboard + JSONL "
               "log instead).",
}
ENV_COMMENT = ["OpenSpiel environment (tasks/openspiel/README.md). execution: local_openspiel "
               "(in-process) or http (then base_url, a server from `python -m "
               "tasks.openspiel.server`).",
               "opponent random | mcts; model_seat 0 | 1 | random; illegal_move_policy retry | "
               "random | loss. With the curriculum on, training plays the stage's games and "
               "opponent, and these games and opponent are the held-out evaluation's."]

__all__ = ["ENV_FILE", "SECTIONS", "TRAIN_FILE", "config_to_json", "dumps", "load_run_config",
           "read_json", "write_run_config"]


# ----------------------------------------------------------------------------- reading

def read_json(path: PathLike) -> dict:
    """A JSON object from ``path``; errors name the file (and the line of a syntax error)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
                         " (JSON has no comments: use a \"_comment\" key)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level, got "
                         f"{type(data).__name__}")
    return data


_FIELD_TYPES = {f.name: str(f.type) for f in fields(TrainConfig)}


def _describe(kind: str) -> str:
    if kind.startswith("Optional["):
        return _describe(kind[len("Optional["):-1]) + " or null"
    if kind.startswith("Literal["):
        return "one of " + ", ".join(repr(c) for c in _literal_choices(kind))
    return {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
            "list": "a list of strings", "dict": "an object", "object": "a value"}.get(kind, kind)


def _literal_choices(kind: str) -> tuple:
    return tuple(ast.literal_eval("(" + kind[len("Literal["):-1] + ",)"))


def _coerce(value: Any, kind: str) -> Any:
    """``value`` checked against a TrainConfig annotation (a string); ints become floats for
    float fields. Raises ValueError with what was expected."""
    if kind.startswith("Optional["):
        return None if value is None else _coerce(value, kind[len("Optional["):-1])
    ok = True
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value)
        value = float(value) if ok else value
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind.startswith("Literal["):
        ok = isinstance(value, str) and value in _literal_choices(kind)
    elif kind == "list":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif kind == "dict":
        ok = isinstance(value, dict)
    if not ok:
        raise ValueError(f"expected {_describe(kind)}, got {json.dumps(value)}")
    return value


def _check_keys(obj: dict, known, where: str) -> None:
    unknown = [k for k in obj if k != COMMENT and k not in known]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}"
                         + (f" (and {unknown[1:]})" if len(unknown) > 1 else "")
                         + f"; known keys: {', '.join(known)} (and \"{COMMENT}\")")
    comment = obj.get(COMMENT)
    if comment is not None and not (isinstance(comment, str) or (
            isinstance(comment, list) and all(isinstance(c, str) for c in comment))):
        raise ValueError(f"{where}: \"{COMMENT}\" must be a string or a list of strings")


def _field_value(value: Any, field: str, where: str) -> Any:
    try:
        return _coerce(value, _FIELD_TYPES[field])
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _train_values(data: dict, path: Path, base: TrainConfig) -> dict[str, Any]:
    """TrainConfig fields from a train_config.json object (only the keys present)."""
    _check_keys(data, [*TOP_LEVEL, *SECTIONS], str(path))
    out: dict[str, Any] = {}
    for key, field in TOP_LEVEL.items():
        if key in data:
            out[field] = _field_value(data[key], field, f"{path}: {key}")
    for section, mapping in SECTIONS.items():
        if section not in data:
            continue
        obj = data[section]
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: section {section!r} must be an object, got "
                             f"{json.dumps(obj)}")
        _check_keys(obj, [*SPECIAL_KEYS.get(section, ()), *mapping], f"{path}: {section}")
        for key, field in mapping.items():
            if key in obj:
                out[field] = _field_value(obj[key], field, f"{path}: {section}.{key}")
    if isinstance(data.get("curriculum"), dict):
        out.update(_curriculum_value(data["curriculum"], path, base))
    if isinstance(data.get("replay"), dict):
        out.update(_replay_value(data["replay"], path, base))
    return out


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
            raise ValueError(f"{where}.stages: expected null (the default easy -> medium -> "
                             "hard stages) or a list of {\"name\", \"games\", \"opponent\", "
                             f"\"threshold\"}} objects, got {json.dumps(stages)}")
        from .curriculum import Curriculum

        try:
            Curriculum.from_dict(stages)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where}.stages: {e}") from None
    return {"curriculum": (stages if stages is not None else "default") if enabled else None}


def _replay_value(sec: dict, path: Path, base: TrainConfig) -> dict[str, Any]:
    if "enabled" not in sec and "fraction" not in sec:
        return {}
    where = f"{path}: replay"
    fraction = base.replay_fraction or DEFAULT_REPLAY_FRACTION
    if "fraction" in sec:
        fraction = _field_value(sec["fraction"], "replay_fraction", f"{where}.fraction")
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"{where}.fraction: must be in [0, 1), got {fraction}")
    enabled = sec.get("enabled", base.replay_fraction > 0 or ("fraction" in sec and fraction > 0))
    if not isinstance(enabled, bool):
        raise ValueError(f"{where}.enabled: expected true or false, got {json.dumps(enabled)}")
    if enabled and fraction <= 0:
        raise ValueError(f"{where}: enabled is true but fraction is 0; set a fraction in "
                         "(0, 1) (0.3 is usual) or enabled false")
    return {"replay_fraction": fraction if enabled else 0.0}


def _env_values(data: dict, path: Path) -> tuple[dict, Optional[str]]:
    """(task_config, env_url) from an env_config.json object."""
    where = str(path)
    _check_keys(data, [*ENV_ONLY_KEYS, *OPENSPIEL_ENV_KEYS], where)
    execution = data.get("execution", "local_openspiel")
    if execution not in EXECUTIONS:
        raise ValueError(f"{where}: execution: expected one of {', '.join(EXECUTIONS)}, got "
                         f"{json.dumps(execution)}")
    url = data.get("base_url")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ValueError(f"{where}: base_url: expected an http:// or https:// URL, got "
                         f"{json.dumps(url)}")
    if execution == "http" and url is None:
        raise ValueError(f"{where}: execution \"http\" needs a base_url (the server's URL, e.g. "
                         "\"http://127.0.0.1:8002\" for `python -m tasks.openspiel.server "
                         "--port 8002`)")
    settings = {k: data[k] for k in OPENSPIEL_ENV_KEYS if k in data}
    _check_env_settings(settings, where)
    if "reward" in settings:
        settings["reward"] = {k: v for k, v in settings["reward"].items() if k != COMMENT}
    return settings, (url if execution == "http" else None)


def _check_env_settings(s: dict, where: str) -> None:
    from tasks.openspiel.games import GAMES

    from .curriculum import OPPONENTS

    def bad(key: str, expected: str) -> ValueError:
        return ValueError(f"{where}: {key}: expected {expected}, got {json.dumps(s[key])}")

    def is_int(v: Any, low: int) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    if "games" in s:
        games = [s["games"]] if isinstance(s["games"], str) else s["games"]
        if not isinstance(games, list) or not games or not all(isinstance(g, str) for g in games):
            raise bad("games", "a non-empty list of game names")
        unknown = [g for g in games if g not in GAMES]
        if unknown:
            raise ValueError(f"{where}: games: unknown game {unknown[0]!r}; supported games: "
                             + ", ".join(GAMES))
    if "opponent" in s and s["opponent"] not in OPPONENTS:
        raise bad("opponent", " or ".join(repr(o) for o in OPPONENTS))
    if "model_seat" in s and (s["model_seat"] not in (0, 1, "random")
                              or isinstance(s["model_seat"], bool)):
        raise bad("model_seat", "0, 1 or \"random\"")
    for key, low in (("mcts_simulations", 1), ("mcts_rollouts", 1), ("max_illegal_retries", 0)):
        if key in s and not is_int(s[key], low):
            raise bad(key, f"an integer >= {low}")
    if "mcts_uct_c" in s and not (isinstance(s["mcts_uct_c"], (int, float))
                                  and not isinstance(s["mcts_uct_c"], bool)
                                  and math.isfinite(s["mcts_uct_c"]) and s["mcts_uct_c"] >= 0):
        raise bad("mcts_uct_c", "a number >= 0")
    if "illegal_move_policy" in s and s["illegal_move_policy"] not in ("retry", "random", "loss"):
        raise bad("illegal_move_policy", "\"retry\", \"random\" or \"loss\"")
    if "reward" in s:
        reward = s["reward"]
        if not isinstance(reward, dict):
            raise bad("reward", "an object {" + ", ".join(REWARD_KEYS) + "}")
        _check_keys(reward, REWARD_KEYS, f"{where}: reward")
        for key in REWARD_KEYS:
            v = reward.get(key, 0.0)
            if v is None and key == "scale":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{where}: reward.{key}: expected a number"
                                 + (" or null (the game's own scale)" if key == "scale" else "")
                                 + f", got {json.dumps(v)}")


def load_run_config(train_path: PathLike, env_path: Optional[PathLike] = None, *,
                    base: Optional[TrainConfig] = None,
                    overrides: Optional[dict[str, Any]] = None,
                    ) -> tuple[TrainConfig, Optional[str]]:
    """``(TrainConfig, env_url)`` from train_config.json and env_config.json.

    ``env_path`` defaults to ``env_config.json`` next to ``train_path`` if there is one (no env
    file: the base's task and task_config stay). ``base`` supplies every key the files leave
    out; default: ``get_config(<the file's "preset" or "tiny">, task="openspiel")``.
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
    if base is None:
        base = get_config(preset or "tiny", task="openspiel")
    values = _train_values(train, train_path, base)
    env_url = None
    sources = str(train_path)
    if env_path is not None:
        env_path = Path(env_path)
        task_config, env_url = _env_values(read_json(env_path), env_path)
        values.update(task="openspiel", task_config=task_config)
        sources += f" + {env_path}"
    try:
        cfg = base.replace(**values)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{sources}: {e}") from None
    if cfg.task == "openspiel":
        from .games import openspiel_settings

        try:
            openspiel_settings(cfg)
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
    file says ``"execution": "http"`` with that ``base_url``. Needs task ``openspiel``."""
    if cfg.task != "openspiel":
        raise ValueError(f"config_to_json: env_config.json describes OpenSpiel games; this "
                         f"config's task is {cfg.task!r}")

    def section(name: str) -> dict:
        out: dict[str, Any] = {COMMENT: TRAIN_COMMENTS[name]} if name in TRAIN_COMMENTS else {}
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

    train: dict[str, Any] = {COMMENT: TRAIN_COMMENTS[""], "preset": cfg.preset,
                             "output_dir": cfg.out_dir}
    for name in SECTIONS:
        train[name] = section(name)
    env: dict[str, Any] = {COMMENT: ENV_COMMENT,
                           "execution": "http" if env_url else "local_openspiel"}
    if env_url:
        env["base_url"] = env_url
    task_config = dict(cfg.task_config or {})
    for key in [*OPENSPIEL_ENV_KEYS, *sorted(set(task_config) - set(OPENSPIEL_ENV_KEYS))]:
        if key in task_config:
            env[key] = _jsonable(task_config[key])
    return train, env


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
